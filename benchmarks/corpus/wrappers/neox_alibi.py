"""Wrapper: GPT-NeoX's AliBi module as alibi_slopes and alibi_bias (one model-parallel rank)."""

import torch
from corpus_neox_alibi import AliBi


def neox_alibi_slopes(n_heads):
    return AliBi(n_heads, mp_size=1, mp_rank=0).slopes  # [H]


def neox_alibi_bias(n_heads, n_q, n_k):
    return AliBi(n_heads, mp_size=1, mp_rank=0).bias(n_q, n_k, torch.device("cpu"), torch.float32)  # [H, n_q, n_k]
