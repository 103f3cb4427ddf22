"""Assignment 2, part 2: telling attention where each token is.

Attention by itself sees its input as a set: permute the tokens and the
outputs are permuted the same way, nothing else changes (§18, §20). The
functions below give it positions in three ways:

* sinusoidal_positions: a fixed table added to the embeddings (§18),
* rope_frequencies, apply_rope: rotary embeddings that turn q and k (§19, §21),
* alibi_slopes, alibi_bias: a penalty on the scores that grows with distance (§21).

Unless a docstring says otherwise, tensors may have any leading batch
dimensions, float32 and float64 inputs must work, results keep the input's
dtype and device, and inputs are never changed in place.

Run the public tests with `grade check assignment2`, or `pytest tests` in this
folder. Every test fails with NotImplementedError until you start.
"""

from __future__ import annotations

import math  # noqa: F401  (you may want math.log2 and math.floor)

import torch

# =============================================================================
# Task sinusoidal_positions (§18): the original transformer's position table.
# =============================================================================


def sinusoidal_positions(n_positions: int, d_model: int) -> torch.Tensor:
    """The fixed sine/cosine table, one row per position.

        PE[p, 2i]   = sin(p / 10000^(2i / d_model))
        PE[p, 2i+1] = cos(p / 10000^(2i / d_model))

    Positions p run from 0 to n_positions - 1. Dimensions 2i and 2i+1 form a
    pair that shares one angle: sine in the even dimension, cosine in the odd
    one right after it (interleaved, not all sines followed by all cosines).
    So row 0 is [0, 1, 0, 1, ...]. d_model is even.

    Shapes:
        returns: [n_positions, d_model], float32

    Tip: compute the angles in float64 and convert the table to float32 at the
    end. Lecture §18.
    """
    raise NotImplementedError("sinusoidal_positions")


# =============================================================================
# Task rope (§19, §21): rotary position embeddings, half-split layout.
# =============================================================================


def rope_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """How fast each pair of dimensions turns with the position.

        freq[i] = base^(-2i / d_head)        for i = 0 .. d_head/2 - 1

    freq[0] is 1 (the fastest pair); the last is close to 1/base.

    Shapes:
        returns: [d_head / 2], float32
    Lecture §19.
    """
    raise NotImplementedError("rope")


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0,
               scale: float = 1.0) -> torch.Tensor:
    """Rotate each pair of dimensions of x by an angle proportional to its position.

    Half-split layout (HF Llama, GPT-NeoX): with D = x.shape[-1], dimension j
    is paired with dimension j + D/2 for j < D/2. The pair (a, b) = (x[j],
    x[j + D/2]) at position p turns by the angle

        theta_j = (p / scale) * freq[j]          freq as in rope_frequencies(D, base)

        a' = a cos(theta_j) - b sin(theta_j)
        b' = b cos(theta_j) + a sin(theta_j)

    Written for whole vectors: out = x * cos + rotate_half(x) * sin, where
    rotate_half([x1, x2]) = [-x2, x1] (x1, x2 the two halves of the last
    dimension) and cos, sin hold each angle twice, [theta, theta].

    scale > 1 is linear position interpolation (§21): position p is treated
    as p / scale, so a model trained on N positions can read N * scale.

    Compute the angles, cos and sin in float32 at least (float64 when x is
    float64), even for float16 inputs, and return a tensor of x's dtype.

    Shapes:
        x:         [..., L, D]   any leading dims (batch, heads), D even
        positions: [L], integer; entry t is the position of row t of x
        returns:   [..., L, D]

    Position 0 leaves a vector unchanged, and rotating q and k makes their
    dot product depend only on the difference of their positions. Lecture
    §19, §21.
    """
    raise NotImplementedError("rope")


# =============================================================================
# Task alibi (§21): a linear penalty on distance, one slope per head.
# =============================================================================


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of every head.

    For n_heads = n a power of two the slopes are a geometric sequence that
    starts at 2^(-8/n) with that same ratio:

        m_h = 2^(-8 (h + 1) / n)       h = 0 .. n-1      (n = 8: 1/2, 1/4, ..., 1/256)

    For any other n, let c be the largest power of two below n: take the c
    slopes for c heads, then append every other slope of the 2c-head sequence
    (its 1st, 3rd, 5th, ...) until there are n. For n = 12: the 8 slopes for
    8 heads, then slopes 0, 2, 4, 6 of the 16-head sequence.

    Shapes:
        returns: [n_heads], float32
    Lecture §21.
    """
    raise NotImplementedError("alibi")


def alibi_bias(n_heads: int, n_q: int, n_k: int) -> torch.Tensor:
    """The score bias of ALiBi: minus the head's slope times the distance.

        bias[h, i, j] = -m_h * (i' - j)        with  i' = i + n_k - n_q

    Bottom-right alignment, as for the causal mask: the n_q queries are the
    last n_q of the n_k positions, so the last query sits at position n_k - 1.
    The aligned key (j = i') gets 0, earlier keys get more negative values;
    keys after i' get positive values here, the causal mask removes those.

    Shapes:
        returns: [n_heads, n_q, n_k], float32
    Lecture §21.
    """
    raise NotImplementedError("alibi")
