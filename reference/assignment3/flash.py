"""Reference solution of assignment 3, flash.py: the stub's kernel with its loop written,
plus both bonuses (GQA inside the kernel, Triton backward kernels), with the signatures
of the kernel contract (assignments/assignment3/contract.py), which launches them.

Self-contained on purpose (torch, triton, math only): `grade validate` runs this file
as a submission inside the sandbox, which cannot import the course's course_kernels/
package. course_kernels/flash_attention.py is the full-featured version (autotuning,
sliding window, a fast unmasked path) that students are timed against.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK_M = 64  # query rows per program (the stub's default)
BLOCK_N = 64  # keys per step of the loop (the stub's default; mutants emulate this tiling)
NUM_WARPS = 4
NUM_STAGES = 2
BWD_BLOCK_M = 32  # tile sizes of the backward kernels (contract.py's defaults)
BWD_BLOCK_N = 32
BWD_NUM_WARPS = 4
BWD_NUM_STAGES = 1


@triton.jit
def _flash_fwd_kernel(
    Q, K, V, Out, LSE,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    H, N_REP, N_Q, N_KV, sm_scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    """BLOCK_M output rows of one (batch, head); LSE[b, h, i] = m_i + log2(l_i) for the backward."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    h_kv = h // N_REP

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
    offs_n = tl.arange(0, BLOCK_N)  # [BLOCK_N]
    offs_d = tl.arange(0, HEAD_DIM)  # [HEAD_DIM]

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_Q, other=0.0)  # [BLOCK_M, HEAD_DIM]
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # sm_scale · log2(e)

    hi = N_KV
    if IS_CAUSAL:
        hi = tl.minimum(N_KV, (pid_m + 1) * BLOCK_M + N_KV - N_Q)

    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # [BLOCK_N]
        kt = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                     mask=cols[None, :] < N_KV, other=0.0)  # kᵀ: [HEAD_DIM, BLOCK_N]
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=cols[:, None] < N_KV, other=0.0)  # [BLOCK_N, HEAD_DIM]
        s = tl.dot(q, kt, input_precision="ieee") * qk_scale  # [BLOCK_M, BLOCK_N], base-2 units
        keep = cols[None, :] < N_KV
        if IS_CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + N_KV - N_Q)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen no key yet
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])  # [BLOCK_M, BLOCK_N]
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new

    empty = l_i == 0.0  # only possible for rows that see no key at all
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_Q)
    lse = tl.where(empty, float("inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    tl.store(LSE + pid_bh * N_Q + offs_m, lse, mask=offs_m < N_Q)


@triton.jit
def _flash_bwd_preprocess(O, DO, Delta, N_Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Delta_i = Σ_d O_id · dO_id; O and dO are contiguous [B, H, N_Q, D]."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = pid_bh * N_Q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(O + rows, mask=offs_m[:, None] < N_Q, other=0.0).to(tl.float32)
    do = tl.load(DO + rows, mask=offs_m[:, None] < N_Q, other=0.0).to(tl.float32)
    tl.store(Delta + pid_bh * N_Q + offs_m, tl.sum(o * do, 1), mask=offs_m < N_Q)


@triton.jit
def _flash_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, Delta, DK, DV,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    H, N_REP, N_Q, N_KV, sm_scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    """dK, dV for BLOCK_N keys of one kv head: a loop over the query heads of its group and
    their query blocks. dO, dK, dV are contiguous."""
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)  # over B · H_KV
    h_kv_count = H // N_REP
    b = pid_bh // h_kv_count
    h_kv = pid_bh % h_kv_count
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    in_n = offs_n[:, None] < N_KV
    k = tl.load(K + b * stride_kb + h_kv * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=in_n, other=0.0)  # [BLOCK_N, HEAD_DIM]
    v = tl.load(V + b * stride_vb + h_kv * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=in_n, other=0.0)  # [BLOCK_N, HEAD_DIM]
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    offset = N_KV - N_Q
    lo = 0
    if IS_CAUSAL:  # only rows at or after these keys see them
        lo = (tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M) * BLOCK_M
    for g in range(0, N_REP):
        bh = b * H + h_kv * N_REP + g
        q_base = Q + b * stride_qb + (h_kv * N_REP + g) * stride_qh
        for start_m in range(lo, N_Q, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            in_m = offs_m[:, None] < N_Q
            q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=in_m, other=0.0)
            do = tl.load(DO + bh * N_Q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=in_m,
                         other=0.0)
            lse = tl.load(LSE + bh * N_Q + offs_m, mask=offs_m < N_Q, other=float("inf"))
            delta = tl.load(Delta + bh * N_Q + offs_m, mask=offs_m < N_Q, other=0.0)
            st = tl.dot(k, tl.trans(q), input_precision="ieee") * qk_scale  # sᵀ: [BLOCK_N, BLOCK_M]
            pt = tl.exp2(st - lse[None, :])  # the forward's weights, transposed
            keep = (offs_m[None, :] < N_Q) & in_n
            if IS_CAUSAL:
                keep = keep & (offs_n[:, None] <= offs_m[None, :] + offset)
            pt = tl.where(keep, pt, 0.0)
            dv += tl.dot(pt.to(do.dtype), do, input_precision="ieee")  # Pᵀ dO
            dpt = tl.dot(v, tl.trans(do), input_precision="ieee")  # (dO Vᵀ)ᵀ
            dst = pt * (dpt - delta[None, :])  # dSᵀ = Pᵀ ∘ (dPᵀ − Δ)
            dk += tl.dot(dst.to(q.dtype), q, input_precision="ieee")  # dSᵀ Q
    rows = pid_bh * N_KV * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(DK + rows, (dk * sm_scale).to(DK.dtype.element_ty), mask=in_n)
    tl.store(DV + rows, dv.to(DV.dtype.element_ty), mask=in_n)


@triton.jit
def _flash_bwd_dq_kernel(
    Q, K, V, DO, LSE, Delta, DQ,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    H, N_REP, N_Q, N_KV, sm_scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr,
):
    """dQ for BLOCK_M query rows of one head. dO and dQ are contiguous."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    h_kv = h // N_REP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    in_m = offs_m[:, None] < N_Q
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=in_m, other=0.0)
    rows = pid_bh * N_Q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    do = tl.load(DO + rows, mask=in_m, other=0.0)
    lse = tl.load(LSE + pid_bh * N_Q + offs_m, mask=offs_m < N_Q, other=float("inf"))
    delta = tl.load(Delta + pid_bh * N_Q + offs_m, mask=offs_m < N_Q, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    hi = N_KV
    if IS_CAUSAL:
        hi = tl.minimum(N_KV, (pid_m + 1) * BLOCK_M + N_KV - N_Q)
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        in_n = offs_n[:, None] < N_KV
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=in_n, other=0.0)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=in_n, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale  # [BLOCK_M, BLOCK_N]
        p = tl.exp2(s - lse[:, None])
        keep = (offs_n[None, :] < N_KV) & in_m
        if IS_CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None] + N_KV - N_Q)
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # dO Vᵀ
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision="ieee")  # dS K
    tl.store(DQ + rows, (dq * sm_scale).to(DQ.dtype.element_ty), mask=in_m)


def _strides(*tensors):
    return [s for t in tensors for s in t.stride()]


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):
        B, H, N_Q, D = q.shape
        H_KV, N_KV = k.shape[1], k.shape[2]
        out = torch.empty((B, H, N_Q, D), dtype=q.dtype, device=q.device)  # [B, H, N, D]
        lse = torch.empty((B, H, N_Q), dtype=torch.float32, device=q.device)  # [B, H, N]
        grid = (triton.cdiv(N_Q, BLOCK_M), B * H)
        _flash_fwd_kernel[grid](q, k, v, out, lse, *_strides(q, k, v, out), H, H // H_KV, N_Q, N_KV, sm_scale,
                                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D, IS_CAUSAL=causal,
                                num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        B, H, N_Q, D = q.shape
        H_KV, N_KV = k.shape[1], k.shape[2]
        do = grad_out.contiguous()  # [B, H, N, D]
        delta = torch.empty_like(lse)  # [B, H, N]
        _flash_bwd_preprocess[(triton.cdiv(N_Q, BWD_BLOCK_M), B * H)](out, do, delta, N_Q, HEAD_DIM=D,
                                                                        BLOCK_M=BWD_BLOCK_M)
        dq = torch.empty((B, H, N_Q, D), dtype=q.dtype, device=q.device)
        dk = torch.empty((B, H_KV, N_KV, D), dtype=k.dtype, device=k.device)
        dv = torch.empty((B, H_KV, N_KV, D), dtype=v.dtype, device=v.device)
        args = (*_strides(q, k, v), H, H // H_KV, N_Q, N_KV, ctx.sm_scale)
        meta = dict(BLOCK_M=BWD_BLOCK_M, BLOCK_N=BWD_BLOCK_N, HEAD_DIM=D, IS_CAUSAL=ctx.causal,
                    num_warps=BWD_NUM_WARPS, num_stages=BWD_NUM_STAGES)
        _flash_bwd_dkdv_kernel[(triton.cdiv(N_KV, BWD_BLOCK_N), B * H_KV)](q, k, v, do, lse, delta, dk, dv, *args,
                                                                           **meta)
        _flash_bwd_dq_kernel[(triton.cdiv(N_Q, BWD_BLOCK_M), B * H)](q, k, v, do, lse, delta, dq, *args, **meta)
        return dq, dk, dv, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q kᵀ · sm_scale + mask) v by `_flash_fwd_kernel`; q [B, H, N, D], k/v [B, H_KV, N, D]."""
    B, H, N, D = q.shape
    if D not in (16, 32, 64, 128):
        raise ValueError(f"head dim {D} is not supported: use 16, 32, 64 or 128")
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != D or H % k.shape[1] != 0:
        raise ValueError(f"k/v of shape {tuple(k.shape)} do not fit q of shape {tuple(q.shape)}")
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    return _FlashAttention.apply(q, k, v, bool(causal), sm_scale)


def flash_attention_grads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor,
                          causal: bool = False, sm_scale: float | None = None):
    """(dq, dk, dv): gradients of Σ flash_attention(q, k, v) · grad_out, through the launcher."""
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        out = flash_attention(q, k, v, causal=causal, sm_scale=sm_scale)
        if not out.requires_grad:
            raise RuntimeError("flash_attention is not differentiable yet: wrap the launcher in a "
                               "torch.autograd.Function whose backward launches your kernels")
        return torch.autograd.grad(out, (q, k, v), grad_out)
