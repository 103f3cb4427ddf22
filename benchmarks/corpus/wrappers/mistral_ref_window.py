"""Wrapper: the sliding-window mask of Mistral's one-file reference (Transformer.forward) as sliding_window_mask.

Mistral builds the mask for a prompt of seqlen tokens, square and additive (log of a 0/1 band:
0 = visible, -inf = blocked), from self.args.sliding_window; only h.dtype and h.device are read.
Its queries are the prompt's positions 0 … seqlen − 1, so the course's n_q queries after
n_k − n_q cached keys are the last n_q rows of the mask over all n_k positions.
"""

import types

import torch
from corpus_mistral_ref_window import mistral_window_mask


def mistral_sliding_window_mask(n_q, n_k, window, device=None):
    model = types.SimpleNamespace(args=types.SimpleNamespace(sliding_window=window))
    h = torch.empty(0, device=device)  # float32, on `device`
    mask = mistral_window_mask(model, h, n_k)  # [n_k, n_k]: 0 or -inf
    return mask[n_k - n_q:] == 0  # [n_q, n_k] bool, True = visible
