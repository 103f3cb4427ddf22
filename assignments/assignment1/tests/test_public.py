"""Public tests of assignment 1: a first check of each task.

Run them with `grade check assignment1`, or with `pytest tests` in this folder.
Each test computes its expected answer right here with plain torch (torch's own
softmax and attention are fine in tests; only your attention.py may not use
them). Every rule the hidden tests grade is tried here at least once: batch
dimensions (none, one, two), float64, non-contiguous views, huge inputs, the
`dim` argument, masks that broadcast, rows with nothing to attend to. The
hidden tests try each rule on more inputs, so passing here is a good sign,
not a grade.
"""

import math

import pytest
import torch

from grader.harness.draws import first_query_sees_two_large_scores


@pytest.mark.task("attention_scores")
def test_attention_scores_cross_shapes(check):
    q, k = check.randn(2, 3, 4), check.randn(2, 5, 4)  # Lq=3, Lk=5, d=4
    expected = torch.einsum("bid,bjd->bij", q, k)  # every query · every key
    check.close("attention_scores", q, k, expected=expected)


@pytest.mark.task("attention_scores")
def test_attention_scores_without_batch_dims(check):
    q, k = check.randn(4, 6), check.randn(3, 6)  # Lq=4, Lk=3, d=6
    check.close("attention_scores", q, k, expected=q @ k.T)


@pytest.mark.task("attention_scores")
def test_attention_scores_heads_and_square_shapes(check):
    # [B, H, L, d] with Lq = Lk = d: a product of the wrong axes has the right shape here.
    q, k = check.randn(1, 2, 4, 4), check.randn(1, 2, 4, 4)
    check.close("attention_scores", q, k, expected=torch.einsum("bhid,bhjd->bhij", q, k))


@pytest.mark.task("attention_scores")
def test_attention_scores_float64_views(check):
    q = check.randn(2, 6, 3, dtype=torch.float64).transpose(-2, -1)  # [2, 3, 6], a transposed view
    k = check.randn(2, 4, 12, dtype=torch.float64)[..., ::2]  # [2, 4, 6], every other column
    check.close("attention_scores", q, k, expected=torch.einsum("bid,bjd->bij", q, k))


@pytest.mark.task("scale_scores")
def test_scale_scores(check):
    scores = check.randn(3, 5, scale=4.0)
    check.close("scale_scores", scores, 16, expected=scores / 4.0)


@pytest.mark.task("scale_scores")
def test_scale_scores_float64_view_with_batch_dims(check):
    scores = check.randn(2, 7, 3, dtype=torch.float64, scale=3.0).transpose(-2, -1)  # [2, 3, 7]
    check.close("scale_scores", scores, 9, expected=scores / 3.0)  # d_k = 9 is not the 7 keys


@pytest.mark.task("softmax")
def test_softmax_rows(check):
    x = check.randn(4, 6)
    check.close("softmax", x, expected=torch.softmax(x, dim=-1))


@pytest.mark.task("softmax")
def test_softmax_large_inputs(check):
    x = check.randn(2, 5, scale=1e4)  # exp(1e4) is inf: subtract the max first
    check.close("softmax", x, expected=torch.softmax(x, dim=-1))


@pytest.mark.task("softmax")
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_along_another_axis(check, dim):
    x = check.randn(3, 4, 2)
    check.close("softmax", x, dim=dim, expected=torch.softmax(x, dim=dim))


@pytest.mark.task("softmax")
def test_softmax_one_dimensional_float64(check):
    x = check.randn(7, dtype=torch.float64, scale=2.0)
    check.close("softmax", x, expected=torch.softmax(x, dim=-1))


@pytest.mark.task("softmax")
def test_softmax_of_a_view(check):
    x = check.randn(3, 6, 4).transpose(-2, -1)  # [3, 4, 6], not contiguous
    check.close("softmax", x, expected=torch.softmax(x, dim=-1))


@pytest.mark.task("softmax")
def test_softmax_masked_entries_and_a_row_with_nothing_to_see(check):
    x = check.randn(3, 5)
    x[0, 3:] = float("-inf")  # masked entries get weight exactly 0
    x[2] = float("-inf")  # a row with nothing to attend to gives zeros, not NaN
    expected = torch.softmax(x, dim=-1).nan_to_num(0.0)  # torch gives NaN for row 2: we want 0
    check.close("softmax", x, expected=expected)


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


@pytest.mark.task("causal_mask")
def test_causal_mask_more_queries_than_keys(check):
    # 5 queries, 3 keys: query i sits at position i - 2, so the first two see no key at all.
    expected = torch.tensor([[False, False, False],
                             [False, False, False],
                             [True, False, False],
                             [True, True, False],
                             [True, True, True]])
    check.close("causal_mask", 5, 3, expected=expected, heatmap=True)


@pytest.mark.task("causal_mask")
def test_causal_mask_one_query_on_the_requested_device(check):
    expected = torch.ones(1, 4, dtype=torch.bool, device=check.device)  # one new token sees the cache
    check.close("causal_mask", 1, 4, device=check.device, expected=expected, heatmap=True)


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
                heatmap=1, region=mask)


def attention(q, k, v, visible=None):
    """softmax(q kᵀ / √d) v and the weights, with torch; a query that sees no key gets zeros."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_no_batch_dims_and_another_value_size(check):
    q, k, v = check.randn(4, 8), check.randn(6, 8), check.randn(6, 3)  # dv = 3, d = 8
    check.close("scaled_dot_product_attention", q, k, v, expected=attention(q, k, v), heatmap=1)


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_one_mask_for_every_batch_and_head(check):
    q, k, v = check.randn(2, 2, 5, 8), check.randn(2, 2, 5, 8), check.randn(2, 2, 5, 8)  # [B, H, L, d]
    mask = torch.ones(5, 5, dtype=torch.bool, device=check.device).tril()  # [Lq, Lk], broadcast
    check.close("scaled_dot_product_attention", q, k, v, mask, expected=attention(q, k, v, mask),
                heatmap=1, region=mask)  # a difference is told apart inside and outside the mask


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_padding_mask_with_an_empty_sequence(check):
    q, k, v = check.randn(2, 2, 3, 8), check.randn(2, 2, 4, 8), check.randn(2, 2, 4, 5)
    lengths = torch.tensor([3, 0], device=check.device)  # sequence 1 has no real key at all
    mask = (torch.arange(4, device=check.device) < lengths[:, None])[:, None, None, :]  # [B, 1, 1, Lk]
    # The queries of sequence 1 see nothing: their weights and outputs must be zeros, not NaN.
    check.close("scaled_dot_product_attention", q, k, v, mask, expected=attention(q, k, v, mask),
                heatmap=1, region=mask)  # a difference is told apart inside and outside the mask


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_float64_views(check):
    q, k = (check.randn(1, 6, 2, 4, dtype=torch.float64).transpose(1, 2) for _ in range(2))  # [1, 2, 6, 4]
    v = check.randn(1, 6, 2, 8, dtype=torch.float64).transpose(1, 2)[..., ::2]  # [1, 2, 6, 4]
    mask = torch.ones(6, 6, dtype=torch.bool, device=check.device).tril()
    check.close("scaled_dot_product_attention", q, k, v, mask, expected=attention(q, k, v, mask),
                heatmap=1, region=mask)  # a difference is told apart inside and outside the mask


@pytest.mark.task("scaled_dot_product_attention")
def test_sdpa_large_scores(check):
    q, k, v = check.randn(1, 4, 16, scale=25.0), check.randn(1, 4, 16, scale=25.0), check.randn(1, 4, 16)
    # Query 0 sees scaled scores 100 and 99 (too large for exp unless the row maximum is subtracted)
    # and 0 for the other keys, whatever the draw: only the 1/√d scaling gives its weights.
    first_query_sees_two_large_scores(q, k)
    check.close("scaled_dot_product_attention", q, k, v, expected=attention(q, k, v), heatmap=1)
