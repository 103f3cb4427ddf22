"""Which task's function may call which other task's function (the handout says so too):
multi_head_attention may be built from the student's split_heads and merge_heads, so its points
depend on them. The composition computes the task's result from those helpers exactly as the
reference does; the grader swaps in one student helper at a time to find the one function to fix
first (grader.harness.catalogue.Composition)."""

import math

import torch

from grader.harness.catalogue import composed


@composed(function="multi_head_attention", uses=("split_heads", "merge_heads"))
def mha_from_helpers(helpers, x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    split, merge = helpers["split_heads"], helpers["merge_heads"]
    q = split(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(w_q.shape[0] // n_heads)  # (B, H, Lq, Lk): by √Dh
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return merge(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)
