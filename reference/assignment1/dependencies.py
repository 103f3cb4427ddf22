"""Which task's function may call which other task's function (the handout says so too):
scaled_dot_product_attention may be built from the student's attention_scores, scale_scores and
softmax, so its points depend on them. Each composition computes the task's result from those
helpers exactly as the reference does; the grader swaps in one student helper at a time to find
the one function to fix first (grader.harness.catalogue.Composition)."""

import math

import torch

from grader.harness.catalogue import composed


@composed(function="scaled_dot_product_attention", uses=("attention_scores", "scale_scores", "softmax"))
def sdpa_from_helpers(helpers, q, k, v, mask=None):
    scores = helpers["scale_scores"](helpers["attention_scores"](q, k), q.size(-1))  # (..., Lq, Lk)
    if mask is not None:
        scores = torch.where(mask, scores, -math.inf)
    weights = helpers["softmax"](scores, dim=-1)  # (..., Lq, Lk)
    return weights @ v, weights  # (..., Lq, dv), (..., Lq, Lk)
