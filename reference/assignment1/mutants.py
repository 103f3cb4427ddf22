"""Misconception catalogue of assignment 1: known wrong versions of each function.

When a student's output is wrong, the grader runs these on the same inputs and
names the first one that reproduces it (NaN matching NaN). Order matters where
two mutants can agree on some inputs (see the softmax and causal_mask groups).

Each body uses only torch, math and names that reference.assignment1.attention
defines (here only its correct `softmax`, imported below), because `grade validate`
appends the source to that module and runs it as a submission. Only one function
is replaced at a time, so the SDPA mutants' `softmax` is always the correct one.
"""

from __future__ import annotations

import math

import torch

from grader.harness.catalogue import mutant
from reference.assignment1.attention import softmax

# ------------------------------------------------------------------ attention_scores


@mutant(function="attention_scores", id="scores_k_not_transposed",
        title="keys multiplied without transposing them", section="§6",
        explanation="q @ k only has the right shape by accident (when Lk equals d). Each score "
                    "is a dot product over the feature axis, so multiply q by kᵀ: "
                    "k.transpose(-2, -1).")
def scores_k_not_transposed(q, k):
    return q @ k


@mutant(function="attention_scores", id="scores_k_T_batched",
        title="k.T used on batched keys", section="§6",
        explanation="Tensor.T reverses every axis, so it is only the transpose for a 2-D matrix: on keys "
                    "[B, Lk, d] it gives [d, Lk, B], and the product fails or pairs the wrong axes. "
                    "Swap only the last two axes, k.transpose(-2, -1) (or k.mT), so that every batch "
                    "and head keeps its own keys.")
def scores_k_T_batched(q, k):
    return q @ k.T  # right for 2-D keys only


@mutant(function="attention_scores", id="scores_keys_as_rows",
        title="scores laid out as keys × queries", section="§6",
        explanation="k @ qᵀ gives the transposed matrix: row i must belong to query i and column j "
                    "to key j, so compute q @ kᵀ.")
def scores_keys_as_rows(q, k):
    return k @ q.transpose(-2, -1)


@mutant(function="attention_scores", id="scores_contract_tokens",
        title="summed over the token axis instead of the feature axis", section="§6",
        explanation="qᵀ @ k multiplies feature columns together (a d × d matrix). A score pairs "
                    "one query with one key and sums over their d features: q @ kᵀ.")
def scores_contract_tokens(q, k):
    return q.transpose(-2, -1) @ k


@mutant(function="attention_scores", id="scores_elementwise",
        title="each query scored only against the key at its own position", section="§6",
        explanation="(q * k).sum(-1) pairs query i with key i only. Every query needs a score "
                    "against every key, an Lq × Lk matrix: q @ kᵀ.")
def scores_elementwise(q, k):
    return (q * k).sum(dim=-1)


@mutant(function="attention_scores", id="scores_already_scaled",
        title="scores already divided by √d", section="§6",
        explanation="attention_scores returns the raw dot products; the division by √d_k is the "
                    "separate scale_scores step.")
def scores_already_scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


# ---------------------------------------------------------------------- scale_scores


@mutant(function="scale_scores", id="scale_not_applied",
        title="scores returned unscaled", section="§9",
        explanation="The scores must be divided by √d_k; without it their spread grows like √d_k "
                    "and the softmax saturates.")
def scale_not_applied(scores, d_k):
    return scores.clone()


@mutant(function="scale_scores", id="scale_by_d",
        title="divided by d_k instead of √d_k", section="§9",
        explanation="Dot products of d_k-dimensional vectors spread like √d_k, not d_k; divide by "
                    "math.sqrt(d_k).")
def scale_by_d(scores, d_k):
    return scores / d_k


@mutant(function="scale_scores", id="scale_multiplied",
        title="multiplied by √d_k instead of dividing", section="§9",
        explanation="Scaling must shrink the scores back to unit spread: divide by √d_k.")
def scale_multiplied(scores, d_k):
    return scores * math.sqrt(d_k)


@mutant(function="scale_scores", id="scale_by_num_keys",
        title="scaled by the number of keys instead of d_k", section="§9",
        explanation="The last axis of the scores counts keys (Lk); the scale uses the feature size "
                    "d_k passed in as an argument.")
def scale_by_num_keys(scores, d_k):
    return scores / math.sqrt(scores.size(-1))


# --------------------------------------------------------------------------- softmax


# softmax_nan_when_all_masked comes first: a student output with NaN in the all -inf
# slices must be named for that, not for a mutant that also happens to give NaN there.


@mutant(function="softmax", id="softmax_nan_when_all_masked",
        title="NaN for a slice that is entirely -inf", section="§10, §13",
        explanation="When every entry is -inf the max is -inf and x - max is NaN. Such a slice "
                    "has nothing to attend to: replace an infinite max by 0 (or treat a zero sum "
                    "specially) so it comes out as all zeros.")
def softmax_nan_when_all_masked(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@mutant(function="softmax", id="softmax_first_axis",
        title="normalised along the first axis", section="§10",
        explanation="The slices along `dim` must each sum to 1 (for attention: each row, over the "
                    "keys). Reduce with dim=dim, not axis 0.")
def softmax_first_axis(x, dim=-1):
    m = x.amax(dim=0, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=0, keepdim=True)


@mutant(function="softmax", id="softmax_ignores_dim",
        title="always normalised along the last axis", section="§10",
        explanation="The `dim` argument is ignored: use it in the max and the sum instead of -1.")
def softmax_ignores_dim(x, dim=-1):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


@mutant(function="softmax", id="softmax_sum_without_keepdim",
        title="sum taken without keepdim, so it broadcasts along the wrong axis", section="§10",
        explanation="e / e.sum(dim) drops the reduced axis, and broadcasting then divides entry "
                    "[i, j] by the sum of slice j. Keep the axis: e.sum(dim, keepdim=True).")
def softmax_sum_without_keepdim(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=dim)


@mutant(function="softmax", id="softmax_not_normalised",
        title="exponentials not divided by their sum", section="§10",
        explanation="exp(x - max) is only the numerator; divide by its sum along `dim` so that "
                    "each slice sums to 1.")
def softmax_not_normalised(x, dim=-1):
    return torch.exp(x - x.amax(dim=dim, keepdim=True))


@mutant(function="softmax", id="softmax_no_max_subtraction",
        title="exp() applied without subtracting the maximum first", section="§10",
        explanation="exp of a large score overflows to inf (float32 already above ~88), and the "
                    "ratio becomes 0 or NaN. Subtract the slice's max before exp: the result is "
                    "the same mathematically and every exp is at most 1.")
def softmax_no_max_subtraction(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


# ----------------------------------------------------------------------- causal_mask
# causal_mask_float comes first: as booleans it equals the right answer, so it must be
# tried before any mutant that agrees with the right answer on some shapes.


@mutant(function="causal_mask", id="causal_mask_float",
        title="mask returned as 1.0/0.0 floats instead of booleans", section="§13",
        explanation="Return a torch.bool tensor (True = may attend), e.g. the result of a "
                    "comparison like j <= i + (n_k - n_q), not a float matrix.")
def causal_mask_float(n_q, n_k, device=None):
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return (j <= i + (n_k - n_q)).float()


@mutant(function="causal_mask", id="causal_mask_no_diagonal",
        title="diagonal excluded: a token cannot see itself", section="§13",
        explanation="A query may attend to its own position: the condition is j <= i + (n_k - n_q), "
                    "with <=, not <.")
def causal_mask_no_diagonal(n_q, n_k, device=None):
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return j < i + (n_k - n_q)


@mutant(function="causal_mask", id="causal_mask_top_left",
        title="aligned to the top-left corner instead of the bottom-right", section="§13",
        explanation="With fewer queries than keys the queries are the last positions (as with a "
                    "cache of earlier keys), so the last query must see every key: shift the "
                    "diagonal by n_k - n_q, i.e. j <= i + (n_k - n_q). torch.tril(..., diagonal=0) "
                    "is only right when n_q == n_k.")
def causal_mask_top_left(n_q, n_k, device=None):
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return j <= i


@mutant(function="causal_mask", id="causal_mask_upper_triangle",
        title="upper triangle: each token sees the future instead of the past", section="§13",
        explanation="Query i may see keys at or before its own position (lower triangle, "
                    "torch.tril), not after it (torch.triu).")
def causal_mask_upper_triangle(n_q, n_k, device=None):
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return j >= i + (n_k - n_q)


@mutant(function="causal_mask", id="causal_mask_inverted",
        title="polarity inverted: True marks the blocked positions", section="§13",
        explanation="In this course True means 'may attend' (like torch's scaled_dot_product_"
                    "attention; nn.MultiheadAttention uses the opposite). Return True for the "
                    "past and the present, False for the future.")
def causal_mask_inverted(n_q, n_k, device=None):
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return j > i + (n_k - n_q)


# ------------------------------------------------------ scaled_dot_product_attention


@mutant(function="scaled_dot_product_attention", id="sdpa_no_scaling",
        title="scores not divided by √d", section="§9",
        explanation="Without 1/√d the scores spread like √d and the softmax saturates; divide "
                    "q @ kᵀ by math.sqrt(d), d = q.size(-1).")
def sdpa_no_scaling(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_scale_by_d",
        title="scores divided by d instead of √d", section="§9",
        explanation="Dot products of d-dimensional vectors spread like √d; divide by math.sqrt(d), "
                    "not d.")
def sdpa_scale_by_d(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.size(-1)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_scale_by_value_dim",
        title="scaled by √dv (the value size) instead of √d", section="§9",
        explanation="The scale comes from the size of the vectors in the dot product, the "
                    "queries and keys: d = q.size(-1). v may have a different size dv.")
def sdpa_scale_by_value_dim(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_softmax_over_queries",
        title="softmax taken over the queries (dim -2) instead of the keys", section="§10",
        explanation="Each query distributes its attention over the keys, so each ROW (the last "
                    "axis, dim=-1) of the weights must sum to 1.")
def sdpa_softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = softmax(scores, dim=-2)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_mask_inverted",
        title="mask polarity inverted: True treated as 'blocked'", section="§13",
        explanation="In this course (as in torch's scaled_dot_product_attention) True means 'may "
                    "attend': set the scores where the mask is False to -inf. "
                    "nn.MultiheadAttention uses the opposite convention.")
def sdpa_mask_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = torch.where(mask, float("-inf"), scores)
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_mask_after_softmax",
        title="mask applied after the softmax, without renormalising", section="§13",
        explanation="Zeroing weights after the softmax leaves rows that no longer sum to 1, and "
                    "the hidden keys still shaped the normalisation. Set masked SCORES to -inf "
                    "before the softmax.")
def sdpa_mask_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = softmax(scores, dim=-1)
    if mask is not None:
        weights = torch.where(mask, weights, 0.0)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_mask_fill_finite",
        title="masked scores filled with a large finite number instead of -inf", section="§13",
        explanation="With -1e9 instead of -inf a row whose keys are all masked becomes uniform "
                    "(every score equal) instead of all zeros. Use float('-inf') and a softmax "
                    "that returns zeros for an all -inf row.")
def sdpa_mask_fill_finite(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, -1e9)
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_mask_fill_zero",
        title="masked scores set to 0 instead of -inf", section="§13",
        explanation="A score of 0 is an ordinary score: the softmax still gives that key a weight of "
                    "e^(0 - max), so hidden (future or padding) keys keep a share of the attention. A "
                    "key that may not be seen needs the score -inf, whose exponential is exactly 0.")
def sdpa_mask_fill_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Lq, Lk)
    if mask is not None:
        scores = torch.where(mask, scores, 0.0)
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_mask_bool_index",
        title="masked scores selected with scores[~mask], which does not broadcast", section="§13",
        explanation="Indexing with a boolean tensor needs a mask of exactly the scores' leading shape; "
                    "it does not broadcast. A causal mask [Lq, Lk] or a padding mask [B, 1, 1, Lk] "
                    "against scores [B, H, Lq, Lk] then raises. Use an operation that broadcasts: "
                    "torch.where(mask, scores, float('-inf')) or scores.masked_fill(~mask, float('-inf')).")
def sdpa_mask_bool_index(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Lq, Lk)
    if mask is not None:
        scores[~mask] = float("-inf")  # right only for a mask of the scores' full shape
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_k_T_batched",
        title="k.T used on batched keys", section="§6",
        explanation="Tensor.T reverses every axis, so it is only the transpose for a 2-D matrix: on "
                    "batched keys [..., Lk, d] it scrambles the batch and head axes too, and q @ k.T "
                    "fails or pairs the wrong axes. Swap only the last two: k.transpose(-2, -1).")
def sdpa_k_T_batched(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.size(-1))  # right for 2-D inputs only
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


@mutant(function="scaled_dot_product_attention", id="sdpa_nan_when_all_masked",
        title="NaN for a query whose keys are all masked", section="§10, §13",
        explanation="A row of scores that is entirely -inf makes a plain softmax compute "
                    "-inf - (-inf) = NaN. Such a query sees nothing: its weights and its output "
                    "row must be zeros.")
def sdpa_nan_when_all_masked(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ v, weights
