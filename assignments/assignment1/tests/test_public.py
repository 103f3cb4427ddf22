"""Public tests of assignment 1: a first check of each task.

Run them with `grade check assignment1`, or with `pytest tests` in this folder.
Each test computes its expected answer right here with plain torch (torch's own
softmax and attention are fine in tests; only your attention.py may not use
them). The hidden tests that grade your work check much more: batch
dimensions, float64, non-contiguous views, huge inputs, every kind of mask.
"""

import math

import pytest
import torch


@pytest.mark.task("attention_scores")
def test_attention_scores_cross_shapes(check):
    q, k = check.randn(2, 3, 4), check.randn(2, 5, 4)  # Lq=3, Lk=5, d=4
    expected = torch.einsum("bid,bjd->bij", q, k)  # every query · every key
    check.close("attention_scores", q, k, expected=expected)


@pytest.mark.task("scale_scores")
def test_scale_scores(check):
    scores = check.randn(3, 5, scale=4.0)
    check.close("scale_scores", scores, 16, expected=scores / 4.0)


@pytest.mark.task("softmax")
def test_softmax_rows(check):
    x = check.randn(4, 6)
    check.close("softmax", x, expected=torch.softmax(x, dim=-1))


@pytest.mark.task("softmax")
def test_softmax_large_inputs(check):
    x = check.randn(2, 5, scale=1e4)  # exp(1e4) is inf: subtract the max first
    check.close("softmax", x, expected=torch.softmax(x, dim=-1))


@pytest.mark.task("causal_mask")
def test_causal_mask_square(check):
    expected = torch.tensor([[True, False, False],
                             [True, True, False],
                             [True, True, True]])
    check.close("causal_mask", 3, 3, expected=expected, heatmap=True)


@pytest.mark.task("causal_mask")
def test_causal_mask_fewer_queries_than_keys(check):
    # The 2 queries are the last 2 of 5 positions: the last one sees everything.
    expected = torch.tensor([[True, True, True, True, False],
                             [True, True, True, True, True]])
    check.close("causal_mask", 2, 5, expected=expected, heatmap=True)


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_self_attention(check):
    q, k, v = check.randn(2, 4, 8), check.randn(2, 4, 8), check.randn(2, 4, 8)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    check.close("scaled_dot_product_attention", q, k, v, expected=(weights @ v, weights),
                heatmap=1)


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_causal_cross_attention(check):
    q, k, v = check.randn(3, 8), check.randn(5, 8), check.randn(5, 2)  # Lq != Lk, dv != d
    mask = torch.ones(3, 5, dtype=torch.bool, device=q.device).tril(diagonal=2)
    scores = (q @ k.T / math.sqrt(8)).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # The mask goes in as the 4th positional argument.
    check.close("scaled_dot_product_attention", q, k, v, mask, expected=(weights @ v, weights),
                heatmap=1)
