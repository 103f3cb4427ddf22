"""Reference solution of assignment 3, efficient.py (§25, §26, §29)."""

from __future__ import annotations

import math

import torch

QUERY_CHUNK = 128  # queries per block in the banded (sliding-window) attention


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor | None) -> torch.Tensor:
    """softmax(q kᵀ / √D, masked) v; rows that see no key give 0. visible broadcasts to the scores."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [..., Lq, Lk]
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all -inf rows → 0 instead of NaN
    return weights @ v  # [..., Lq, D]


def _relative_positions(n_q: int, n_k: int, device=None) -> torch.Tensor:
    """i' − j for every (query, key) pair, bottom-right aligned: [n_q, n_k] (int64)."""
    rows = torch.arange(n_q, device=device)[:, None] + (n_k - n_q)  # i'  [n_q, 1]
    return rows - torch.arange(n_k, device=device)[None, :]  # [n_q, n_k]


def _banded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, nearest: int, farthest: int,
                      chunk: int = QUERY_CHUNK) -> torch.Tensor:
    """Attention in which the query at i' sees keys j with nearest ≤ i' − j ≤ farthest.

    Queries go in blocks of `chunk`; each block meets only the keys its band can reach, so
    memory is O(L · (chunk + band)) instead of O(L²).
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    offset = n_k - n_q
    blocks = []
    for start in range(0, n_q, chunk):
        stop = min(start + chunk, n_q)
        k_lo = max(0, start + offset - farthest)  # oldest key any query of the block can see
        k_hi = min(n_k, stop - 1 + offset - nearest + 1)  # one past the newest
        if k_hi <= k_lo:
            blocks.append(torch.zeros_like(q[..., start:stop, :]))
            continue
        rel = (torch.arange(start, stop, device=q.device)[:, None] + offset
               - torch.arange(k_lo, k_hi, device=q.device)[None, :])  # i' − j  [stop-start, k_hi-k_lo]
        visible = (rel >= nearest) & (rel <= farthest)
        blocks.append(_attend(q[..., start:stop, :], k[..., k_lo:k_hi, :], v[..., k_lo:k_hi, :], visible))
    return torch.cat(blocks, dim=-2)  # [..., Lq, D]


# ------------------------------------------------------------------------ gqa


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[B, Hkv, L, D] → [B, Hkv·n_rep, L, D]; head h reads kv head h // n_rep."""
    if n_rep == 1:
        return x
    B, H_kv, L, D = x.shape
    expanded = x[:, :, None, :, :].expand(B, H_kv, n_rep, L, D)  # [B, Hkv, n_rep, L, D] (a view)
    return expanded.reshape(B, H_kv * n_rep, L, D)  # [B, Hkv·n_rep, L, D]


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            causal: bool = False) -> torch.Tensor:
    """q [B, Hq, Lq, D], k/v [B, Hkv, Lk, D] → [B, Hq, Lq, D]; causal is bottom-right aligned."""
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # [B, Hq, Lk, D]
    visible = _relative_positions(q.shape[-2], k.shape[-2], q.device) >= 0 if causal else None
    return _attend(q, k, v, visible)


# ------------------------------------------------------------------- kv_cache


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int,
                   batch_size: int = 1, bytes_per_value: int = 2) -> int:
    """Keys and values (the 2), every layer, kv head, token and sequence."""
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch_size * bytes_per_value


# ------------------------------------------------------------- sliding_window


def sliding_window_mask(n_q: int, n_k: int, window: int, device=None) -> torch.Tensor:
    """bool [n_q, n_k]: 0 ≤ i' − j < window."""
    rel = _relative_positions(n_q, n_k, device)
    return (rel >= 0) & (rel < window)


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """Causal attention over the last `window` keys (the query included), in O(L · window) memory."""
    return _banded_attention(q, k, v, 0, window - 1)


# ------------------------------------------------------------------ streaming


def streaming_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int,
                        n_sinks: int = 4) -> torch.Tensor:
    """Query at i' sees key j iff j ≤ i' and (j < n_sinks or i' − j < window)."""
    rel = _relative_positions(q.shape[-2], k.shape[-2], q.device)  # [Lq, Lk]
    is_sink = torch.arange(k.shape[-2], device=q.device)[None, :] < n_sinks  # [1, Lk]
    visible = (rel >= 0) & (is_sink | (rel < window))
    return _attend(q, k, v, visible)
