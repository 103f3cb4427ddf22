"""Public tests of assignment 3: a first check of each task.

Run them with `grade check assignment3`, or with `pytest tests` in this folder.
Each test computes its expected answer right here with plain torch (torch's own
softmax and matmul are fine in tests; only your files have rules). The hidden
tests that grade your work check much more: other lengths (1, 17, 100, 257, ...),
head dims 16 to 128, float16, inputs scaled ×10, views, memory use at L = 32768.

Without a GPU, the flash tests run your kernel in Triton's interpreter; this file
turns it on for you when no CUDA device is present (the variable must be set
before your flash.py is imported, which happens after this file is loaded).
"""

import math
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def attention(q, k, v, visible=None):
    """softmax(q kᵀ / √D) v with an optional bool mask (True = may attend)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.task("gqa")
def test_repeat_kv_keeps_groups_together(check):
    x = check.randn(1, 2, 3, 4)  # kv heads 0 and 1
    check.close("repeat_kv", x, 3, expected=x.repeat_interleave(3, dim=1))  # 0, 0, 0, 1, 1, 1


@pytest.mark.task("gqa")
def test_grouped_query_attention_four_heads_two_groups(check):
    q, k, v = check.randn(1, 4, 5, 8), check.randn(1, 2, 5, 8), check.randn(1, 2, 5, 8)
    expected = attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    check.close("grouped_query_attention", q, k, v, expected=expected)


@pytest.mark.task("gqa")
def test_multi_query_attention_causal(check):
    q, k, v = check.randn(2, 3, 6, 8), check.randn(2, 1, 6, 8), check.randn(2, 1, 6, 8)
    lower = torch.ones(6, 6, dtype=torch.bool).tril()
    expected = attention(q, k.expand(2, 3, 6, 8), v.expand(2, 3, 6, 8), lower)
    check.close("grouped_query_attention", q, k, v, causal=True, expected=expected)


@pytest.mark.task("kv_cache")
def test_kv_cache_bytes_by_hand(check):
    # 2 layers × 4 kv heads × 16 numbers × 10 tokens, keys and values, float16.
    check.close("kv_cache_bytes", 2, 4, 16, 10, expected=2 * 2 * 4 * 16 * 10 * 2)


@pytest.mark.task("sliding_window")
def test_sliding_window_mask_window_of_two(check):
    expected = torch.tensor([[True, False, False, False],
                             [True, True, False, False],
                             [False, True, True, False],
                             [False, False, True, True]])
    check.close("sliding_window_mask", 4, 4, 2, expected=expected, heatmap=True)


@pytest.mark.task("sliding_window")
def test_sliding_window_attention_small(check):
    q, k, v = check.randn(1, 2, 7, 8), check.randn(1, 2, 7, 8), check.randn(1, 2, 7, 8)
    i, j = torch.arange(7)[:, None], torch.arange(7)[None, :]
    visible = (i - j >= 0) & (i - j < 3)  # itself and the two keys before it
    check.close("sliding_window_attention", q, k, v, 3, expected=attention(q, k, v, visible))


@pytest.mark.task("streaming")
def test_streaming_attention_keeps_the_sinks(check):
    q, k, v = check.randn(1, 1, 12, 8), check.randn(1, 1, 12, 8), check.randn(1, 1, 12, 8)
    i, j = torch.arange(12)[:, None], torch.arange(12)[None, :]
    visible = (j <= i) & ((j < 2) | (i - j < 3))
    check.close("streaming_attention", q, k, v, 3, n_sinks=2, expected=attention(q, k, v, visible))


@pytest.mark.task("flash_forward")
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_small(check, causal):
    q, k, v = check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16)
    visible = torch.ones(20, 20, dtype=torch.bool).tril() if causal else None
    out, facts = check.call_with_facts("flash_attention", q, k, v, causal=causal)
    check.compare(out, attention(q, k, v, visible), what="flash_attention")
    check.expect(facts.triton_launches >= 1, "flash_attention must launch your Triton kernel", "§24")


@pytest.mark.task("flash_forward")
def test_flash_attention_more_than_one_block(check):
    q, k, v = check.randn(1, 1, 90, 32), check.randn(1, 1, 90, 32), check.randn(1, 1, 90, 32)
    check.close("flash_attention", q, k, v, expected=attention(q, k, v))


@pytest.mark.task("flash_gqa")
def test_bonus_flash_attention_with_shared_kv_heads(check):
    q, k, v = check.randn(1, 4, 20, 16), check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16)
    expected = attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    check.close("flash_attention", q, k, v, expected=expected)


@pytest.mark.task("flash_backward")
def test_bonus_flash_attention_gradients(check):
    q, k, v, grad_out = (check.randn(1, 2, 20, 16) for _ in range(4))
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    expected = torch.autograd.grad(attention(*leaves), leaves, grad_out)
    check.compare(check.call("flash_attention_grads", q, k, v, grad_out), expected,
                  what="flash_attention_grads", rtol=1e-3, atol=1e-4)
