"""Hidden tests of task streaming: streaming_attention (§29).

Queries before the end of the sinks catch sinks that leak from the future;
a short window over a long sequence catches missing sinks; a cache (Lq < Lk)
catches top-left alignment.
"""

import pytest
import torch

pytestmark = pytest.mark.task("streaming")

STREAM = "streaming_attention"


def qkv(check, b, h, n_q, n_k, d, dtype=torch.float32):
    return (check.randn(b, h, n_q, d, dtype=dtype), check.randn(b, h, n_k, d, dtype=dtype),
            check.randn(b, h, n_k, d, dtype=dtype))


def test_window_and_sinks(check):
    check.close(STREAM, *qkv(check, 2, 2, 40, 40, 8), 8, n_sinks=4)


def test_default_four_sinks(check):
    check.close(STREAM, *qkv(check, 1, 2, 30, 30, 8), 5)


def test_queries_inside_the_sinks(check):
    check.close(STREAM, *qkv(check, 1, 2, 6, 6, 8), 2, n_sinks=4)


def test_decoding_with_a_cache(check):
    check.close(STREAM, *qkv(check, 2, 1, 3, 50, 8), 6, n_sinks=2)


def test_no_sinks_is_a_sliding_window(check):
    check.close(STREAM, *qkv(check, 1, 2, 25, 25, 8), 4, n_sinks=0)


def test_window_covering_everything_is_causal(check):
    check.close(STREAM, *qkv(check, 1, 1, 12, 12, 8), 100, n_sinks=3)


def test_float64_long_sequence(check):
    check.close(STREAM, *qkv(check, 1, 2, 90, 90, 16, torch.float64), 16, n_sinks=4)
