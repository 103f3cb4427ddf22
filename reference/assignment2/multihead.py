"""Reference: multi-head attention (§15–§17).

Shapes: B batch, L sequence length, H heads, Dh head size, d_model = H * Dh.
Masks are boolean with True = may attend (the SDPA polarity).

multi_head_attention does its own head split inline (nanoGPT style) instead of
calling split_heads, so the two tasks are graded independently: a wrong
split_heads costs the heads task only.
"""

from __future__ import annotations

import math

import torch


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[..., L, H*Dh] → [..., H, L, Dh]; head h owns columns h*Dh:(h+1)*Dh."""
    *batch, length, width = x.shape
    if width % n_heads != 0:
        raise ValueError(f"the last dimension ({width}) is not a multiple of n_heads ({n_heads})")
    d_head = width // n_heads
    x = x.reshape(*batch, length, n_heads, d_head)  # (..., L, H, Dh)
    return x.transpose(-3, -2)  # (..., H, L, Dh)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """[..., H, L, Dh] → [..., L, H*Dh], the inverse of split_heads."""
    *batch, n_heads, length, d_head = x.shape
    x = x.transpose(-3, -2)  # (..., L, H, Dh)
    return x.reshape(*batch, length, n_heads * d_head)  # (..., L, H*Dh)


def multi_head_attention(x_q: torch.Tensor, x_kv: torch.Tensor, w_q: torch.Tensor,
                         w_k: torch.Tensor, w_v: torch.Tensor, w_o: torch.Tensor, n_heads: int,
                         mask: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-head attention without biases; equals nn.MultiheadAttention (see the tests)."""
    *batch, len_q, d_model = x_q.shape
    len_k = x_kv.shape[-2]
    d_head = d_model // n_heads
    q = x_q @ w_q.T  # (B, Lq, d_model)
    k = x_kv @ w_k.T  # (B, Lk, d_model)
    v = x_kv @ w_v.T  # (B, Lk, d_model)
    q = q.reshape(*batch, len_q, n_heads, d_head).transpose(-3, -2)  # (B, H, Lq, Dh)
    k = k.reshape(*batch, len_k, n_heads, d_head).transpose(-3, -2)  # (B, H, Lk, Dh)
    v = v.reshape(*batch, len_k, n_heads, d_head).transpose(-3, -2)  # (B, H, Lk, Dh)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d_head)  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # mask broadcasts to (B, H, Lq, Lk)
    weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)
    heads = weights @ v  # (B, H, Lq, Dh)
    heads = heads.transpose(-3, -2).reshape(*batch, len_q, d_model)  # (B, Lq, d_model)
    return heads @ w_o.T  # (B, Lq, d_model)
