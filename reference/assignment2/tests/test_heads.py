"""Hidden tests, task heads: split_heads and merge_heads (§15–§16)."""

import pytest
import torch


@pytest.mark.task("heads")
def test_split_heads_gives_each_head_a_contiguous_block(check):
    x = check.randn(2, 5, 12)
    blocks = [x[..., h * 4:(h + 1) * 4] for h in range(3)]  # 3 heads of 4 columns
    check.close("split_heads", x, 3, expected=torch.stack(blocks, dim=1))  # (B, H, L, Dh)


@pytest.mark.task("heads")
def test_split_heads_float64_view_input(check):
    x = check.randn(2, 16, 7, dtype=torch.float64).transpose(1, 2)  # (B, L, d) view
    check.close("split_heads", x, 4)


@pytest.mark.task("heads")
def test_split_heads_keeps_extra_leading_dims(check):
    check.close("split_heads", check.randn(2, 3, 4, 8), 2)
    check.close("split_heads", check.randn(6, 10), 5)


@pytest.mark.task("heads")
def test_split_heads_one_token_and_one_head(check):
    check.close("split_heads", check.randn(3, 1, 12), 4)
    check.close("split_heads", check.randn(2, 5, 8), 1)


@pytest.mark.task("heads")
def test_merge_heads_concatenates_heads_per_token(check):
    check.close("merge_heads", check.randn(2, 3, 5, 4))


@pytest.mark.task("heads")
def test_merge_heads_float64_view_input(check):
    x = check.randn(2, 6, 4, 8, dtype=torch.float64).transpose(1, 2)  # (B, H, L, Dh) view
    check.close("merge_heads", x)


@pytest.mark.task("heads")
def test_merge_heads_keeps_extra_leading_dims(check):
    check.close("merge_heads", check.randn(2, 3, 2, 4, 5))
    check.close("merge_heads", check.randn(3, 4, 5))


@pytest.mark.task("heads")
def test_merge_heads_undoes_split_heads(check):
    x = check.randn(2, 6, 24)
    for n_heads in (2, 3, 8):
        back = check.call("merge_heads", check.call("split_heads", x, n_heads))
        check.compare(back, x, what="merge_heads(split_heads(x))", section="§16")
