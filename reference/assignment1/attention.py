"""Reference solution of assignment 1: scaled dot-product attention from scratch.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        (lecture §6)

Conventions (the course contract): any leading batch dimensions, boolean
masks with True = may attend, a causal mask aligned to the bottom-right
corner, and a slice that is entirely -inf gets weight 0, not NaN.

Why scaled_dot_product_attention does not call `softmax` or `causal_mask`
below: `grade validate` replaces one function at a time with a known wrong
version, and each wrong version must only fail its own task's tests. Both
public softmaxes therefore share the private `_stable_softmax`.
"""

from __future__ import annotations

import math

import torch

# --------------------------------------------------------------- attention_scores (§6)


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw dot product of every query with every key: q kᵀ."""
    return q @ k.transpose(-2, -1)  # (..., Lq, d) @ (..., d, Lk) -> (..., Lq, Lk)


# ------------------------------------------------------------------- scale_scores (§9)


def scale_scores(scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Divide by √d_k so that scores of random d_k-dim vectors have unit spread."""
    return scores / math.sqrt(d_k)


# ------------------------------------------------------------------------ softmax (§10)


def _stable_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    m = x.amax(dim=dim, keepdim=True)  # (..., 1, ...) largest entry of each slice
    # A slice that is all -inf has max -inf, and -inf - (-inf) is NaN: shift it by 0 instead.
    m = m.masked_fill(torch.isneginf(m), 0.0)
    e = torch.exp(x - m)  # every entry in [0, 1]: nothing can overflow
    total = e.sum(dim=dim, keepdim=True)  # (..., 1, ...) >= 1, or 0 for an all -inf slice
    return e / total.masked_fill(total == 0, 1.0)  # all -inf slice: 0 / 1 = 0


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x_i - max x) / Σ_j exp(x_j - max x) along `dim`; all -inf slices give zeros."""
    return _stable_softmax(x, dim)


# -------------------------------------------------------------------- causal_mask (§13)


def causal_mask(n_q: int, n_k: int, device: torch.device | str | None = None) -> torch.Tensor:
    """True where query i may see key j: j <= i + (n_k - n_q) (bottom-right aligned)."""
    i = torch.arange(n_q, device=device).unsqueeze(1)  # (n_q, 1) query positions
    j = torch.arange(n_k, device=device).unsqueeze(0)  # (1, n_k) key positions
    return j <= i + (n_k - n_q)  # (n_q, n_k); the last query sees every key


# --------------------------------------------------- scaled_dot_product_attention (§6–§13)


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d, masked) v; returns (out, weights)."""
    d = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (..., Lq, d) @ (..., d, Lk) -> (..., Lq, Lk)
    if mask is not None:
        # mask broadcasts to (..., Lq, Lk); a key that may not be seen scores -inf, weight 0.
        scores = torch.where(mask, scores, float("-inf"))
    weights = _stable_softmax(scores, dim=-1)  # (..., Lq, Lk): rows sum to 1, or 0 if all masked
    out = weights @ v  # (..., Lq, Lk) @ (..., Lk, dv) -> (..., Lq, dv)
    return out, weights
