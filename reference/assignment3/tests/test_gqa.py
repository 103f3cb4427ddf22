"""Hidden tests of task gqa: repeat_kv and grouped_query_attention (§25, §13).

Expected values come from the reference (check.close). The tiled-heads and
top-left mistakes only show with more than one kv head and with fewer queries
than keys, so both kinds of input are here.
"""

import pytest
import torch

pytestmark = pytest.mark.task("gqa")

GQA = "grouped_query_attention"


def test_repeat_kv_groups_are_contiguous(check):
    check.close("repeat_kv", check.randn(2, 3, 5, 4), 2)


def test_repeat_kv_many_repeats(check):
    check.close("repeat_kv", check.randn(1, 2, 3, 8), 4)


def test_repeat_kv_single_kv_head(check):
    check.close("repeat_kv", check.randn(2, 1, 4, 8), 3)


def test_repeat_kv_once_is_unchanged_twice_doubles(check):
    # n_rep = 1 hands x back, as a placeholder would: the same test also asks for n_rep = 2.
    x = check.randn(1, 4, 3, 8)
    check.close("repeat_kv", x, 1)
    check.close("repeat_kv", x, 2)


def test_repeat_kv_of_a_view(check):
    x = check.randn(2, 6, 3, 8).transpose(1, 2)  # [2, 3, 6, 8], not contiguous
    check.close("repeat_kv", x, 2)


def test_gqa_two_kv_heads(check):
    q, k, v = check.randn(2, 6, 7, 8), check.randn(2, 2, 7, 8), check.randn(2, 2, 7, 8)
    check.close(GQA, q, k, v)


def test_gqa_multi_query(check):
    q, k, v = check.randn(2, 4, 5, 16), check.randn(2, 1, 5, 16), check.randn(2, 1, 5, 16)
    check.close(GQA, q, k, v)


def test_gqa_as_plain_multi_head(check):
    q, k, v = check.randn(1, 3, 6, 8), check.randn(1, 3, 6, 8), check.randn(1, 3, 6, 8)
    check.close(GQA, q, k, v, causal=True)


def test_gqa_causal_square(check):
    q, k, v = check.randn(2, 4, 9, 8), check.randn(2, 2, 9, 8), check.randn(2, 2, 9, 8)
    check.close(GQA, q, k, v, causal=True)


def test_gqa_causal_with_a_cache(check):
    # 5 new queries against 12 cached keys: query i sits at position i + 7.
    q, k, v = check.randn(2, 4, 5, 8), check.randn(2, 2, 12, 8), check.randn(2, 2, 12, 8)
    check.close(GQA, q, k, v, causal=True)


def test_gqa_cross_lengths_float64(check):
    q = check.randn(1, 6, 3, 8, dtype=torch.float64)
    k, v = check.randn(1, 3, 11, 8, dtype=torch.float64), check.randn(1, 3, 11, 8, dtype=torch.float64)
    check.close(GQA, q, k, v)


def test_gqa_views(check):
    q = check.randn(1, 5, 4, 16).transpose(1, 2)  # [1, 4, 5, 16]
    k = check.randn(1, 5, 2, 16).transpose(1, 2)  # [1, 2, 5, 16]
    v = check.randn(1, 5, 2, 16).transpose(1, 2)
    check.close(GQA, q, k, v, causal=True)


# Properties of grouped-query attention: each compares two of the student's own calls.

def test_decoding_one_token_at_a_time_equals_the_full_causal_call(check):
    """Property: generating with a cache, step t's one query against the t + 1 keys so far gives
    row t of the full causal call (the single query sits at the last position, §13's bottom-right
    alignment)."""
    n = 9
    q, k, v = check.randn(1, 4, n, 8), check.randn(1, 2, n, 8), check.randn(1, 2, n, 8)
    full = check.call(GQA, q, k, v, causal=True)
    steps = [check.call(GQA, q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1], causal=True) for t in range(n)]
    check.holds("decoding one token at a time with a growing cache of keys and values gives the rows of "
                "the full causal call", torch.cat(steps, dim=2), full, section="§25, §13")  # [1, 4, n, 8]


def test_sharing_kv_heads_equals_multi_head_with_each_one_repeated(check):
    """Property: grouped-query attention is multi-head attention whose k/v heads are repeated for
    their groups (repeated here, with repeat_interleave): the two calls must agree."""
    q, k, v = check.randn(2, 6, 5, 8), check.randn(2, 3, 8, 8), check.randn(2, 3, 8, 8)
    shared = check.call(GQA, q, k, v)
    repeated = check.call(GQA, q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    check.holds("grouped-query attention equals multi-head attention with each kv head repeated for its "
                "group of query heads", shared, repeated, section="§25", diagnose_with=(GQA, (q, k, v), {}))
