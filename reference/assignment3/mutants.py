"""Misconception catalogue of assignment 3: known wrong versions of the student functions.

When a student's output is wrong, the grader runs the mutants of that function on
the same inputs and names the first one that reproduces it.

Each body uses only torch, math and names that the reference module of its
function defines (efficient.py: repeat_kv, _attend, _relative_positions,
_banded_attention; flash.py: BLOCK_N), because `grade validate` appends the
source to that module and runs it as a submission. Only one function is replaced
at a time, so e.g. the GQA mutants' repeat_kv is always the correct one.

The kernel mistakes belong to `launch_forward`, the contract's launcher that the
kernel tasks are graded through: each one's `patch` is the mistake written into the
reference's kernel (what `grade validate` grades, by construction like a student's
kernel), and its body is a torch emulation of what that kernel computes, which the
diagnosis compares with the student's output. Bugs that depend on the tiling read the
stub's BLOCK_N = 64 (what `grade validate` runs) and are also tried with BLOCK_N bound to
16, 32 and 128 (`vary=`): a student's kernel may use any of them, and the diagnosis says
which reproduced it. The flash_attention mistake (the host code, task flash_launcher) is
a patch of the reference's launcher; its emulation avoids torch's matmul and softmax
names, like a student's host code must.

kv_cache_bytes returns a Python int; its mutants are matched on that number.
"""

from __future__ import annotations

import math

import torch

from grader.harness.catalogue import mutant
from reference.assignment3.efficient import _attend, _banded_attention, _relative_positions, repeat_kv
from reference.assignment3.flash import BLOCK_N

TILE_SIZES = (16, 32, 64, 128)  # key tiles a student's kernel may use (powers of two ≥ 16)

# ----------------------------------------------------------------------- gqa


@mutant(function="repeat_kv", id="repeat_kv_tiled",
        title="kv heads tiled instead of repeated in place", section="§25",
        explanation="x.repeat(1, n_rep, 1, 1) lays the heads out as kv0, kv1, kv0, kv1, ...; query "
                    "head h must read kv head h // n_rep, so each kv head is repeated n_rep times in "
                    "a row (repeat_interleave, or expand + reshape).")
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


@mutant(function="grouped_query_attention", id="gqa_tiled_heads",
        title="query head h paired with kv head h % Hkv", section="§25",
        explanation="The query heads of one group are contiguous: heads 0 … n_rep−1 share kv head 0, "
                    "the next n_rep share kv head 1. Pairing head h with kv head h % Hkv (tiling the kv "
                    "heads) mixes the groups up; use h // n_rep.")
def gqa_tiled_heads(q, k, v, causal=False):
    n_rep = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    visible = _relative_positions(q.shape[-2], k.shape[-2], q.device) >= 0 if causal else None
    return _attend(q, k, v, visible)


@mutant(function="grouped_query_attention", id="gqa_causal_top_left",
        title="causal mask aligned top-left", section="§13",
        explanation="With fewer queries than keys the queries are the last positions (a cache holds "
                    "the earlier ones): query i sits at i + Lk − Lq and sees every key up to there. "
                    "A plain lower triangle (j ≤ i) hides keys it should see.")
def gqa_causal_top_left(q, k, v, causal=False):
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    n_q, n_k = q.shape[-2], k.shape[-2]
    visible = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril() if causal else None
    return _attend(q, k, v, visible)


# ------------------------------------------------------------ sliding_window


@mutant(function="sliding_window_mask", id="window_mask_too_wide",
        title="window one key too wide", section="§26",
        explanation="A window of W keys includes the query itself, so the oldest visible key is "
                    "W − 1 positions back: keep 0 ≤ i' − j < W, not ≤ W.")
def window_mask_too_wide(n_q, n_k, window, device=None):
    rel = _relative_positions(n_q, n_k, device)
    return (rel >= 0) & (rel <= window)


@mutant(function="sliding_window_mask", id="window_mask_excludes_self",
        title="window leaves out the query's own position", section="§26",
        explanation="The window counts the query's own position: window = 1 lets a query see only "
                    "itself. Keep 0 ≤ i' − j < W (the Mistral convention).")
def window_mask_excludes_self(n_q, n_k, window, device=None):
    rel = _relative_positions(n_q, n_k, device)
    return (rel > 0) & (rel <= window)


@mutant(function="sliding_window_mask", id="window_mask_top_left",
        title="window aligned top-left", section="§26",
        explanation="With fewer queries than keys, query i sits at i' = i + n_k − n_q; measure the "
                    "distance i' − j from there, like the bottom-right causal mask.")
def window_mask_top_left(n_q, n_k, window, device=None):
    rel = _relative_positions(n_q, n_k, device) - (n_k - n_q)  # i − j
    return (rel >= 0) & (rel < window)


@mutant(function="sliding_window_mask", id="window_mask_two_sided",
        title="window reaches into the future", section="§26",
        explanation="A sliding window for a language model is causal: it only looks back. "
                    "Keep 0 ≤ i' − j < W, not |i' − j| < W.")
def window_mask_two_sided(n_q, n_k, window, device=None):
    return _relative_positions(n_q, n_k, device).abs() < window


@mutant(function="sliding_window_attention", id="window_attention_too_wide",
        title="each query sees window + 1 keys", section="§26",
        explanation="A window of W keys includes the query itself: the oldest visible key is "
                    "W − 1 positions back (0 ≤ i − j < W).")
def window_attention_too_wide(q, k, v, window):
    return _banded_attention(q, k, v, 0, window)


@mutant(function="sliding_window_attention", id="window_attention_excludes_self",
        title="the query does not see itself", section="§26",
        explanation="The window counts the query's own position: with window = 1 a query attends "
                    "only to itself. Keep 0 ≤ i − j < W.")
def window_attention_excludes_self(q, k, v, window):
    return _banded_attention(q, k, v, 1, window)


@mutant(function="sliding_window_attention", id="window_attention_two_sided",
        title="window not causal (sees future keys)", section="§26",
        explanation="Sliding-window attention in a language model is causal: a query sees itself and "
                    "the W − 1 keys before it, never later ones.")
def window_attention_two_sided(q, k, v, window):
    return _banded_attention(q, k, v, -(window - 1), window - 1)


# ----------------------------------------------------------------- streaming


@mutant(function="streaming_attention", id="streaming_without_sinks",
        title="sinks dropped: a plain sliding window", section="§29",
        explanation="The first n_sinks keys must stay visible to every later query, however far "
                    "back they are: j < n_sinks or i' − j < window.")
def streaming_without_sinks(q, k, v, window, n_sinks=4):
    rel = _relative_positions(q.shape[-2], k.shape[-2], q.device)
    return _attend(q, k, v, (rel >= 0) & (rel < window))


@mutant(function="streaming_attention", id="streaming_sinks_see_future",
        title="early queries see sink keys from their future", section="§29",
        explanation="A sink is still a key in the sequence: a query at position i' < n_sinks must "
                    "not see sinks after it. Combine the sink rule with j ≤ i'.")
def streaming_sinks_see_future(q, k, v, window, n_sinks=4):
    rel = _relative_positions(q.shape[-2], k.shape[-2], q.device)
    is_sink = torch.arange(k.shape[-2], device=q.device)[None, :] < n_sinks
    return _attend(q, k, v, is_sink | ((rel >= 0) & (rel < window)))


@mutant(function="streaming_attention", id="streaming_sinks_inside_window",
        title="sinks taken out of the window's budget", section="§29",
        explanation="The window is the last `window` keys up to the query, on top of the n_sinks "
                    "sinks; it does not shrink to window − n_sinks.")
def streaming_sinks_inside_window(q, k, v, window, n_sinks=4):
    rel = _relative_positions(q.shape[-2], k.shape[-2], q.device)
    is_sink = torch.arange(k.shape[-2], device=q.device)[None, :] < n_sinks
    return _attend(q, k, v, (rel >= 0) & (is_sink | (rel < window - n_sinks)))


@mutant(function="streaming_attention", id="streaming_top_left",
        title="window and causality aligned top-left", section="§29",
        explanation="With fewer queries than keys, query i sits at i' = i + Lk − Lq; measure both "
                    "the causal limit and the window from there.")
def streaming_top_left(q, k, v, window, n_sinks=4):
    rel = _relative_positions(q.shape[-2], k.shape[-2], q.device) - (k.shape[-2] - q.shape[-2])
    is_sink = torch.arange(k.shape[-2], device=q.device)[None, :] < n_sinks
    return _attend(q, k, v, (rel >= 0) & (is_sink | (rel < window)))


# ------------------------------------------------------------- flash_forward


@mutant(function="launch_forward", id="flash_no_final_division",
        title="accumulator never divided by the running sum", section="§24",
        patch=[("    out = acc / tl.where(empty, 1.0, l_i)[:, None]\n", "    out = acc\n")],
        explanation="At the end of the loop acc holds Σ e^(s_j − m) v_j; the softmax weights are those "
                    "exponentials divided by their sum, so the output is acc / l, row by row.")
def flash_no_final_division(q, k, v, causal=False, sm_scale=None):
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q.float().unsqueeze(-2) * k.float().unsqueeze(-3)).sum(-1) * scale  # [B, H, N, N]
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return (p.unsqueeze(-1) * v.float().unsqueeze(-3)).sum(-2).to(q.dtype)


@mutant(function="launch_forward", id="flash_ignores_sm_scale",
        title="the sm_scale argument is ignored", section="§24",
        patch=[("    qk_scale = sm_scale * 1.4426950408889634  # sm_scale · log2(e)\n\n    hi = N_KV",
                "    qk_scale = 1.4426950408889634 / (HEAD_DIM ** 0.5)\n\n    hi = N_KV")],
        explanation="sm_scale defaults to 1/√D, but a caller may pass another scale; multiply the "
                    "scores by the sm_scale you were given.")
def flash_ignores_sm_scale(q, k, v, causal=False, sm_scale=None):
    n = q.shape[-2]
    s = (q.float().unsqueeze(-2) * k.float().unsqueeze(-3)).sum(-1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return ((p.unsqueeze(-1) * v.float().unsqueeze(-3)).sum(-2) / p.sum(-1, keepdim=True)).to(q.dtype)


@mutant(function="launch_forward", id="flash_exp2_without_log2e",
        title="exp2 used without the log2(e) factor", section="§24",
        patch=[("    qk_scale = sm_scale * 1.4426950408889634  # sm_scale · log2(e)\n\n    hi = N_KV",
                "    qk_scale = sm_scale\n\n    hi = N_KV")],
        explanation="2^x equals e^x only after multiplying x by log2(e) ≈ 1.4427. Fold it into the "
                    "scale once (qk_scale = sm_scale · log2 e) and use exp2 for every exponential.")
def flash_exp2_without_log2e(q, k, v, causal=False, sm_scale=None):
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q.float().unsqueeze(-2) * k.float().unsqueeze(-3)).sum(-1) * scale * math.log(2.0)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return ((p.unsqueeze(-1) * v.float().unsqueeze(-3)).sum(-2) / p.sum(-1, keepdim=True)).to(q.dtype)


@mutant(function="launch_forward", id="flash_tail_keys_unmasked",
        title="keys past the end count with score 0", section="§24", vary={"BLOCK_N": TILE_SIZES},
        patch=[("        keep = cols[None, :] < N_KV\n", "        keep = cols[None, :] >= 0\n")],
        explanation="When N is not a multiple of BLOCK_N the last block runs past the end. Loading "
                    "those keys as 0 is not enough: a score of 0 still gets weight e^(0 − m). Set the "
                    "scores of keys with index ≥ N to −inf before the running max and the exponentials.")
def flash_tail_keys_unmasked(q, k, v, causal=False, sm_scale=None):
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    pad = 0 if causal else (-n) % BLOCK_N  # causal masking hides the padding anyway
    zeros = torch.zeros(*k.shape[:-2], pad, k.shape[-1], dtype=torch.float32, device=q.device)
    kp, vp = torch.cat([k.float(), zeros], dim=-2), torch.cat([v.float(), zeros], dim=-2)  # [B, H, N+pad, D]
    s = (q.float().unsqueeze(-2) * kp.unsqueeze(-3)).sum(-1) * scale  # [B, H, N, N+pad]
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return ((p.unsqueeze(-1) * vp.unsqueeze(-3)).sum(-2) / p.sum(-1, keepdim=True)).to(q.dtype)


@mutant(function="launch_forward", id="flash_no_rescale",
        title="running sums never rescaled when the maximum grows", section="§24", vary={"BLOCK_N": TILE_SIZES},
        patch=[("        alpha = tl.exp2(m_i - m_use)\n", "        alpha = tl.full([BLOCK_M], 1.0, tl.float32)\n")],
        explanation="acc and l were accumulated against the old running maximum m. When a block raises "
                    "it to m_new, multiply both by α = e^(m − m_new) before adding the new block; "
                    "otherwise early blocks keep far too much weight.")
def flash_no_rescale(q, k, v, causal=False, sm_scale=None):
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q.float().unsqueeze(-2) * k.float().unsqueeze(-3)).sum(-1) * scale  # [B, H, N, N]
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    m = torch.full(s.shape[:-1], float("-inf"), device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(*s.shape[:-1], v.shape[-1], device=q.device)
    for start in range(0, n, BLOCK_N):
        block = s[..., start:start + BLOCK_N]
        m = torch.maximum(m, block.amax(-1))
        p = torch.exp(block - m.unsqueeze(-1))
        l = l + p.sum(-1)
        acc = acc + (p.unsqueeze(-1) * v.float()[..., start:start + BLOCK_N, :].unsqueeze(-3)).sum(-2)
    return (acc / l.unsqueeze(-1)).to(q.dtype)


@mutant(function="launch_forward", id="flash_acc_not_rescaled",
        title="running sum rescaled, accumulator not", section="§24", vary={"BLOCK_N": TILE_SIZES},
        patch=[("        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=\"ieee\")\n",
                "        acc = acc + tl.dot(p.to(v.dtype), v, input_precision=\"ieee\")\n")],
        explanation="When the running maximum grows, both running quantities were computed against the "
                    "old maximum: rescale acc by α = e^(m − m_new) too, not only l.")
def flash_acc_not_rescaled(q, k, v, causal=False, sm_scale=None):
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q.float().unsqueeze(-2) * k.float().unsqueeze(-3)).sum(-1) * scale  # [B, H, N, N]
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    m = torch.full(s.shape[:-1], float("-inf"), device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(*s.shape[:-1], v.shape[-1], device=q.device)
    for start in range(0, n, BLOCK_N):
        block = s[..., start:start + BLOCK_N]
        m_new = torch.maximum(m, block.amax(-1))
        p = torch.exp(block - m_new.unsqueeze(-1))
        l = l * torch.exp(m - m_new) + p.sum(-1)
        acc = acc + (p.unsqueeze(-1) * v.float()[..., start:start + BLOCK_N, :].unsqueeze(-3)).sum(-2)
        m = m_new
    return (acc / l.unsqueeze(-1)).to(q.dtype)


# ------------------------------------------------------------ flash_backward

LN_2 = 0.6931471805599453  # ln 2: a base-2 score times ln 2 is the natural one


@mutant(function="launch_backward", id="flash_bwd_lse_natural_log",
        title="LSE read as a natural logarithm", section="§24",
        patch=[("            pt = tl.exp2(st - lse[None, :])  # the forward's weights, transposed\n",
                "            pt = tl.exp(st * 0.6931471805599453 - lse[None, :])  # natural log assumed\n"),
               ("        p = tl.exp2(s - lse[:, None])\n",
                "        p = tl.exp(s * 0.6931471805599453 - lse[:, None])\n")],
        explanation="The forward kernel stores LSE in base 2, m + log2(l) in the units of its exp2 scores "
                    "(the contract's LSE: logsumexp · log2 e), not the natural log FlashAttention's papers use. "
                    "Recompute the weights as p = exp2(s · sm_scale · log2 e − LSE); exp(s · sm_scale − LSE) "
                    "scales each row's weights by the wrong factor, so every gradient is off.")
def flash_bwd_lse_natural_log(q, k, v, grad_out, causal=False, sm_scale=None, config=None):
    n_q, n_kv, d = q.shape[2], k.shape[2], q.shape[-1]
    n_rep = q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(d) if sm_scale is None else float(sm_scale)
    keys = k.float().repeat_interleave(n_rep, dim=1)  # [B, H, N_KV, D]
    values = v.float().repeat_interleave(n_rep, dim=1)  # [B, H, N_KV, D]
    s = (q.float() @ keys.transpose(-2, -1)) * scale  # natural scores [B, H, N_Q, N_KV]
    if causal:
        visible = torch.ones(n_q, n_kv, dtype=torch.bool, device=q.device).tril(n_kv - n_q)
        s = s.masked_fill(~visible, float("-inf"))
    natural = torch.logsumexp(s, dim=-1)  # [B, H, N_Q]
    empty = torch.isneginf(natural)
    right = torch.exp(s - torch.where(empty, 0.0, natural)[..., None])  # the forward's weights
    do = grad_out.float()
    delta = ((right @ values) * do).sum(dim=-1)  # [B, H, N_Q], from the right output, as the contract gives it
    lse = torch.where(empty, float("inf"), natural / LN_2)  # base 2, read below as if it were natural
    p = torch.exp(s - lse[..., None])  # [B, H, N_Q, N_KV]
    ds = p * (do @ values.transpose(-2, -1) - delta[..., None])  # [B, H, N_Q, N_KV]
    dq = (ds @ keys) * scale  # [B, H, N_Q, D]
    b, h_kv = k.shape[0], k.shape[1]
    dk = ((ds.transpose(-2, -1) @ q.float()) * scale).reshape(b, h_kv, n_rep, n_kv, d).sum(2)  # [B, H_KV, N_KV, D]
    dv = (p.transpose(-2, -1) @ do).reshape(b, h_kv, n_rep, n_kv, d).sum(2)  # [B, H_KV, N_KV, D]
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# ------------------------------------------------------------ flash_launcher


@mutant(function="flash_attention", id="launcher_contiguous_strides",
        title="strides of a contiguous copy passed for the real tensors", section="§24",
        patch=[("*_strides(q, k, v, out), H, H // H_KV", "*_strides(q.contiguous(), k.contiguous(), v.contiguous(), "
                                                     "out), H, H // H_KV")],
        explanation="The kernel finds element (b, h, i, d) at b·stride_b + h·stride_h + i·stride_i + d·stride_d of "
                    "the tensor it is given. A view (a transpose, a slice) has other strides than a contiguous "
                    "tensor of its shape: pass q.stride(), k.stride(), v.stride() of the tensors you launch on.")
def launcher_contiguous_strides(q, k, v, causal=False, sm_scale=None):
    q, k, v = (torch.as_strided(t, t.shape, torch.empty(t.shape, device="meta").stride(), t.storage_offset())
               for t in (q, k, v))  # what a kernel reads with a contiguous tensor's strides
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q.double().unsqueeze(-2) * k.double().unsqueeze(-3)).sum(-1) * scale  # [B, H, N, N]
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return ((p.unsqueeze(-1) * v.double().unsqueeze(-3)).sum(-2) / p.sum(-1, keepdim=True)).to(q.dtype)


# ------------------------------------------------------------------- kv_cache


@mutant(function="kv_cache_bytes", id="kv_cache_keys_only", title="keys counted, values forgotten",
        section="§25", explanation="The cache holds a key and a value vector per token, head and "
        "layer: multiply by 2.")
def kv_cache_keys_only(n_layers, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return n_layers * n_kv_heads * head_dim * seq_len * batch_size * bytes_per_value


@mutant(function="kv_cache_bytes", id="kv_cache_one_layer", title="one layer only",
        section="§25", explanation="Every layer keeps its own keys and values: multiply by n_layers.")
def kv_cache_one_layer(n_layers, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_value=2):
    return 2 * n_kv_heads * head_dim * seq_len * batch_size * bytes_per_value
