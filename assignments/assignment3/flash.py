"""Assignment 3, part 2: FlashAttention's forward pass as your own Triton kernel (§24).

Standard attention writes the whole N × N score matrix to memory, reads it back
for the softmax, writes the weights, reads them again for the product with V.
FlashAttention computes exactly the same output tile by tile: one program owns
BLOCK_M query rows, walks over the keys BLOCK_N at a time, and keeps a running
(online) softmax, so no N × N matrix ever exists (§22–§24).

Task flash_forward: complete `_flash_fwd_kernel` (the loop is yours). Task
flash_launcher: delete the `raise` in `flash_attention`. How they are graded:

* flash_forward is graded by construction: the grader launches your kernel itself
  (contract.py shows exactly how: the arguments below, into buffers it allocates),
  in a worker that holds only your @triton.jit functions and this file's constants.
  So keep the kernel's name and signature, and keep its body to what Triton
  compiles: tl.* operations, other @triton.jit functions, constants, its arguments;
* flash_launcher: `flash_attention` must launch `_flash_fwd_kernel` as contract.py
  does and return exactly what the kernel wrote; no torch softmax, matrix products
  (`@`, matmul, bmm, einsum) or scaled_dot_product_attention in flash.py's host
  code (inside the kernel, `tl.dot` is exactly what you should use).

Testing without a GPU: Triton's interpreter runs kernels on the CPU with numpy.
Set the variable before Python starts (it is read when the kernel is defined):

    TRITON_INTERPRET=1 pytest tests          # or: TRITON_INTERPRET=1 python my_check.py

The interpreter is slow (keep N in the hundreds), runs float32 and float16 but
not bfloat16, and silently reads garbage from out-of-bounds addresses instead of
crashing: mask every load. On a GPU, leave TRITON_INTERPRET unset.

Bonus tasks (see README): flash_gqa (k/v with fewer heads than q, inside the
kernel: launch_forward passes N_REP = H // H_KV) and flash_backward (the Triton
backward kernels `_flash_bwd_dkdv_kernel` and `_flash_bwd_dq_kernel`, whose
signatures are in contract.py's launch_backward; `flash_attention_grads` below lets
you check them through your own torch.autograd.Function).
"""

# ruff: noqa: F841  (the kernel stub prepares values that only your loop will use)
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

# Tile sizes and launch options (contract.py reads them: keep them plain numbers). Any powers
# of two ≥ 16 work as tiles; these are a good start on CPU and GPU.
BLOCK_M = 64  # query rows per program
BLOCK_N = 64  # keys per step of the loop
NUM_WARPS = 4
NUM_STAGES = 2


@triton.jit
def _flash_fwd_kernel(
    Q, K, V, Out,  # pointers to the first element of q, k, v [B, H, N, D] and out
    LSE,  # float32 [B, H, N_Q]: m_i + log2(l_i) per row, stored at the end (the backward bonus reads it)
    stride_qb, stride_qh, stride_qm, stride_qd,  # q's strides, in elements: batch, head, row, feature
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    H,  # number of query heads
    N_REP,  # query heads per kv head: 1 here (GQA bonus: query head h reads kv head h // N_REP)
    N_Q, N_KV,  # number of queries and of keys (equal in this assignment; keep them apart anyway)
    sm_scale,  # softmax scale, 1/√D by default
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    """One program computes BLOCK_M rows of the output of one (batch, head).

    Grid: (cdiv(N_Q, BLOCK_M), B·H). Math for one query row q_i, keys k_j, values v_j:

        s_j = sm_scale · q_i · k_j          out_i = Σ_j e^(s_j − m) v_j / Σ_j e^(s_j − m),  m = max_j s_j

    The running softmax visits the keys block by block and keeps, per row,
    m (the largest score so far), l (Σ e^(s_j − m) so far) and acc (Σ e^(s_j − m) v_j
    so far). When a new block raises the maximum from m to m_new, everything
    accumulated so far was computed against the old m, so it is multiplied by
    α = e^(m − m_new) before the new block is added. At the end, out = acc / l.
    """
    pid_m = tl.program_id(0)  # which block of query rows
    pid_bh = tl.program_id(1)  # which (batch, head)
    b = pid_bh // H
    h = pid_bh % H
    h_kv = h // N_REP

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # the query rows of this program  [BLOCK_M]
    offs_n = tl.arange(0, BLOCK_N)  # key offsets inside one block                   [BLOCK_N]
    offs_d = tl.arange(0, HEAD_DIM)  # feature offsets                               [HEAD_DIM]

    # Pointer arithmetic: element (b, h, row, d) of q lives at
    #   Q + b*stride_qb + h*stride_qh + row*stride_qm + d*stride_qd.
    # Broadcasting a column of rows against a row of features gives a [BLOCK_M, HEAD_DIM] tile of
    # addresses. Rows past the end (offs_m >= N_Q, the tail) are masked and read as 0.
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_Q, other=0.0)  # [BLOCK_M, HEAD_DIM]

    k_base = K + b * stride_kb + h_kv * stride_kh  # this head's keys start here
    v_base = V + b * stride_vb + h_kv * stride_vh

    # Running statistics, one per query row, kept in float32 whatever the input dtype.
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running maximum
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running sum of exponentials
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)  # running weighted sum of values

    # Work in base 2: e^x = 2^(x·log2 e), and tl.exp2 is cheaper than tl.exp.
    qk_scale = sm_scale * 1.4426950408889634  # sm_scale · log2(e)

    # Causal attention: the rows of this program never see keys after their own position, so the
    # loop can stop early. Without causal masking it runs over all N_KV keys.
    hi = N_KV
    if IS_CAUSAL:
        hi = tl.minimum(N_KV, (pid_m + 1) * BLOCK_M + N_KV - N_Q)

    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # key indices of this block  [BLOCK_N]
        # ---- your loop body. Suggested steps:
        # 1. Load the key block as kᵀ, a [HEAD_DIM, BLOCK_N] tile (address of k[j, d] is
        #    k_base + j*stride_kn + d*stride_kd), and the value block as [BLOCK_N, HEAD_DIM].
        #    Mask keys past the end (cols >= N_KV) with other=0.0.
        # 2. Scores s = tl.dot(q, kᵀ, input_precision="ieee") * qk_scale: [BLOCK_M, BLOCK_N], float32,
        #    in base-2 units. ("ieee" keeps float32 products exact on a GPU; float16 ignores it.)
        # 3. Mask: a key past the end must get weight 0, so set its score to -inf (tl.where). A loaded
        #    0 is not enough: a score of 0 still has weight e^(0 − m). If IS_CAUSAL, also set
        #    s = -inf where cols > offs_m + N_KV - N_Q (the future).
        # 4. New running maximum m_new = max(m_i, row max of s)            (tl.maximum, tl.max(s, 1))
        # 5. α = 2^(m_i − m_new) rescales the old statistics; p = 2^(s − m_new[:, None]) are this
        #    block's unnormalised weights.                                  (tl.exp2)
        # 6. l_i = l_i·α + row sum of p;   acc = acc·α[:, None] + tl.dot(p.to(v.dtype), v, ...)
        # 7. m_i = m_new.
        pass

    # 8. Normalise: out = acc / l_i[:, None] (each row's weights must sum to 1), then store it.
    out = acc
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_Q)
    # The row statistics for the backward bonus (given): +inf for a row that saw no key.
    empty = l_i == 0.0
    lse = tl.where(empty, float("inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    tl.store(LSE + pid_bh * N_Q + offs_m, lse, mask=offs_m < N_Q)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q kᵀ · sm_scale + mask) v, computed by `_flash_fwd_kernel`.

    Shapes:
        q, k, v: [B, H, N, D]     D in {16, 32, 64, 128}; any N ≥ 1 (not only multiples of
                                  the block sizes); contiguous or not (pass the strides)
        returns: [B, H, N, D]     a new tensor with q's dtype and device

    dtypes: float32, float16, bfloat16 (bfloat16 only on a GPU). sm_scale defaults to 1/√D.
    causal=True: query i sees key j iff j ≤ i (bottom-right aligned, which is the same thing
    when the query and key counts are equal). Lecture §24 (FlashAttention), §22–§23 (why).
    """
    raise NotImplementedError("flash_launcher")  # delete this line once your kernel's loop is written
    B, H, N, D = q.shape
    if D not in (16, 32, 64, 128):
        raise ValueError(f"head dim {D} is not supported: use 16, 32, 64 or 128")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("q, k and v must have the same shape (k/v with fewer heads is the GQA bonus)")
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    out = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)  # [B, H, N, D]
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)  # [B, H, N]
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _flash_fwd_kernel[grid](
        q, k, v, out, lse,
        q.stride(0), q.stride(1), q.stride(2), q.stride(3),
        k.stride(0), k.stride(1), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), v.stride(2), v.stride(3),
        out.stride(0), out.stride(1), out.stride(2), out.stride(3),
        H, 1, N, k.shape[2], sm_scale,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D, IS_CAUSAL=bool(causal),
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return out


def flash_attention_grads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor,
                          causal: bool = False, sm_scale: float | None = None):
    """(dq, dk, dv): gradients of Σ flash_attention(q, k, v) · grad_out, through your launcher.

    Given; do not change. For your own checks of the flash_backward bonus (the grader launches
    your backward kernels itself, through contract.launch_backward): it only works once
    flash_attention is differentiable (a torch.autograd.Function whose backward runs your
    Triton kernels). Lecture §24.
    """
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        out = flash_attention(q, k, v, causal=causal, sm_scale=sm_scale)
        if not out.requires_grad:
            raise RuntimeError("flash_attention is not differentiable yet: wrap the launcher in a "
                               "torch.autograd.Function whose backward launches your kernels")
        return torch.autograd.grad(out, (q, k, v), grad_out)
