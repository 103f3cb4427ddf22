"""Public tests of assignment 3: a first check of each task.

Run them with `grade check assignment3`, or with `pytest tests` in this folder.
Each test computes its expected answer right here with plain torch (torch's own
softmax and matmul are fine in tests; only your files have rules). Every rule
the hidden tests grade is tried here at least once: caches (fewer queries than
keys), float64 and views, lengths that are not a multiple of the block size, a
single token, head dims up to 128, float16, inputs scaled ×10, an explicit
sm_scale, and memory that grows with the length instead of its square. The
hidden tests try each rule on more inputs and lengths.

The kernel tasks are graded by construction: the tests call contract.py's launchers,
which launch your kernels into buffers they allocate (contract.py says how).

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


def attention(q, k, v, visible=None, sm_scale=None):
    """softmax(q kᵀ · sm_scale) v (default scale 1/√D) with an optional bool mask (True = may attend)."""
    scale = 1 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = q @ k.transpose(-2, -1) * scale
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


def relative(n_q, n_k):
    """i' − j for query i (at position i' = i + n_k − n_q: the queries are the last ones) and key j."""
    return torch.arange(n_q)[:, None] + (n_k - n_q) - torch.arange(n_k)[None, :]


@pytest.mark.task("gqa")
def test_repeat_kv_of_a_float64_view_and_once(check):
    x = check.randn(1, 3, 2, 4, dtype=torch.float64).transpose(1, 2)  # [1, 2, 3, 4], not contiguous
    check.close("repeat_kv", x, 2, expected=x.repeat_interleave(2, dim=1))
    check.close("repeat_kv", x, 1, expected=x.clone())


@pytest.mark.task("gqa")
def test_grouped_query_attention_causal_with_a_cache(check):
    # 3 new queries against 7 keys (4 of them cached): query i sits at position i + 4.
    q, k, v = check.randn(1, 4, 3, 8), check.randn(1, 2, 7, 8), check.randn(1, 2, 7, 8)
    expected = attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1), relative(3, 7) >= 0)
    check.close("grouped_query_attention", q, k, v, causal=True, expected=expected)


@pytest.mark.task("gqa")
def test_grouped_query_attention_float64_views_other_lengths(check):
    q = check.randn(1, 2, 6, 8, dtype=torch.float64).transpose(1, 2)  # [1, 6, 2, 8] view: 6 heads, Lq = 2
    k, v = (check.randn(1, 3, 5, 8, dtype=torch.float64) for _ in range(2))  # 3 kv heads, Lk = 5
    expected = attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    check.close("grouped_query_attention", q, k, v, expected=expected)


@pytest.mark.task("kv_cache")
def test_kv_cache_bytes_by_hand(check):
    # 2 layers × 4 kv heads × 16 numbers × 10 tokens, keys and values, float16.
    check.close("kv_cache_bytes", 2, 4, 16, 10, expected=2 * 2 * 4 * 16 * 10 * 2)


@pytest.mark.task("kv_cache")
def test_kv_cache_bytes_batch_and_float32(check):
    # 3 layers × 2 kv heads × 8 numbers × 6 tokens × batch 5, keys and values, 4 bytes each.
    check.close("kv_cache_bytes", 3, 2, 8, 6, batch_size=5, bytes_per_value=4,
                expected=3 * 2 * 2 * 8 * 6 * 5 * 4)
    check.close("kv_cache_bytes", 3, 2, 8, 6, 5, 1, expected=3 * 2 * 2 * 8 * 6 * 5 * 1)  # positionally
    value = check.call("kv_cache_bytes", 1, 1, 2, 3)
    check.expect(isinstance(value, int) and not isinstance(value, bool),
                 f"kv_cache_bytes must return a Python int (a count of bytes), got {type(value).__name__}",
                 "§25")


@pytest.mark.task("sliding_window")
def test_sliding_window_mask_window_of_two(check):
    expected = torch.tensor([[True, False, False, False],
                             [True, True, False, False],
                             [False, True, True, False],
                             [False, False, True, True]])
    check.close("sliding_window_mask", 4, 4, 2, expected=expected, heatmap=True)


@pytest.mark.task("sliding_window")
def test_sliding_window_mask_with_a_cache(check):
    # 3 queries, 6 keys: query i sits at position i + 3 and sees itself and the key before it.
    expected = torch.tensor([[False, False, True, True, False, False],
                             [False, False, False, True, True, False],
                             [False, False, False, False, True, True]])
    check.close("sliding_window_mask", 3, 6, 2, expected=expected, heatmap=True)


@pytest.mark.task("sliding_window")
def test_sliding_window_mask_window_one_and_longer_than_the_sequence(check):
    check.close("sliding_window_mask", 3, 3, 1, expected=torch.eye(3, dtype=torch.bool), heatmap=True)
    check.close("sliding_window_mask", 4, 4, 6, expected=torch.ones(4, 4, dtype=torch.bool).tril(), heatmap=True)


@pytest.mark.task("sliding_window")
def test_sliding_window_attention_small(check):
    q, k, v = check.randn(1, 2, 7, 8), check.randn(1, 2, 7, 8), check.randn(1, 2, 7, 8)
    i, j = torch.arange(7)[:, None], torch.arange(7)[None, :]
    visible = (i - j >= 0) & (i - j < 3)  # itself and the two keys before it
    check.close("sliding_window_attention", q, k, v, 3, expected=attention(q, k, v, visible))


@pytest.mark.task("sliding_window")
def test_sliding_window_attention_float64_views_window_past_the_start(check):
    q, k, v = (check.randn(1, 9, 2, 4, dtype=torch.float64).transpose(1, 2) for _ in range(3))  # [1, 2, 9, 4]
    for window in (4, 12):  # 12 > L: plain causal attention
        visible = (relative(9, 9) >= 0) & (relative(9, 9) < window)
        check.close("sliding_window_attention", q, k, v, window, expected=attention(q, k, v, visible))


@pytest.mark.task("sliding_window")
def test_sliding_window_attention_memory_grows_with_the_window_not_the_square(check):
    n, window = 4096, 16
    q, k, v = check.randn(1, 1, n, 8), check.randn(1, 1, n, 8), check.randn(1, 1, n, 8)
    visible = (relative(n, n) >= 0) & (relative(n, n) < window)
    out, facts = check.call_with_facts("sliding_window_attention", q, k, v, window)
    check.compare(out, attention(q, k, v, visible), what="sliding_window_attention")
    check.expect(facts.largest_tensor_numel < n * n // 16,
                 f"with L = {n} your call created a tensor of {facts.largest_tensor_numel:,} elements, "
                 f"close to L × L = {n * n:,}: only the L × window scores inside the window are needed", "§26")


@pytest.mark.task("streaming")
def test_streaming_attention_keeps_the_sinks(check):
    q, k, v = check.randn(1, 1, 12, 8), check.randn(1, 1, 12, 8), check.randn(1, 1, 12, 8)
    i, j = torch.arange(12)[:, None], torch.arange(12)[None, :]
    visible = (j <= i) & ((j < 2) | (i - j < 3))
    check.close("streaming_attention", q, k, v, 3, n_sinks=2, expected=attention(q, k, v, visible))


@pytest.mark.task("streaming")
def test_streaming_attention_decoding_with_a_cache_and_the_default_sinks(check):
    # 2 queries against 11 keys: they sit at positions 9 and 10; 4 sinks by default, window 3.
    q, k, v = check.randn(1, 2, 2, 8), check.randn(1, 2, 11, 8), check.randn(1, 2, 11, 8)
    rel, j = relative(2, 11), torch.arange(11)[None, :]
    visible = (rel >= 0) & ((j < 4) | (rel < 3))
    check.close("streaming_attention", q, k, v, 3, expected=attention(q, k, v, visible))


@pytest.mark.task("streaming")
def test_streaming_attention_queries_among_the_sinks_and_no_sinks(check):
    q, k, v = (check.randn(1, 1, 5, 8, dtype=torch.float64) for _ in range(3))
    rel, j = relative(5, 5), torch.arange(5)[None, :]
    visible = (rel >= 0) & ((j < 3) | (rel < 2))  # queries 0-2 are sinks themselves: no future sink
    check.close("streaming_attention", q, k, v, 2, n_sinks=3, expected=attention(q, k, v, visible))
    plain = (rel >= 0) & (rel < 2)
    check.close("streaming_attention", q, k, v, 2, n_sinks=0, expected=attention(q, k, v, plain))


# The kernel tasks are graded by construction: contract.py's launch_forward allocates the output
# and launches your _flash_fwd_kernel itself (the grader runs it on your kernels alone).
KERNEL = "launch_forward"


@pytest.mark.task("flash_forward")
@pytest.mark.parametrize("causal", [False, True])
def test_flash_kernel_small(check, causal):
    q, k, v = check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16)
    visible = torch.ones(20, 20, dtype=torch.bool).tril() if causal else None
    check.close(KERNEL, q, k, v, causal=causal, expected=attention(q, k, v, visible))


@pytest.mark.task("flash_forward")
def test_flash_kernel_more_than_one_block(check):
    q, k, v = check.randn(1, 1, 90, 32), check.randn(1, 1, 90, 32), check.randn(1, 1, 90, 32)
    check.close(KERNEL, q, k, v, expected=attention(q, k, v))


def flash_case(check, n, d, *, heads=1, dtype=torch.float32, scale=1.0):
    return tuple(check.randn(1, heads, n, d, dtype=dtype, scale=s) for s in (scale, scale, 1.0))


@pytest.mark.task("flash_forward")
def test_flash_kernel_single_token_and_head_dim_128(check):
    for causal in (False, True):
        q, k, v = flash_case(check, 1, 16)
        check.close(KERNEL, q, k, v, causal=causal, expected=attention(q, k, v))
    q, k, v = flash_case(check, 10, 128)
    check.close(KERNEL, q, k, v, causal=True, expected=attention(q, k, v, relative(10, 10) >= 0))


@pytest.mark.task("flash_forward")
def test_flash_kernel_explicit_sm_scale(check):
    q, k, v = flash_case(check, 24, 16, heads=2)
    check.close(KERNEL, q, k, v, sm_scale=0.5, expected=attention(q, k, v, sm_scale=0.5))


@pytest.mark.task("flash_forward")
def test_flash_kernel_float16(check):
    q, k, v = flash_case(check, 33, 16, dtype=torch.float16)
    expected = attention(q.float(), k.float(), v.float(), relative(33, 33) >= 0).half()
    check.close(KERNEL, q, k, v, causal=True, expected=expected)


@pytest.mark.task("flash_forward")
def test_flash_kernel_large_scores_across_blocks(check):
    # q and k scaled ×10: the running maximum jumps from one block of keys to the next.
    q, k, v = flash_case(check, 130, 16, scale=10.0)
    check.close(KERNEL, q, k, v, expected=attention(q.double(), k.double(), v.double()).float(),
                rtol=1e-3, atol=1e-3)


@pytest.mark.task("flash_forward")
def test_flash_kernel_views_and_an_exact_multiple_of_the_block(check):
    q, k, v = (check.randn(1, 64, 2, 16).transpose(1, 2) for _ in range(3))  # [1, 2, 64, 16] views
    check.close(KERNEL, q, k, v, causal=True, expected=attention(q, k, v, relative(64, 64) >= 0))


@pytest.mark.task("flash_launcher")
def test_flash_attention_returns_what_your_kernel_writes(check):
    # Views: flash_attention must pass the strides, and return the kernel's output unchanged.
    q, k, v = (check.randn(1, 40, 2, 16).transpose(1, 2) for _ in range(3))  # [1, 2, 40, 16] views
    out = check.call("flash_attention", q, k, v, causal=True)
    check.returns_kernel_output("flash_attention", out, check.call(KERNEL, q, k, v, causal=True),
                                attention(q, k, v, relative(40, 40) >= 0))


@pytest.mark.task("flash_launcher")
def test_flash_attention_returns_what_your_kernel_writes_at_head_dim_32(check):
    # Like the hidden tests, flash_attention is judged against your own kernel's output: a kernel bug
    # costs flash_forward, not flash_launcher.
    q, k, v = (check.randn(1, 1, 12, 32) for _ in range(3))
    out = check.call("flash_attention", q, k, v)
    check.returns_kernel_output("flash_attention", out, check.call(KERNEL, q, k, v), attention(q, k, v))


@pytest.mark.task("flash_launcher")
def test_flash_attention_refuses_an_unsupported_head_dim(check):
    q, k, v = (check.randn(1, 1, 8, 24) for _ in range(3))
    check.raises("flash_attention", q, k, v, exception="ValueError", because="head dim 24 is not 16, 32, 64 or 128")


@pytest.mark.task("flash_gqa")
def test_bonus_flash_kernel_with_shared_kv_heads(check):
    q, k, v = check.randn(1, 4, 20, 16), check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16)
    expected = attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    check.close(KERNEL, q, k, v, expected=expected)


@pytest.mark.task("flash_backward")
def test_bonus_flash_backward_kernels(check):
    q, k, v, grad_out = (check.randn(1, 2, 20, 16) for _ in range(4))
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    expected = torch.autograd.grad(attention(*leaves), leaves, grad_out)
    check.compare(check.call("launch_backward", q, k, v, grad_out), expected,
                  what="the gradients (dq, dk, dv) of your backward kernels", rtol=1e-3, atol=1e-4)
