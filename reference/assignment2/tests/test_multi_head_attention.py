"""Hidden tests, task multi_head_attention (§15–§16; masks §13, cross-attention §12).

Masks go to the student's function as the 8th positional argument: check.close
has a `mask=` keyword of its own (where to look when describing a difference)
and would keep it from the student's function.
"""

import pytest
import torch


def projections(check, d_model, dtype=torch.float32):
    """w_q, w_k, w_v, w_o scaled so that projected features have unit variance."""
    return [check.randn(d_model, d_model, dtype=dtype, scale=d_model ** -0.5) for _ in range(4)]


@pytest.mark.task("multi_head_attention")
def test_self_attention(check):
    x = check.randn(2, 6, 16)
    check.close("multi_head_attention", x, x, *projections(check, 16), 4)


@pytest.mark.task("multi_head_attention")
def test_cross_attention_with_more_keys_than_queries(check):
    x_q, x_kv = check.randn(2, 3, 16), check.randn(2, 7, 16)
    check.close("multi_head_attention", x_q, x_kv, *projections(check, 16), 2)


@pytest.mark.task("multi_head_attention")
def test_causal_mask(check):
    x = check.randn(3, 5, 12)
    causal = torch.ones(5, 5, dtype=torch.bool, device=check.device).tril()  # (Lq, Lk)
    check.close("multi_head_attention", x, x, *projections(check, 12), 3, causal)


@pytest.mark.task("multi_head_attention")
def test_padding_mask_per_sequence(check):
    x_q, x_kv = check.randn(2, 4, 16), check.randn(2, 7, 16)
    valid = torch.tensor([5, 6], device=check.device)  # keys per sequence
    mask = torch.arange(7, device=check.device) < valid[:, None]  # (B, Lk)
    check.close("multi_head_attention", x_q, x_kv, *projections(check, 16), 4,
                mask[:, None, None, :])  # (B, 1, 1, Lk)


@pytest.mark.task("multi_head_attention")
def test_full_mask_per_head(check):
    x_q, x_kv = check.randn(2, 5, 16), check.randn(2, 6, 16)
    mask = check.rand_bool(2, 4, 5, 6, p=0.6).to(check.device)  # (B, H, Lq, Lk)
    mask[..., 0], mask[..., 1] = True, False  # every query keeps and loses at least one key
    check.close("multi_head_attention", x_q, x_kv, *projections(check, 16), 4, mask)


@pytest.mark.task("multi_head_attention")
def test_float64_eight_heads(check):
    x = check.randn(2, 9, 32, dtype=torch.float64)
    check.close("multi_head_attention", x, x, *projections(check, 32, torch.float64), 8)


@pytest.mark.task("multi_head_attention")
def test_view_inputs(check):
    x_q = check.randn(2, 16, 6).transpose(1, 2)  # (B, Lq, d) view
    x_kv = check.randn(8, 2, 16).transpose(0, 1)  # (B, Lk, d) view
    weights = [w.T for w in projections(check, 16)]  # transposed views
    causal = torch.ones(6, 8, dtype=torch.bool, device=check.device).tril(diagonal=2)
    check.close("multi_head_attention", x_q, x_kv, *weights, 4, causal)


@pytest.mark.task("multi_head_attention")
def test_single_token(check):
    x = check.randn(3, 1, 8)
    check.close("multi_head_attention", x, x, *projections(check, 8), 2)
    check.close("multi_head_attention", x, check.randn(3, 5, 8), *projections(check, 8), 2)


@pytest.mark.task("multi_head_attention")
def test_one_head_is_plain_attention(check):
    x_q, x_kv = check.randn(2, 4, 8), check.randn(2, 3, 8)
    check.close("multi_head_attention", x_q, x_kv, *projections(check, 8), 1)


@pytest.mark.task("multi_head_attention")
def test_shuffling_tokens_shuffles_outputs(check):
    x = check.randn(2, 7, 16)
    weights = projections(check, 16)
    order = torch.randperm(7, generator=check.gen).to(check.device)
    out = check.call("multi_head_attention", x, x, *weights, 4)
    shuffled = check.call("multi_head_attention", x[:, order], x[:, order], *weights, 4)
    check.compare(shuffled, out[:, order], what="multi_head_attention", section="§18, §20")
