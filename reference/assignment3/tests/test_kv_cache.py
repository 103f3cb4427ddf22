"""Hidden tests of task kv_cache: kv_cache_bytes (§25).

The function returns a Python int; check.close compares numbers exactly.
"""

import pytest

pytestmark = pytest.mark.task("kv_cache")

KV = "kv_cache_bytes"


def test_tiny_example_from_the_docstring(check):
    check.close(KV, 1, 1, 4, 3)


def test_a_70b_model_with_grouped_query_attention(check):
    check.close(KV, 80, 8, 128, 4096)


def test_batch_and_float32(check):
    check.close(KV, 32, 32, 128, 2048, batch_size=4, bytes_per_value=4)


def test_positional_arguments(check):
    check.close(KV, 24, 4, 64, 1000, 3, 1)


def test_returns_the_right_int(check):
    value = check.close(KV, 3, 2, 8, 5)  # 3 layers: not 2, which a missing factor 2 would mimic
    check.expect(isinstance(value, int) and not isinstance(value, bool),
                 f"kv_cache_bytes should return a Python int, got {type(value).__name__}", "§25")


def test_sharing_kv_heads_divides_the_cache(check):
    # The ratio alone holds for a function that returns 0: both sizes must be right, too.
    full = check.close(KV, 80, 64, 128, 4096)
    shared = check.close(KV, 80, 8, 128, 4096)
    check.expect(isinstance(full, int | float) and isinstance(shared, int | float) and shared * 8 == full,
                 "64 query heads sharing 8 kv heads should make the cache exactly 8 times smaller "
                 "than one kv head per query head", "§25")
