"""Wrapper: GPT-NeoX's rotary embedding as rope_frequencies and apply_rope.

NeoX lays tensors out as [seq, batch, heads, dim] and caches cos/sin for positions
0 .. max_seq_len - 1; the wrapper moves the sequence axis first and picks the cached
rows at the given positions. NeoX has no position interpolation, so `scale` goes nowhere.
"""

import torch
from corpus_neox_rope import RotaryEmbedding, apply_rotary_pos_emb_torch


def neox_rope_frequencies(d_head, base=10000.0):
    return RotaryEmbedding(d_head, 1, base=base, precision=torch.float32).inv_freq  # [d_head / 2]


def neox_apply_rope(x, positions, base=10000.0, scale=1.0):
    *lead, length, dim = x.shape
    rotary = RotaryEmbedding(dim, int(positions.max()) + 1, base=base, precision=torch.float32)
    cos = rotary.cos_cached[positions.long().cpu()].to(x.dtype)  # [L, 1, 1, D]
    sin = rotary.sin_cached[positions.long().cpu()].to(x.dtype)  # [L, 1, 1, D]
    seq_first = x.movedim(-2, 0).reshape(length, -1, 1, dim)  # [L, N, 1, D], N = the leading dims
    rotated, _ = apply_rotary_pos_emb_torch(seq_first, seq_first, cos, sin)
    return rotated.reshape(length, *lead, dim).movedim(0, -2)  # [..., L, D]
