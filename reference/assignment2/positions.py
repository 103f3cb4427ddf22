"""Reference: positional encodings (§18–§21).

sinusoidal_positions: the original transformer's fixed table (§18).
rope_frequencies, apply_rope: rotary embeddings, half-split layout (§19, §21).
alibi_slopes, alibi_bias: ALiBi's per-head linear distance penalty (§21).
"""

from __future__ import annotations

import math

import torch


def sinusoidal_positions(n_positions: int, d_model: int) -> torch.Tensor:
    """[n, d] float32: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same angle)."""
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    dim = torch.arange(d_model)  # (d,)
    pair = dim // 2  # (d,) dims 2i and 2i+1 share frequency i
    angle = p / 10000.0 ** (2 * pair / d_model)  # (n, d)
    table = torch.where(dim % 2 == 0, angle.sin(), angle.cos())  # (n, d)
    return table.to(torch.float32)


def _inverse_frequencies(d_head: int, base: float, dtype: torch.dtype,
                         device: torch.device | str | None = None) -> torch.Tensor:
    """base^(-2i/d_head) for i = 0 .. d_head/2 - 1, computed in float64, returned in dtype."""
    if d_head % 2 != 0:
        raise ValueError(f"RoPE needs an even head size, got {d_head}")
    exponent = torch.arange(0, d_head, 2, dtype=torch.float64, device=device) / d_head  # (D/2,)
    return (float(base) ** -exponent).to(dtype)


def rope_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """[d_head/2] float32: the rotation speed of each dimension pair, base^(-2i/d_head)."""
    return _inverse_frequencies(d_head, base, torch.float32)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] → [-x2, x1] on the last dimension (x1, x2 its two halves)."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (..., D)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0,
               scale: float = 1.0) -> torch.Tensor:
    """Rotate dim j together with dim j + D/2 by angle (p / scale) * freq_j (half-split layout)."""
    d_head = x.shape[-1]
    # Angles in float32 at least (float64 for float64 inputs): half precision cannot
    # represent p * freq for large p accurately enough.
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = _inverse_frequencies(d_head, base, compute, x.device)  # (D/2,)
    p = positions.to(device=x.device, dtype=compute) / scale  # (L,)
    angle = p[:, None] * freq[None, :]  # (L, D/2)
    angle = torch.cat([angle, angle], dim=-1)  # (L, D): dim j and j + D/2 share an angle
    xc = x.to(compute)  # (..., L, D)
    out = xc * angle.cos() + rotate_half(xc) * angle.sin()  # (..., L, D)
    return out.to(x.dtype)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """[H] float32: the ALiBi paper's slopes (its get_slopes rule, non-powers of two included)."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)  # first slope, and the ratio between neighbours
        return [start ** (h + 1) for h in range(n)]

    if n_heads < 1:
        raise ValueError(f"n_heads must be at least 1, got {n_heads}")
    if n_heads & (n_heads - 1) == 0:
        slopes = power_of_two(n_heads)
    else:
        closest = 2 ** math.floor(math.log2(n_heads))
        extra = power_of_two(2 * closest)[0::2][: n_heads - closest]
        slopes = power_of_two(closest) + extra
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, n_q: int, n_k: int) -> torch.Tensor:
    """[H, n_q, n_k] float32: -m_h * (i' - j) with i' = i + n_k - n_q (bottom-right aligned)."""
    slopes = alibi_slopes(n_heads)  # (H,)
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, 1)
    key_pos = torch.arange(n_k)[None, :]  # (1, n_k)
    distance = (query_pos - key_pos).to(torch.float32)  # (n_q, n_k)
    return -slopes[:, None, None] * distance[None, :, :]  # (H, n_q, n_k)
