"""Assignment 1: scaled dot-product attention, written from scratch.

Fill in the five functions below, one task each. Every function must:

* accept any number of leading batch dimensions (none, one, two, ...),
* work for float32 and float64, on CPU or CUDA, for contiguous inputs and
  for views (transposes, slices),
* return tensors on the input's device with the input's dtype,
* leave its inputs unchanged (build new tensors; no in-place edits).

Boolean masks use True = "this query may attend to this key".

Not allowed here (the point is to write them yourself): torch's softmax family
(`torch.softmax`, `F.softmax`, `Tensor.softmax`, `log_softmax`, `nn.Softmax`),
`F.scaled_dot_product_attention` and `nn.MultiheadAttention`. Matrix products
(`@`, `torch.matmul`) are fine.

Run the public tests with `grade check assignment1`, or `pytest tests` in this
folder. Every test fails with NotImplementedError until you start.
"""

from __future__ import annotations

import math  # noqa: F401  (you will probably want math.sqrt)

import torch

# =============================================================================
# Task attention_scores (§6): how well does each query match each key?
# =============================================================================


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw query–key scores: the dot product of every query with every key.

        scores[..., i, j] = Σ_c q[..., i, c] · k[..., j, c]      i.e.  scores = q kᵀ

    Shapes:
        q:       [..., Lq, d]   one row per query
        k:       [..., Lk, d]   one row per key (same feature size d as q)
        returns: [..., Lq, Lk]  row i holds query i's score against every key

    Only the last two dimensions are matrix dimensions; leading dimensions
    (batch, heads) are matched one to one. No scaling here: that is
    scale_scores' job. Lecture §6 (the formula), §7 (one query by hand).
    """
    raise NotImplementedError("attention_scores")


# =============================================================================
# Task scale_scores (§9): keep the scores in a range softmax can work with.
# =============================================================================


def scale_scores(scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Divide the raw scores by the square root of the key dimension.

        scaled = scores / √d_k

    Shapes:
        scores:  [..., Lq, Lk]  output of attention_scores
        d_k:     int            feature size of the queries and keys (not Lk)
        returns: [..., Lq, Lk]  same shape and dtype as scores

    Why: the dot product of two random d_k-dimensional vectors with unit-variance
    entries has a spread of about √d_k; dividing brings it back to about 1 so the
    softmax does not become nearly one-hot. Lecture §9.
    """
    raise NotImplementedError("scale_scores")


# =============================================================================
# Task softmax (§10): turn scores into weights, without overflow.
# =============================================================================


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

        softmax(x)_i = exp(x_i - m) / Σ_j exp(x_j - m),     m = max_j x_j

    Subtracting the slice's maximum m changes nothing mathematically but keeps
    every exp() at most 1, so inputs of ±1e4 must not overflow to inf or NaN.

    -inf entries (masked scores) get weight exactly 0. A slice whose entries
    are ALL -inf has nothing to attend to: return zeros there, not NaN
    (careful: -inf - (-inf) is NaN).

    Shapes:
        x:       any shape, e.g. [..., Lq, Lk]
        dim:     the dimension that must sum to 1 (default: the last)
        returns: same shape and dtype as x; every slice along `dim` sums to 1
                 (or is all zeros if it was all -inf)

    Lecture §10 (each row is a probability distribution), §8 (why weights are
    not proportional to scores).
    """
    raise NotImplementedError("softmax")


# =============================================================================
# Task causal_mask (§13): no looking at the future.
# =============================================================================


def causal_mask(n_q: int, n_k: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean causal mask, aligned to the bottom-right corner.

        mask[i, j] = True  iff  j <= i + (n_k - n_q)

    The n_q queries are taken to be the LAST n_q positions of the n_k keys
    (as when a model appends new tokens to a cache of earlier keys): the last
    query sees every key, and each query sees its own position and the past.
    When n_q == n_k this is the lower triangle including the diagonal. When
    n_q > n_k the first n_q - n_k rows are all False.

    Shapes:
        returns: [n_q, n_k], dtype torch.bool, on `device` (default: CPU)

    True means "may attend". Lecture §13.
    """
    raise NotImplementedError("causal_mask")


# =============================================================================
# Task scaled_dot_product_attention (§6, §10, §12, §13): the whole mechanism.
# =============================================================================


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(q, k, v) = softmax(q kᵀ / √d  with masked scores set to -inf) v.

    Shapes:
        q:       [..., Lq, d]
        k:       [..., Lk, d]
        v:       [..., Lk, dv]     dv may differ from d; Lk may differ from Lq
        mask:    bool, broadcastable to [..., Lq, Lk]; True = may attend.
                 Examples: [Lq, Lk] (same for the whole batch), [B, 1, 1, Lk]
                 (padding: hide some keys from every query). None = no mask.
        returns: (out, weights)
                 out:     [..., Lq, dv]
                 weights: [..., Lq, Lk], each row sums to 1; a row whose keys
                          are all masked is all zeros (and so is its output row)

    Masking happens on the scores, BEFORE the softmax (§13): a hidden key must
    not take part in the normalisation. Self-attention is q, k, v from the
    same sequence; cross-attention is q from one and k, v from another (§12).
    You may call your own functions above. Lecture §6, §10, §12, §13.
    """
    raise NotImplementedError("scaled_dot_product_attention")
