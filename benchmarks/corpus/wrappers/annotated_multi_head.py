"""Wrapper: the Annotated Transformer's MultiHeadedAttention with the course's weights and zero biases.

Its masks are [B, Lq, Lk] or [B, 1, Lk], one for every head (it adds the head axis itself);
the course's [Lq, Lk] and [B, 1, 1, Lk] masks are laid out that way first. A mask per
head ([B, H, Lq, Lk]) has no such layout and goes in as it is.
"""

import torch
from corpus_annotated_multi_head import MultiHeadedAttention


def annotated_multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    module = MultiHeadedAttention(n_heads, x_q.shape[-1], dropout=0.0).to(dtype=x_q.dtype).eval()
    with torch.no_grad():
        for linear, weight in zip(module.linears, (w_q, w_k, w_v, w_o), strict=True):
            linear.weight.copy_(weight)
            linear.bias.zero_()
        if mask is not None and mask.dim() == 2:
            mask = mask.unsqueeze(0)  # [Lq, Lk] → [1, Lq, Lk]
        elif mask is not None and mask.dim() == 4 and mask.shape[1] == 1:
            mask = mask.squeeze(1)  # [B, 1, Lq or 1, Lk] → [B, Lq or 1, Lk]
        return module(x_q, x_kv, x_kv, mask)  # [B, Lq, d_model]
