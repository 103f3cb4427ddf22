"""Hidden tests of task attention_scores (§6): scores = q kᵀ over any batch dimensions."""

import pytest
import torch

pytestmark = pytest.mark.task("attention_scores")


def test_unbatched_cross_shapes(check):
    q, k = check.randn(5, 8), check.randn(7, 8)  # Lq=5, Lk=7, d=8
    check.close("attention_scores", q, k)


def test_one_batch_dim(check):
    q, k = check.randn(3, 4, 6), check.randn(3, 9, 6)
    check.close("attention_scores", q, k)


def test_scores_two_batch_dims(check):
    q, k = check.randn(2, 3, 5, 4), check.randn(2, 3, 7, 4)  # [B, H, L, d]
    check.close("attention_scores", q, k)


def test_square_shapes_where_wrong_products_still_run(check):
    # Lq = Lk = d: q @ k, k @ qᵀ and qᵀ @ k all have the expected shape here.
    q, k = check.randn(2, 6, 6), check.randn(2, 6, 6)
    check.close("attention_scores", q, k)


def test_single_query(check):
    q, k = check.randn(2, 1, 16), check.randn(2, 10, 16)  # one new token against a cache
    check.close("attention_scores", q, k)


def test_scores_float64(check):
    q, k = check.randn(2, 5, 32, dtype=torch.float64), check.randn(2, 3, 32, dtype=torch.float64)
    check.close("attention_scores", q, k)


def test_non_contiguous_views(check):
    q = check.randn(2, 8, 5).transpose(-2, -1)  # [2, 5, 8], a transposed view
    k = check.randn(2, 7, 16)[..., ::2]  # [2, 7, 8], a strided slice
    check.close("attention_scores", q, k)


def test_every_entry_is_a_dot_product(check):
    q, k = check.randn(3, 4, 8, dtype=torch.float64), check.randn(3, 6, 8, dtype=torch.float64)
    scores = check.call("attention_scores", q, k)
    check.expect(isinstance(scores, torch.Tensor) and tuple(scores.shape) == (3, 4, 6),
                 "attention_scores must return one score per (query, key) pair: shape "
                 "[..., Lq, Lk]", "§6")
    b, i, j = 1, 2, 5
    check.compare(scores[b, i, j], (q[b, i] * k[b, j]).sum(), what="attention_scores",
                  section="§6")
