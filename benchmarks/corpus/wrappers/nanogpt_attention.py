"""Wrapper: nanoGPT's CausalSelfAttention with the course's weights (c_attn = [w_q; w_k; w_v], c_proj = w_o).

nanoGPT is causal self-attention: it attends from x_q to x_q with its own causal mask, so
x_kv and mask have nowhere to go.
"""

import types

import torch
from corpus_nanogpt_attention import CausalSelfAttention


def nanogpt_multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    config = types.SimpleNamespace(n_embd=x_q.shape[-1], n_head=n_heads, bias=False, dropout=0.0,
                                   block_size=x_q.shape[-2])
    attention = CausalSelfAttention(config).to(dtype=x_q.dtype).eval()
    with torch.no_grad():
        attention.c_attn.weight.copy_(torch.cat([w_q, w_k, w_v]))  # [3 d_model, d_model]
        attention.c_proj.weight.copy_(w_o)
        return attention(x_q)  # [B, L, d_model]
