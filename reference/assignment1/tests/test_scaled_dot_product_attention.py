"""Hidden tests of task scaled_dot_product_attention (§6, §10, §12, §13).

The student function returns (out, weights); `heatmap=1` shows the weights in
the report. The mask is passed positionally: `check.close` keeps a keyword
argument named `mask` for itself.
"""

import pytest
import torch
import torch.nn.functional as F

from grader.harness.draws import first_query_sees_two_large_scores

pytestmark = pytest.mark.task("scaled_dot_product_attention")

SDPA = "scaled_dot_product_attention"


def lower_triangle(n_q, n_k, device):
    """Bottom-right aligned causal mask, built here so this task does not depend on causal_mask."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def call_pair(check, *args):
    """The student's (out, weights), or a failure that says a pair was expected."""
    result = check.call(SDPA, *args)
    check.expect(isinstance(result, (tuple, list)) and len(result) == 2,
                 "scaled_dot_product_attention must return a pair (out, weights)", "§6")
    return result


def test_self_attention(check):
    x = check.randn(2, 6, 8)
    check.close(SDPA, x, x, x, heatmap=1)


def test_self_attention_distinct_projections(check):
    q, k, v = check.randn(2, 6, 8), check.randn(2, 6, 8), check.randn(2, 6, 8)
    check.close(SDPA, q, k, v, heatmap=1)


def test_cross_attention_other_lengths_and_value_size(check):
    q, k, v = check.randn(3, 4, 8), check.randn(3, 7, 8), check.randn(3, 7, 5)  # dv = 5 != d
    check.close(SDPA, q, k, v, heatmap=1)


def test_no_batch_dims(check):
    q, k, v = check.randn(5, 16), check.randn(9, 16), check.randn(9, 4)
    check.close(SDPA, q, k, v, heatmap=1)


def test_explicit_none_mask(check):
    q, k, v = check.randn(1, 4, 8), check.randn(1, 4, 8), check.randn(1, 4, 8)
    check.close(SDPA, q, k, v, None, heatmap=1)


def test_causal_mask_broadcast_over_batch_and_heads(check):
    q, k, v = check.randn(2, 3, 6, 8), check.randn(2, 3, 6, 8), check.randn(2, 3, 6, 8)
    mask = lower_triangle(6, 6, check.device)  # [Lq, Lk] against [B, H, Lq, Lk]
    check.close(SDPA, q, k, v, mask, heatmap=1)


def test_causal_mask_with_a_cache(check):
    q, k, v = check.randn(2, 3, 8), check.randn(2, 7, 8), check.randn(2, 7, 8)
    mask = lower_triangle(3, 7, check.device)  # the 3 queries are the last 3 positions
    check.close(SDPA, q, k, v, mask, heatmap=1)


def test_padding_mask(check):
    b, h, lq, lk, d = 3, 2, 5, 6, 8
    q, k, v = check.randn(b, h, lq, d), check.randn(b, h, lk, d), check.randn(b, h, lk, d)
    lengths = torch.tensor([6, 4, 2], device=check.device)  # real keys per sequence
    keep = torch.arange(lk, device=check.device) < lengths[:, None]  # [B, Lk]
    mask = keep[:, None, None, :]  # [B, 1, 1, Lk]
    check.close(SDPA, q, k, v, mask, heatmap=1)


def test_padding_mask_with_an_empty_sequence(check):
    b, lq, lk, d = 3, 4, 5, 8
    q, k, v = check.randn(b, 2, lq, d), check.randn(b, 2, lk, d), check.randn(b, 2, lk, 6)
    lengths = torch.tensor([5, 0, 3], device=check.device)  # sequence 1 has no real key at all
    mask = (torch.arange(lk, device=check.device) < lengths[:, None])[:, None, None, :]
    out, weights = call_pair(check, q, k, v, mask)
    check.expect(not (out.isnan().any() or weights.isnan().any()),
                 "a query whose keys are all masked got NaN: its scores are all -inf, and "
                 "-inf - (-inf) is NaN. Its weights and its output row must be zeros", "§10, §13")
    check.close(SDPA, q, k, v, mask, heatmap=1)


def test_rows_with_every_key_masked_are_zero(check):
    q, k, v = check.randn(2, 5, 8), check.randn(2, 6, 8), check.randn(2, 6, 3)
    mask = check.rand_bool(2, 5, 6, p=0.6).to(check.device)
    mask[:, :, 0] = True
    mask[0, 2] = False  # query 2 of sequence 0 may see nothing
    mask[1, 4] = False
    check.close(SDPA, q, k, v, mask, heatmap=1)


def test_float64_with_mask(check):
    q = check.randn(2, 2, 5, 8, dtype=torch.float64)
    k = check.randn(2, 2, 5, 8, dtype=torch.float64)
    v = check.randn(2, 2, 5, 6, dtype=torch.float64)
    check.close(SDPA, q, k, v, lower_triangle(5, 5, check.device), heatmap=1)


def test_non_contiguous_inputs(check):
    b, l, h, d = 2, 6, 3, 8
    q = check.randn(b, l, h, d).transpose(1, 2)  # [B, H, L, D] views, as after splitting heads
    k = check.randn(b, l, h, d).transpose(1, 2)
    v = check.randn(b, l, h, 2 * d).transpose(1, 2)[..., ::2]
    check.close(SDPA, q, k, v, lower_triangle(l, l, check.device), heatmap=1)


def test_large_scores_stay_finite(check):
    q, k, v = check.randn(2, 5, 16, scale=30.0), check.randn(2, 5, 16, scale=30.0), check.randn(2, 5, 16)
    first_query_sees_two_large_scores(q, k)  # scaled scores 100, 99, 0, 0, 0 on every draw
    check.close(SDPA, q, k, v, heatmap=1)


def test_matches_torch_scaled_dot_product_attention(check):
    q, k, v = check.randn(2, 2, 5, 8), check.randn(2, 2, 7, 8), check.randn(2, 2, 7, 4)
    mask = check.rand_bool(5, 7, p=0.7).to(check.device)
    mask[:, 0] = True
    mask[3] = False  # torch >= 2.5 gives zeros for a query that sees nothing, as we do
    # Trusted side: torch's own attention (True = may attend, scale 1/√d) as the oracle.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-2, -1) / 8**0.5).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    check.close(SDPA, q, k, v, mask, expected=(out, weights), heatmap=1)


def test_weight_rows_sum_to_one(check):
    q, k, v = check.randn(2, 3, 6, 8), check.randn(2, 3, 6, 8), check.randn(2, 3, 6, 8)
    mask = lower_triangle(6, 6, check.device)
    _, weights = call_pair(check, q, k, v, mask)
    sums = weights.sum(dim=-1)
    check.expect(torch.allclose(sums, torch.ones_like(sums), atol=1e-5),
                 "each row of the attention weights must sum to 1: the softmax runs over the "
                 "keys (dim=-1) after the masked scores are set to -inf", "§10, §11")


def test_future_tokens_do_not_change_the_past(check):
    """Property: under a causal mask, changing the keys and values after position t leaves the
    outputs up to t as they were. 20 tokens, longer than any comparison above."""
    l, t = 20, 9
    q, k, v = check.randn(2, l, 8), check.randn(2, l, 8), check.randn(2, l, 8)
    mask = lower_triangle(l, l, check.device)
    k2, v2 = k.clone(), v.clone()
    k2[:, t + 1:] = check.randn(2, l - t - 1, 8, scale=3.0)
    v2[:, t + 1:] = check.randn(2, l - t - 1, 8, scale=3.0)
    out1, _ = call_pair(check, q, k, v, mask)
    out2, _ = call_pair(check, q, k2, v2, mask)
    check.holds(f"with a causal mask, changing the keys and values after position {t} leaves the outputs "
                f"of positions 0..{t} unchanged (future tokens must not leak into the past: the scores "
                f"where the mask is False are -inf before the softmax)",
                out2[:, :t + 1], out1[:, :t + 1], section="§13", rtol=1e-4, atol=1e-5)


# Properties every correct attention has, on inputs longer than the comparisons above (24 keys): each
# compares the student's output on transformed inputs with the student's own output, transformed.

def test_reordering_key_value_pairs_changes_nothing(check):
    """Property: attention treats its key/value pairs as a set. Reordering them together leaves
    every output unchanged and reorders each row of weights the same way."""
    q, k, v = check.randn(2, 5, 8), check.randn(2, 24, 8), check.randn(2, 24, 4)
    order = torch.randperm(24, generator=check.gen).to(check.device)
    out, weights = call_pair(check, q, k, v)
    moved = call_pair(check, q, k[:, order], v[:, order])
    check.holds("reordering the key/value pairs together leaves every output unchanged (and reorders "
                "each row of weights with them)", tuple(moved), (out, weights[..., order]), section="§4, §10",
                diagnose_with=(SDPA, (q, k[:, order], v[:, order]), {}))


def test_reordering_the_queries_reorders_the_outputs(check):
    """Property: each query's output depends on that query alone. Reordering the queries reorders
    the outputs and the rows of weights, nothing else."""
    q, k, v = check.randn(2, 24, 8), check.randn(2, 7, 8), check.randn(2, 7, 4)
    order = torch.randperm(24, generator=check.gen).to(check.device)
    out, weights = call_pair(check, q, k, v)
    moved = call_pair(check, q[:, order], k, v)
    check.holds("reordering the queries reorders the outputs and the rows of weights the same way "
                "(each query is answered on its own)", tuple(moved), (out[:, order], weights[:, order]),
                section="§10", diagnose_with=(SDPA, (q[:, order], k, v), {}))


def test_scaling_the_values_scales_the_outputs(check):
    """Property: the output is a weighted average of the values with weights that do not depend on
    them, so values 10 times larger give outputs 10 times larger and the same weights."""
    q, k, v = check.randn(2, 6, 8), check.randn(2, 24, 8), check.randn(2, 24, 4)
    out, weights = call_pair(check, q, k, v)
    scaled = call_pair(check, q, k, 10.0 * v)
    check.holds("values 10 times larger give outputs 10 times larger and the same weights (the output "
                "is a weighted average of the values)", tuple(scaled), (10.0 * out, weights), section="§6",
                rtol=1e-4, atol=1e-4, diagnose_with=(SDPA, (q, k, 10.0 * v), {}))
