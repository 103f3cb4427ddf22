"""Wrapper: BLOOM's build_alibi_tensor as alibi_slopes and alibi_bias."""

import torch
from corpus_hf_bloom_alibi import build_alibi_tensor


def bloom_alibi_slopes(n_heads):
    alibi = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)  # [H, 1, 2]: slope × key position 0, 1
    return alibi[:, 0, 1]  # [H]


def bloom_alibi_bias(n_heads, n_q, n_k):
    alibi = build_alibi_tensor(torch.ones(1, n_k), n_heads, torch.float32)  # [H, 1, n_k], one row for all queries
    return alibi.expand(n_heads, n_q, n_k)  # [H, n_q, n_k], as BLOOM broadcasts it over the queries
