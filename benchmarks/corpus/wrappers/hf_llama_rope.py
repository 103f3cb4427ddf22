"""Wrapper: HF Llama's rotary embedding under the course's names (rope_frequencies, apply_rope)."""

from corpus_hf_llama_rope import LlamaLinearScalingRotaryEmbedding, LlamaRotaryEmbedding, apply_rotary_pos_emb


def hf_rope_frequencies(d_head, base=10000.0):
    return LlamaRotaryEmbedding(d_head, max_position_embeddings=1, base=base).inv_freq  # [d_head / 2]


def hf_apply_rope(x, positions, base=10000.0, scale=1.0):
    *lead, length, dim = x.shape
    rotary = LlamaLinearScalingRotaryEmbedding(dim, max_position_embeddings=1, base=base, scaling_factor=scale)
    heads_layout = x.reshape(-1, 1, length, dim)  # [N, 1, L, D]: HF's [batch, heads, seq, head_dim]
    cos, sin = rotary(heads_layout, positions[None, :])  # [1, L, D] each: HF wants position ids [batch, L]
    rotated, _ = apply_rotary_pos_emb(heads_layout, heads_layout, cos, sin)  # unsqueeze_dim=1: [1, 1, L, D]
    return rotated.reshape(*lead, length, dim)  # [..., L, D]
