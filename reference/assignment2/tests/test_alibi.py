"""Hidden tests, task alibi: alibi_slopes and alibi_bias (§21)."""

import pytest
import torch


@pytest.mark.task("alibi")
def test_slopes_eight_heads(check):
    expected = torch.tensor([2.0 ** -(h + 1) for h in range(8)])  # 1/2, 1/4, ..., 1/256
    check.close("alibi_slopes", 8, expected=expected)


@pytest.mark.task("alibi")
def test_slopes_other_powers_of_two(check):
    for n_heads in (1, 4, 16):
        check.close("alibi_slopes", n_heads)


@pytest.mark.task("alibi")
def test_slopes_twelve_heads(check):
    check.close("alibi_slopes", 12)


@pytest.mark.task("alibi")
def test_slopes_small_odd_head_counts(check):
    for n_heads in (3, 5, 6):
        check.close("alibi_slopes", n_heads)


@pytest.mark.task("alibi")
def test_bias_square(check):
    check.close("alibi_bias", 4, 6, 6)


@pytest.mark.task("alibi")
def test_bias_one_query_at_the_end(check):
    check.close("alibi_bias", 8, 1, 9)


@pytest.mark.task("alibi")
def test_bias_fewer_queries_than_keys_six_heads(check):
    check.close("alibi_bias", 6, 3, 7)


@pytest.mark.task("alibi")
def test_bias_is_zero_at_the_query_and_falls_with_distance(check):
    bias = check.call("alibi_bias", 4, 5, 8)
    check.expect(isinstance(bias, torch.Tensor) and bias.shape == (4, 5, 8),
                 "alibi_bias(4, 5, 8) must return a [4, 5, 8] tensor", "§21")
    for i in range(5):
        own = i + 3  # the query's own position (bottom-right aligned)
        check.expect(bool((bias[:, i, own] == 0).all()),
                     f"query {i} of 5 with 8 keys sits at position {own}: its bias there must be 0",
                     "§21")
        past = bias[:, i, :own + 1]  # keys up to the query
        check.expect(bool((past[:, 1:] > past[:, :-1]).all()),
                     "the bias must get more negative the further a key is behind the query",
                     "§21")
