"""Hidden tests of task sliding_window: sliding_window_mask and sliding_window_attention (§26).

The memory test runs L = 32768 in a fresh worker: a single L × L float32 matrix
would be 4 GiB, while the window needs only L · window scores.
"""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.task("sliding_window")

MASK = "sliding_window_mask"
SWA = "sliding_window_attention"
LONG = 32768


def test_mask_square(check):
    check.close(MASK, 7, 7, 3, heatmap=True)


def test_mask_window_one_is_the_diagonal(check):
    check.close(MASK, 5, 5, 1, heatmap=True)


def test_mask_fewer_queries_than_keys(check):
    check.close(MASK, 4, 11, 3, heatmap=True)


def test_mask_window_longer_than_the_sequence(check):
    check.close(MASK, 6, 6, 9, heatmap=True)


def test_attention_small(check):
    q, k, v = check.randn(2, 2, 10, 8), check.randn(2, 2, 10, 8), check.randn(2, 2, 10, 8)
    check.close(SWA, q, k, v, 3)


def test_attention_window_one_returns_the_values(check):
    # A window of one hands v back, as a placeholder would: the same test also asks for a window of 2.
    q, k, v = check.randn(1, 2, 6, 8), check.randn(1, 2, 6, 8), check.randn(1, 2, 6, 8)
    check.close(SWA, q, k, v, 1)
    check.close(SWA, q, k, v, 2)


def test_attention_longer_sequence(check):
    q, k, v = check.randn(1, 2, 300, 16), check.randn(1, 2, 300, 16), check.randn(1, 2, 300, 16)
    check.close(SWA, q, k, v, 37)


def test_attention_window_covers_everything(check):
    q, k, v = check.randn(2, 1, 20, 8), check.randn(2, 1, 20, 8), check.randn(2, 1, 20, 8)
    check.close(SWA, q, k, v, 50)


def test_attention_float64_views(check):
    q = check.randn(1, 12, 2, 8, dtype=torch.float64).transpose(1, 2)  # [1, 2, 12, 8]
    k = check.randn(1, 12, 2, 8, dtype=torch.float64).transpose(1, 2)
    v = check.randn(1, 12, 2, 8, dtype=torch.float64).transpose(1, 2)
    check.close(SWA, q, k, v, 4)


def test_a_window_is_full_attention_with_the_band_mask(check):
    """Property: sliding-window attention is full attention in which query i sees keys
    i − window < j ≤ i. The band is built here and the grader's own full attention computed with
    it, over a window wider than 64 keys (a blocked implementation must reach back further than
    one block of 64)."""
    n, window = 200, 100
    q, k, v = check.randn(1, 2, n, 16), check.randn(1, 2, n, 16), check.randn(1, 2, n, 16)
    i = torch.arange(n, device=check.device)
    band = (i[:, None] - i[None, :] >= 0) & (i[:, None] - i[None, :] < window)  # [N, N]: query i, key j
    full = F.scaled_dot_product_attention(q, k, v, attn_mask=band)
    check.holds(f"sliding-window attention equals full attention with the band mask (query i sees keys "
                f"i - {window} < j <= i)", check.call(SWA, q, k, v, window), full, section="§26",
                diagnose_with=(SWA, (q, k, v, window), {}))


def test_attention_memory_grows_with_length_times_window(check):
    window = 64
    q, k, v = check.randn(1, 1, LONG, 16), check.randn(1, 1, LONG, 16), check.randn(1, 1, LONG, 16)
    out, facts = check.call_with_facts(SWA, q, k, v, window, fresh_worker=True)
    check.compare(out, check.reference.sliding_window_attention(q, k, v, window), what=SWA,
                  diagnose_with=(SWA, (q, k, v, window), {}))
    check.expect(facts.largest_tensor_numel < LONG * LONG // 16,
                 f"with L = {LONG} and a window of {window}, your call created a tensor with "
                 f"{facts.largest_tensor_numel:,} elements, close to the L × L = {LONG * LONG:,} of full "
                 f"attention. Only the scores inside the window are needed: work on blocks of queries",
                 "§26")
    check.expect(facts.peak_memory_bytes < 1 << 30,
                 f"with L = {LONG} your call used {facts.peak_memory_bytes / 2**30:.2f} GiB of memory; "
                 f"a sliding window needs far less than one L × L matrix (4 GiB)", "§26")
