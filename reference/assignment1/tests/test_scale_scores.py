"""Hidden tests of task scale_scores (§9): scores / √d_k."""

import pytest
import torch

pytestmark = pytest.mark.task("scale_scores")


def test_divides_by_sqrt_d_k(check):
    scores = check.randn(4, 9, scale=4.0)
    check.close("scale_scores", scores, 16)


def test_scaled_two_batch_dims(check):
    scores = check.randn(2, 3, 5, 7, scale=8.0)
    check.close("scale_scores", scores, 64)


def test_d_k_differs_from_number_of_keys(check):
    scores = check.randn(3, 5)
    check.close("scale_scores", scores, 100)


def test_scaled_float64(check):
    scores = check.randn(6, 6, dtype=torch.float64)
    check.close("scale_scores", scores, 8)


def test_scaled_non_contiguous_view(check):
    scores = check.randn(2, 9, 4).transpose(-2, -1)  # [2, 4, 9]
    check.close("scale_scores", scores, 32)


def test_d_k_one_changes_nothing_d_k_four_halves(check):
    # d_k = 1 returns the scores unchanged, which handing the input back does too: the same
    # test also asks for d_k = 4 on the same scores.
    scores = check.randn(3, 4)
    check.close("scale_scores", scores, 1)
    check.close("scale_scores", scores, 4)


def test_restores_unit_spread(check):
    d = 256
    q, k = check.randn(64, d, dtype=torch.float64), check.randn(64, d, dtype=torch.float64)
    scaled = check.call("scale_scores", q @ k.T, d)  # raw spread ≈ √256 = 16
    spread = float(scaled.std()) if isinstance(scaled, torch.Tensor) else float("nan")
    check.expect(0.8 < spread < 1.25,
                 f"scaled scores of random {d}-dimensional vectors should have a spread of about "
                 f"1, yours have {spread:.3g}: divide by √d_k", "§9")
