"""Hidden tests of task causal_mask (§13): bool, True = may attend, bottom-right aligned."""

import pytest
import torch

pytestmark = pytest.mark.task("causal_mask")


def test_square(check):
    check.close("causal_mask", 6, 6, heatmap=True)


def test_one_token_then_two(check):
    # A single token sees itself: [[True]] is what an all-True placeholder gives too, so the
    # same test also asks for two tokens, where the second one is hidden from the first.
    check.close("causal_mask", 1, 1, heatmap=True)
    check.close("causal_mask", 2, 2, heatmap=True)


def test_fewer_queries_than_keys(check):
    check.close("causal_mask", 3, 8, heatmap=True)


def test_single_new_query_sees_every_key_two_do_not(check):
    # One new query after a cache sees every key (all True, like a placeholder); with two new
    # queries the first must not see the last key.
    check.close("causal_mask", 1, 9, heatmap=True)
    check.close("causal_mask", 2, 9, heatmap=True)


def test_more_queries_than_keys(check):
    check.close("causal_mask", 7, 4, heatmap=True)


def test_on_the_requested_device(check):
    check.close("causal_mask", 5, 7, device=check.device, heatmap=True)


def test_boolean_dtype(check):
    mask = check.call("causal_mask", 4, 4)
    check.expect(isinstance(mask, torch.Tensor) and mask.dtype == torch.bool,
                 "causal_mask must return a torch.bool tensor (True = may attend), e.g. the "
                 "result of a comparison", "§13")


def test_row_counts_with_a_cache(check):
    n_q, n_k = 4, 10
    mask = check.call("causal_mask", n_q, n_k)
    check.expect(isinstance(mask, torch.Tensor) and tuple(mask.shape) == (n_q, n_k),
                 f"causal_mask({n_q}, {n_k}) must have shape [{n_q}, {n_k}]", "§13")
    counts = [int(c) for c in mask.bool().sum(dim=-1).cpu()]
    wanted = [i + n_k - n_q + 1 for i in range(n_q)]
    check.expect(counts == wanted,
                 f"with {n_q} queries and {n_k} keys, query i must see keys 0..i + {n_k - n_q} "
                 f"(the queries are the last positions), i.e. {wanted} keys per row; yours see "
                 f"{counts}", "§13")
