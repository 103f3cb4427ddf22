"""Fused attention in Triton: the course's reference FlashAttention (lecture §24).

out = softmax(q kᵀ · sm_scale + mask) v, computed tile by tile with a running
(online) softmax, so the N × N score matrix never exists in memory. Forward and
backward (FlashAttention-2 style: the backward recomputes the weights from the
log-sum-exp saved by the forward), with

* causal attention, bottom-right aligned (query i sees key j iff j <= i + N_KV - N_Q),
* an optional sliding window (causal; `window` keys including the query itself, §26),
* grouped-query attention: q has H heads, k/v H_KV heads, H % H_KV == 0; query head h
  reads kv head h // (H // H_KV) (contiguous groups, like `repeat_interleave`, §25),
* any sequence length (tails are masked), head dim D in {16, 32, 64, 128},
* float32 (exact products: input_precision="ieee"), float16 and bfloat16.

On a GPU the tile sizes are autotuned. Under Triton's interpreter
(TRITON_INTERPRET=1, CPU only) autotuning with several configs cannot run, so a
single fixed config is used; the interpreter also cannot run bfloat16.

The file follows Triton's fused-attention tutorial order: helpers, configs,
kernels, launcher (torch.autograd.Function), test, benchmark.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

# ------------------------------------------------------------------- helpers

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # read once: decoration time decides
HEAD_DIMS = (16, 32, 64, 128)
LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2 e): exp2 is the cheaper instruction


def attention_flops(batch: int, heads: int, n: int, head_dim: int, causal: bool) -> float:
    """Forward FLOPs: two N×N×D matrix products of 2 FLOPs per multiply-add; half when causal."""
    flops = 4.0 * batch * heads * n * n * head_dim
    return flops / 2 if causal else flops


def naive_attention(q, k, v, causal=False, sm_scale=None, window=None):
    """Plain torch attention (materialises the N×N weights): the test oracle."""
    n_rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(n_rep, dim=1)  # (B, H, N_KV, D)
    v = v.repeat_interleave(n_rep, dim=1)  # (B, H, N_KV, D)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, H, N_Q, N_KV)
    n_q, n_kv = scores.shape[-2:]
    diff = (torch.arange(n_q, device=q.device)[:, None] + n_kv - n_q
            - torch.arange(n_kv, device=q.device)[None, :])  # i' - j, (N_Q, N_KV)
    visible = torch.ones_like(diff, dtype=torch.bool)
    if causal or window is not None:
        visible &= diff >= 0
    if window is not None:
        visible &= diff < window
    scores = scores.masked_fill(~visible, float("-inf"))
    work = scores if scores.dtype in (torch.float32, torch.float64) else scores.float()
    weights = torch.softmax(work, dim=-1).nan_to_num(0.0).to(q.dtype)  # empty rows → 0
    return torch.matmul(weights, v)  # (B, H, N_Q, D)


# ------------------------------------------------------------------- configs


# (BLOCK_M, BLOCK_N, num_warps, num_stages). Configs that do not fit a GPU (e.g. large float32
# tiles at D = 128) fail to compile and are skipped by the autotuner; the small ones always fit.
_FWD_TILES = [(64, 32, 4, 2), (64, 64, 4, 3), (64, 64, 4, 4), (64, 128, 4, 3),
              (128, 32, 4, 3), (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2)]
_BWD_TILES = [(32, 32, 4, 1), (32, 64, 4, 2), (64, 64, 8, 2), (64, 128, 8, 2)]


# COURSE_KERNELS_MAX_CONFIGS=N keeps the first N of each list (read once, at import): a correctness
# run (scripts/gpu_check.sh) needs each kernel compiled, not tuned. The lists start with tiles that
# fit every GPU and dtype, so a capped list still compiles everywhere; timing uses them all.
MAX_CONFIGS = int(os.environ.get("COURSE_KERNELS_MAX_CONFIGS", "0") or 0)


def _configs(tiles, interpreted_tile) -> list[triton.Config]:
    if INTERPRET:  # one config: the autotuner cannot benchmark without a GPU driver
        bm, bn = interpreted_tile
        return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=4, num_stages=1)]
    kept = tiles[:MAX_CONFIGS] if MAX_CONFIGS > 0 else tiles
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s) for bm, bn, w, s in kept]


def _fwd_configs() -> list[triton.Config]:
    return _configs(_FWD_TILES, (64, 64))


def _bwd_configs() -> list[triton.Config]:
    return _configs(_BWD_TILES, (32, 32))


_FWD_KEY = ["N_Q", "N_KV", "HEAD_DIM", "IS_CAUSAL", "HAS_WINDOW"]

# ------------------------------------------------------------------- kernels


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
               pos_m, lo, hi, N_KV, qk_scale, WINDOW,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr,
               IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """Fold key blocks [lo, hi) into the running softmax of one query tile.

    pos_m holds each query row's position among the keys (i' = i + N_KV - N_Q).
    MASKED=False is the fast path for blocks every row fully sees, in bounds.
    """
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd  # (D, BLOCK_N): kᵀ
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd  # (BLOCK_N, D)
        if MASKED:
            kt = tl.load(k_ptrs, mask=cols[None, :] < N_KV, other=0.0)
            v = tl.load(v_ptrs, mask=cols[:, None] < N_KV, other=0.0)
        else:
            kt = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        s = tl.dot(q, kt, input_precision="ieee") * qk_scale  # (BLOCK_M, BLOCK_N), log2 units
        if MASKED:
            keep = cols[None, :] < N_KV
            if IS_CAUSAL:
                keep = keep & (cols[None, :] <= pos_m[:, None])
            if HAS_WINDOW:
                keep = keep & (pos_m[:, None] - cols[None, :] < WINDOW)
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing seen yet
        alpha = tl.exp2(m_i - m_use)  # rescales what was accumulated under the old maximum
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=_fwd_configs(), key=_FWD_KEY)
@triton.jit
def _attn_fwd(Q, K, V, Out, LSE,
              stride_qb, stride_qh, stride_qm, stride_qd,
              stride_kb, stride_kh, stride_kn, stride_kd,
              stride_vb, stride_vh, stride_vn, stride_vd,
              stride_ob, stride_oh, stride_om, stride_od,
              H, N_REP, N_Q, N_KV, sm_scale, WINDOW,
              HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: BLOCK_M query rows of one (batch, head); LSE gets m + log2(l) per row."""
    tl.static_assert(HEAD_DIM % 16 == 0)
    tl.static_assert(BLOCK_N % 16 == 0)
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    h_kv = h // N_REP  # contiguous groups of query heads share one kv head
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_Q, other=0.0)  # (BLOCK_M, D)
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh
    offset = N_KV - N_Q
    pos_m = offs_m + offset

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * LOG2E

    # Keys this tile can see: [lo, hi). Blocks in [lo, mid) need no mask at all.
    lo = 0
    hi = N_KV
    mid = (N_KV // BLOCK_N) * BLOCK_N
    if IS_CAUSAL:
        hi = tl.maximum(tl.minimum(N_KV, start_m + BLOCK_M + offset), 0)
        mid = tl.minimum(mid, (tl.maximum(start_m + offset + 1, 0) // BLOCK_N) * BLOCK_N)
    if HAS_WINDOW:
        lo = (tl.maximum(start_m + offset - WINDOW + 1, 0) // BLOCK_N) * BLOCK_N
        mid = lo  # every block may cut the band: mask them all
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               pos_m, lo, mid, N_KV, qk_scale, WINDOW,
                               BLOCK_N, HEAD_DIM, False, IS_CAUSAL, HAS_WINDOW)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               pos_m, tl.maximum(mid, lo), hi, N_KV, qk_scale, WINDOW,
                               BLOCK_N, HEAD_DIM, True, IS_CAUSAL, HAS_WINDOW)

    empty = l_i == 0.0  # a row that sees no key at all (causal with N_Q > N_KV): output 0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_Q)
    tl.store(LSE + pid_bh * N_Q + offs_m, lse, mask=offs_m < N_Q)


@triton.jit
def _attn_bwd_preprocess(O, DO, Delta, N_Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Delta_i = Σ_d O_id · dO_id (O and dO contiguous (B, H, N_Q, D))."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m[:, None] < N_Q
    base = pid_bh * N_Q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(O + base, mask=rows, other=0.0).to(tl.float32)
    do = tl.load(DO + base, mask=rows, other=0.0).to(tl.float32)
    tl.store(Delta + pid_bh * N_Q + offs_m, tl.sum(o * do, 1), mask=offs_m < N_Q)


@triton.autotune(configs=_bwd_configs(), key=_FWD_KEY)
@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV,
                   stride_qb, stride_qh, stride_qm, stride_qd,
                   stride_kb, stride_kh, stride_kn, stride_kd,
                   stride_vb, stride_vh, stride_vn, stride_vd,
                   stride_dkb, stride_dkh, stride_dkn, stride_dkd,
                   H, N_REP, N_Q, N_KV, sm_scale, WINDOW,
                   HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: BLOCK_N keys of one kv head; loops over the query heads of its group.

    dO is contiguous like Q; dK and dV share strides.
    """
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    h_kv_count = H // N_REP
    b = pid_bh // h_kv_count
    h_kv = pid_bh % h_kv_count
    start_n = pid_n * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    in_n = offs_n[:, None] < N_KV
    k = tl.load(K + b * stride_kb + h_kv * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=in_n, other=0.0)  # (BLOCK_N, D)
    v = tl.load(V + b * stride_vb + h_kv * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=in_n, other=0.0)  # (BLOCK_N, D)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * LOG2E
    offset = N_KV - N_Q
    lo = 0
    hi = N_Q
    if IS_CAUSAL:  # rows with i' >= j only
        lo = (tl.maximum(start_n - offset, 0) // BLOCK_M) * BLOCK_M
    if HAS_WINDOW:  # rows with i' - j < WINDOW only
        hi = tl.minimum(N_Q, start_n + BLOCK_N + WINDOW - 1 - offset)
    for g in range(0, N_REP):
        h = h_kv * N_REP + g
        bh = b * H + h
        q_base = Q + b * stride_qb + h * stride_qh
        do_base = DO + bh * N_Q * HEAD_DIM
        for start_m in range(lo, hi, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            in_m = offs_m[:, None] < N_Q
            q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=in_m, other=0.0)
            do = tl.load(do_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=in_m, other=0.0)
            lse = tl.load(LSE + bh * N_Q + offs_m, mask=offs_m < N_Q, other=float("inf"))
            delta = tl.load(Delta + bh * N_Q + offs_m, mask=offs_m < N_Q, other=0.0)
            st = tl.dot(k, tl.trans(q), input_precision="ieee") * qk_scale  # (BLOCK_N, BLOCK_M): sᵀ
            pt = tl.exp2(st - lse[None, :])  # the forward's weights, transposed
            keep = (offs_m[None, :] < N_Q) & (offs_n[:, None] < N_KV)
            if IS_CAUSAL:
                keep = keep & (offs_n[:, None] <= offs_m[None, :] + offset)
            if HAS_WINDOW:
                keep = keep & (offs_m[None, :] + offset - offs_n[:, None] < WINDOW)
            pt = tl.where(keep, pt, 0.0)
            dv += tl.dot(pt.to(do.dtype), do, input_precision="ieee")  # Pᵀ dO
            dpt = tl.dot(v, tl.trans(do), input_precision="ieee")  # (dO Vᵀ)ᵀ
            dst = pt * (dpt - delta[None, :])  # dSᵀ
            dk += tl.dot(dst.to(q.dtype), q, input_precision="ieee")  # dSᵀ Q
    dk = dk * sm_scale
    dk_ptrs = DK + b * stride_dkb + h_kv * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd
    dv_ptrs = DV + b * stride_dkb + h_kv * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd
    tl.store(dk_ptrs, dk.to(DK.dtype.element_ty), mask=in_n)
    tl.store(dv_ptrs, dv.to(DV.dtype.element_ty), mask=in_n)


@triton.autotune(configs=_bwd_configs(), key=_FWD_KEY)
@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, Delta, DQ,
                 stride_qb, stride_qh, stride_qm, stride_qd,
                 stride_kb, stride_kh, stride_kn, stride_kd,
                 stride_vb, stride_vh, stride_vn, stride_vd,
                 H, N_REP, N_Q, N_KV, sm_scale, WINDOW,
                 HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: BLOCK_M query rows of one head. dO and dQ are contiguous."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    h_kv = h // N_REP
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_m = offs_m[:, None] < N_Q
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=in_m, other=0.0)
    rows = pid_bh * N_Q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    do = tl.load(DO + rows, mask=in_m, other=0.0)
    lse = tl.load(LSE + pid_bh * N_Q + offs_m, mask=offs_m < N_Q, other=float("inf"))
    delta = tl.load(Delta + pid_bh * N_Q + offs_m, mask=offs_m < N_Q, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * LOG2E
    offset = N_KV - N_Q
    pos_m = offs_m + offset
    lo = 0
    hi = N_KV
    if IS_CAUSAL:
        hi = tl.maximum(tl.minimum(N_KV, start_m + BLOCK_M + offset), 0)
    if HAS_WINDOW:
        lo = (tl.maximum(start_m + offset - WINDOW + 1, 0) // BLOCK_N) * BLOCK_N
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        in_n = offs_n[:, None] < N_KV
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=in_n, other=0.0)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=in_n, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale  # (BLOCK_M, BLOCK_N)
        p = tl.exp2(s - lse[:, None])
        keep = (offs_n[None, :] < N_KV) & in_m
        if IS_CAUSAL:
            keep = keep & (offs_n[None, :] <= pos_m[:, None])
        if HAS_WINDOW:
            keep = keep & (pos_m[:, None] - offs_n[None, :] < WINDOW)
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # dO Vᵀ
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision="ieee")  # dS K
    dq = dq * sm_scale
    tl.store(DQ + rows, dq.to(DQ.dtype.element_ty), mask=in_m)


# ------------------------------------------------------------------ launcher


def _check_inputs(q, k, v, window):
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be (B, H, N, D) tensors")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    B, H, _, D = q.shape
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} disagree on batch or head dim")
    if H % k.shape[1] != 0:
        raise ValueError(f"q heads ({H}) must be a multiple of kv heads ({k.shape[1]})")
    if D not in HEAD_DIMS:
        raise ValueError(f"head dim {D} not supported (use one of {HEAD_DIMS})")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError("q, k, v must share one dtype: float32, float16 or bfloat16")
    if window is not None and window < 1:
        raise ValueError("window must be at least 1 (the query itself)")


def _forward(q, k, v, causal, sm_scale, window):
    B, H, N_Q, D = q.shape
    H_KV, N_KV = k.shape[1], k.shape[2]
    out = torch.empty((B, H, N_Q, D), dtype=q.dtype, device=q.device)  # (B, H, N_Q, D)
    lse = torch.empty((B, H, N_Q), dtype=torch.float32, device=q.device)  # log2-sum-exp per row
    grid = lambda meta: (triton.cdiv(N_Q, meta["BLOCK_M"]), B * H)
    _attn_fwd[grid](q, k, v, out, lse,
                    q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                    k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                    v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                    out.stride(0), out.stride(1), out.stride(2), out.stride(3),
                    H, H // H_KV, N_Q, N_KV, sm_scale, window or 0,
                    HEAD_DIM=D, IS_CAUSAL=causal, HAS_WINDOW=window is not None)
    return out, lse


def _backward(q, k, v, out, lse, do, causal, sm_scale, window):
    B, H, N_Q, D = q.shape
    H_KV, N_KV = k.shape[1], k.shape[2]
    do = do.contiguous()  # (B, H, N_Q, D)
    delta = torch.empty_like(lse)  # (B, H, N_Q)
    _attn_bwd_preprocess[(triton.cdiv(N_Q, 64), B * H)](out, do, delta, N_Q, HEAD_DIM=D, BLOCK_M=64)
    dq = torch.empty((B, H, N_Q, D), dtype=q.dtype, device=q.device)
    dk = torch.empty((B, H_KV, N_KV, D), dtype=k.dtype, device=k.device)
    dv = torch.empty((B, H_KV, N_KV, D), dtype=v.dtype, device=v.device)
    common = (H, H // H_KV, N_Q, N_KV, sm_scale, window or 0)
    flags = dict(HEAD_DIM=D, IS_CAUSAL=causal, HAS_WINDOW=window is not None)
    grid_kv = lambda meta: (triton.cdiv(N_KV, meta["BLOCK_N"]), B * H_KV)
    _attn_bwd_dkdv[grid_kv](q, k, v, do, lse, delta, dk, dv,
                            q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                            k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                            v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                            dk.stride(0), dk.stride(1), dk.stride(2), dk.stride(3),
                            *common, **flags)
    grid_q = lambda meta: (triton.cdiv(N_Q, meta["BLOCK_M"]), B * H)
    _attn_bwd_dq[grid_q](q, k, v, do, lse, delta, dq,
                         q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                         k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                         v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                         *common, **flags)
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, window):
        out, lse = _forward(q, k, v, causal, sm_scale, window)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.sm_scale, ctx.window = causal, sm_scale, window
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse, do, ctx.causal, ctx.sm_scale, ctx.window)
        return dq, dk, dv, None, None, None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None, window: int | None = None) -> torch.Tensor:
    """Fused attention. q (B, H, N_Q, D); k, v (B, H_KV, N_KV, D), H % H_KV == 0 → (B, H, N_Q, D).

    causal: bottom-right aligned mask. window: query i (at i' = i + N_KV - N_Q) sees key j iff
    0 <= i' - j < window (implies causal). sm_scale defaults to 1/√D. Differentiable.
    """
    _check_inputs(q, k, v, window)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    return _FlashAttention.apply(q, k, v, bool(causal or window is not None), scale,
                                 None if window is None else int(window))


# ---------------------------------------------------------------------- test

_TOLERANCE = {torch.float32: 2e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}


def _test(B=2, H=4, H_KV=2, N_Q=97, N_KV=97, D=32, causal=True, window=None, dtype=torch.float16,
          device=None, backward=True, scale=1.0, seed=0) -> float:
    """Forward (and backward) against `naive_attention` in float64; returns the worst error.

    scale multiplies q and k (×10 makes the running maximum jump between blocks).
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    make = lambda *shape, s=1.0: (torch.randn(*shape, generator=gen) * s).to(device=device, dtype=dtype)
    q, k, v = make(B, H, N_Q, D, s=scale), make(B, H_KV, N_KV, D, s=scale), make(B, H_KV, N_KV, D)
    do = make(B, H, N_Q, D)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected = naive_attention(q64, k64, v64, causal, window=window)
    qt, kt, vt = (t.detach().clone().requires_grad_(backward) for t in (q, k, v))
    out = attention(qt, kt, vt, causal, window=window)
    tol = _TOLERANCE[dtype]
    worst = (out.double() - expected).abs().max().item()
    assert worst <= tol * 4, f"forward differs by {worst:.3g}"
    if backward:
        grads = torch.autograd.grad(out, (qt, kt, vt), do)
        expected_grads = torch.autograd.grad(expected, (q64, k64, v64), do.double())
        for name, got, want in zip("qkv", grads, expected_grads, strict=True):
            error = (got.double() - want).abs().max().item()
            size = max(1.0, want.abs().max().item())
            assert error <= tol * 10 * size, f"d{name} differs by {error:.3g}"
            worst = max(worst, error)
    return worst


# ----------------------------------------------------------------- benchmark


def bench(batch_heads: int = 64, head_dims=(64, 128), lengths=(1024, 2048, 4096, 8192, 16384),
          dtype=torch.bfloat16, naive_limit_bytes: float = 8e9) -> list[dict]:
    """TFLOP/s of this kernel, torch SDPA (flash backend where available) and the naive reference.

    batch_heads = B·H is split as B = 4, H = batch_heads // 4. Prints a table; returns its rows.
    """
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return []
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    B, H = 4, max(1, batch_heads // 4)
    rows = []
    print(f"{'D':>4} {'causal':>6} {'N':>6} {'ours':>8} {'sdpa':>8} {'naive':>8}   (TFLOP/s, {dtype})")
    for D in head_dims:
        for causal in (False, True):
            for N in lengths:
                q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
                flops = attention_flops(B, H, N, D, causal)
                tflops = lambda ms, f=flops: f / (ms * 1e-3) / 1e12

                def sdpa(q=q, k=k, v=v, causal=causal):
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
                        return scaled_dot_product_attention(q, k, v, is_causal=causal)

                row = {"D": D, "causal": causal, "N": N,
                       "ours": tflops(triton.testing.do_bench(lambda q=q, k=k, v=v, c=causal: attention(q, k, v, c))),
                       "sdpa": tflops(triton.testing.do_bench(sdpa)), "naive": None}
                if B * H * N * N * 4 * 2 <= naive_limit_bytes:  # scores + weights in float32
                    row["naive"] = tflops(triton.testing.do_bench(
                        lambda q=q, k=k, v=v, c=causal: naive_attention(q, k, v, c)))
                rows.append(row)
                naive = f"{row['naive']:8.1f}" if row["naive"] is not None else f"{'-':>8}"
                print(f"{D:>4} {causal!s:>6} {N:>6} {row['ours']:8.1f} {row['sdpa']:8.1f} {naive}")
                del q, k, v
    return rows


if __name__ == "__main__":
    for dt in (torch.float32, torch.float16) + ((torch.bfloat16,) if torch.cuda.is_available() else ()):
        print(dt, "worst error", _test(dtype=dt))
    bench()
