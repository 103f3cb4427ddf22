"""How the grader launches your kernels: the contract of flash.py's @triton.jit kernels (§24).

The kernel tasks (flash_forward, flash_gqa, flash_speed, flash_backward) are graded by
construction. The grader takes from your flash.py only its @triton.jit functions, its
constants (`BLOCK_M = 64` and the like: plain numbers) and its triton imports, puts them in a
worker that holds none of your other code, and calls the launchers below. Each one allocates
every output itself, filled with NaN (an element your kernel never writes stays NaN), launches
your kernel with exactly these arguments and returns what the kernel wrote. So:

* your kernels keep the stub's names and signatures (the backward kernels' are below);
* everything the result needs happens inside the kernels: host code around them is not run
  for these tasks (flash_launcher grades your own flash_attention, which must launch
  _flash_fwd_kernel the same way and return exactly what it writes).

Tile sizes and launch options are read from flash.py's constants when they are plain numbers
(block sizes: powers of two, at least 16); otherwise the defaults below are used.

You can run these launchers yourself on your own file (`import contract; contract.launch_forward(q, k, v)`
with flash.py next to it); the public tests do.
"""

from __future__ import annotations

import math

import flash
import torch
import triton

FORWARD = {"BLOCK_M": 64, "BLOCK_N": 64, "NUM_WARPS": 4, "NUM_STAGES": 2}
BACKWARD = {"BWD_BLOCK_M": 32, "BWD_BLOCK_N": 32, "BWD_NUM_WARPS": 4, "BWD_NUM_STAGES": 1}
LOG2_E = 1.4426950408889634


# The launches the hidden tests make, as (dtype, head dim, causal): before any kernel runs, the grader
# compiles your kernels for a GPU at each of them (on the CPU, to Triton's first stage).
FORWARD_LAUNCHES = [(dtype, d, causal) for dtype in ("fp32", "fp16") for d in (16, 32, 64, 128)
                    for causal in (False, True)]
BACKWARD_LAUNCHES = [("fp32", 16, False), ("fp32", 16, True), ("fp32", 64, False), ("fp32", 64, True),
                     ("fp16", 32, True)]


def specialisations() -> list[tuple[str, list[str], dict, dict[str, int]]]:
    """Each launch above as Triton compiles it: (kernel, the Triton types of its positional arguments
    in order, its constexprs, its launch options), with flash.py's tile sizes."""
    found = []
    forward = settings(FORWARD)
    for dtype, d, causal in FORWARD_LAUNCHES:
        types = [f"*{dtype}"] * 4 + ["*fp32"] + ["i32"] * 20 + ["fp32"]
        meta = {"BLOCK_M": forward["BLOCK_M"], "BLOCK_N": forward["BLOCK_N"], "HEAD_DIM": d, "IS_CAUSAL": causal}
        found.append(("_flash_fwd_kernel", types, meta,
                      {"num_warps": forward["NUM_WARPS"], "num_stages": forward["NUM_STAGES"]}))
    backward = settings(BACKWARD)
    for dtype, d, causal in BACKWARD_LAUNCHES:
        meta = {"BLOCK_M": backward["BWD_BLOCK_M"], "BLOCK_N": backward["BWD_BLOCK_N"], "HEAD_DIM": d,
                "IS_CAUSAL": causal}
        options = {"num_warps": backward["BWD_NUM_WARPS"], "num_stages": backward["BWD_NUM_STAGES"]}
        inputs = [f"*{dtype}"] * 4 + ["*fp32"] * 2
        common = ["i32"] * 16 + ["fp32"]
        found.append(("_flash_bwd_dkdv_kernel", inputs + [f"*{dtype}"] * 2 + common, meta, options))
        found.append(("_flash_bwd_dq_kernel", inputs + [f"*{dtype}"] + common, meta, options))
    return found


def settings(defaults: dict[str, int], config: dict | None = None) -> dict[str, int]:
    """flash.py's value of each setting where it is a usable one, else the default; `config`
    (what your own flash_attention launched with, when the grader compares with it) comes first."""
    chosen = {}
    for name, default in defaults.items():
        value = (config or {}).get(name, getattr(flash, name, default))
        usable = type(value) is int and value > 0
        if "BLOCK" in name:
            usable = usable and value >= 16 and value & (value - 1) == 0
        chosen[name] = value if usable else default
    return chosen


def kernel(name: str):
    """Your @triton.jit function `name`, or NotImplementedError when flash.py has none."""
    found = getattr(flash, name, None)
    if found is None:
        raise NotImplementedError(f"flash.py has no @triton.jit kernel named {name} (its signature is in "
                                  f"contract.py and the stub)")
    return found


def _strides(*tensors: torch.Tensor) -> list[int]:
    """Given; do not change: every tensor's strides, in order (as the kernels take them)."""
    return [s for t in tensors for s in t.stride()]


def _allocate(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, fill: float | None) -> torch.Tensor:
    """An output buffer of `shape`: filled with `fill`, or left as allocated when `fill` is None."""
    if fill is None:
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.full(shape, fill, dtype=dtype, device=device)


def launch_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   sm_scale: float | None = None, config: dict | None = None, timed: bool = False) -> torch.Tensor:
    """Out [B, H, N_Q, D]: `_flash_fwd_kernel` on q [B, H, N_Q, D] and k, v [B, H_KV, N_KV, D].

    `timed` (the speed test): the outputs are allocated without the NaN fill, as the reference
    kernel's own launcher allocates its outputs, so the timed call is the allocation and your
    kernel, as for the reference (every timed output is still checked whole by the grader).

    The kernel's arguments, in order: Q, K, V, Out, LSE (float32 [B, H, N_Q], for the backward
    bonus: m_i + log2(l_i) per row, in the base-2 units of the scores), the 16 strides of q, k, v
    and Out, H, N_REP = H // H_KV, N_Q, N_KV, sm_scale, then the constexprs BLOCK_M, BLOCK_N,
    HEAD_DIM = D and IS_CAUSAL. Grid: (cdiv(N_Q, BLOCK_M), B · H)."""
    B, H, N_Q, D = q.shape  # [B, H, N_Q, D]
    H_KV, N_KV = k.shape[1], k.shape[2]  # k, v: [B, H_KV, N_KV, D]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    chosen = settings(FORWARD, config)
    unwritten = None if timed else float("nan")  # what an element the kernel never writes holds
    out = _allocate((B, H, N_Q, D), q.dtype, q.device, unwritten)  # [B, H, N_Q, D]
    lse = _allocate((B, H, N_Q), torch.float32, q.device, unwritten)  # [B, H, N_Q]
    grid = (triton.cdiv(N_Q, chosen["BLOCK_M"]), B * H)
    kernel("_flash_fwd_kernel")[grid](
        q, k, v, out, lse, *_strides(q, k, v, out), H, H // H_KV, N_Q, N_KV, sm_scale,
        BLOCK_M=chosen["BLOCK_M"], BLOCK_N=chosen["BLOCK_N"], HEAD_DIM=D, IS_CAUSAL=bool(causal),
        num_warps=chosen["NUM_WARPS"], num_stages=chosen["NUM_STAGES"])
    return out


def forward_statistics(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor, causal: bool,
                       sm_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(LSE, Delta), float32 [B, H, N_Q] each, as the backward kernels receive them: LSE is the
    forward kernel's m + log2(l) (+inf for a row that sees no key), Delta = Σ_d O · dO per row."""
    n_rep = q.shape[1] // k.shape[1]
    keys = k.float().repeat_interleave(n_rep, dim=1)  # [B, H, N_KV, D]
    values = v.float().repeat_interleave(n_rep, dim=1)  # [B, H, N_KV, D]
    scores = torch.matmul(q.float(), keys.transpose(-2, -1)) * sm_scale  # [B, H, N_Q, N_KV]
    if causal:
        n_q, n_kv = q.shape[2], k.shape[2]
        visible = torch.ones(n_q, n_kv, dtype=torch.bool, device=q.device).tril(n_kv - n_q)
        scores = scores.masked_fill(~visible, float("-inf"))
    natural = torch.logsumexp(scores, dim=-1)  # [B, H, N_Q]
    empty = torch.isneginf(natural)
    weights = torch.exp(scores - torch.where(empty, 0.0, natural)[..., None])  # [B, H, N_Q, N_KV]
    out = torch.matmul(weights, values)  # [B, H, N_Q, D]
    lse = torch.where(empty, float("inf"), natural * LOG2_E)
    delta = (out * grad_out.float()).sum(dim=-1)  # [B, H, N_Q]
    return lse.contiguous(), delta.contiguous()


def launch_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor,
                    causal: bool = False, sm_scale: float | None = None,
                    config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv): `_flash_bwd_dkdv_kernel` and `_flash_bwd_dq_kernel` on the forward's statistics.

    Both kernels take: Q, K, V, DO, LSE, Delta, then DK, DV (dk/dv kernel) or DQ (dq kernel), the
    12 strides of q, k and v, H, N_REP, N_Q, N_KV, sm_scale and the constexprs BLOCK_M, BLOCK_N,
    HEAD_DIM, IS_CAUSAL. DO, LSE, Delta and the gradients are contiguous ([B, H, N_Q, D],
    [B, H, N_Q], [B, H, N_Q]; dk and dv [B, H_KV, N_KV, D]). LSE and Delta come from
    `forward_statistics`, so the backward kernels are graded on their own.
    Grids: dk/dv (cdiv(N_KV, BLOCK_N), B · H_KV), a program per block of keys of one kv head
    (summing over the N_REP query heads that share it); dq (cdiv(N_Q, BLOCK_M), B · H)."""
    B, H, N_Q, D = q.shape  # [B, H, N_Q, D]
    H_KV, N_KV = k.shape[1], k.shape[2]  # [B, H_KV, N_KV, D]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    chosen = settings(BACKWARD, config)
    lse, delta = forward_statistics(q, k, v, grad_out, bool(causal), sm_scale)
    do = grad_out.contiguous()  # [B, H, N_Q, D]
    dq = torch.full((B, H, N_Q, D), float("nan"), dtype=q.dtype, device=q.device)
    dk = torch.full((B, H_KV, N_KV, D), float("nan"), dtype=k.dtype, device=k.device)
    dv = torch.full((B, H_KV, N_KV, D), float("nan"), dtype=v.dtype, device=v.device)
    common = (*_strides(q, k, v), H, H // H_KV, N_Q, N_KV, sm_scale)
    meta = dict(BLOCK_M=chosen["BWD_BLOCK_M"], BLOCK_N=chosen["BWD_BLOCK_N"], HEAD_DIM=D, IS_CAUSAL=bool(causal),
                num_warps=chosen["BWD_NUM_WARPS"], num_stages=chosen["BWD_NUM_STAGES"])
    dkdv, dq_kernel = kernel("_flash_bwd_dkdv_kernel"), kernel("_flash_bwd_dq_kernel")
    dkdv[(triton.cdiv(N_KV, chosen["BWD_BLOCK_N"]), B * H_KV)](q, k, v, do, lse, delta, dk, dv, *common, **meta)
    dq_kernel[(triton.cdiv(N_Q, chosen["BWD_BLOCK_M"]), B * H)](q, k, v, do, lse, delta, dq, *common, **meta)
    return dq, dk, dv
