"""Wrapper: the ALiBi authors' get_slopes and bias (from their decoder's __init__) as the course's functions."""

import types

import torch
from corpus_alibi_authors import authors_alibi, get_slopes


def authors_alibi_slopes(n_heads):
    return torch.Tensor(get_slopes(n_heads))  # [H], as the decoder stores self.slopes


def authors_alibi_bias(n_heads, n_q, n_k):
    decoder = types.SimpleNamespace(slopes=torch.Tensor(get_slopes(n_heads)))
    alibi = authors_alibi(decoder, n_heads, n_k)  # [H, 1, n_k] with maxpos = n_k
    return alibi.expand(n_heads, n_q, n_k)  # [H, n_q, n_k]: the same row for every query
