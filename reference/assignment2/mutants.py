"""The misconception catalogue of assignment2: known wrong versions, one per mistake.

When a student's output is wrong, the grader runs the mutants of that function on
the same inputs and names the one whose output matches. Each mutant has the
student function's signature and uses only torch, math and names its reference
module defines (`grade validate` appends it to that module and runs the hidden
suite on the result), so it never calls its own function's name.
"""

from __future__ import annotations

import math

import torch

from grader.harness.catalogue import mutant
from reference.assignment2.multihead import merge_heads, split_heads
from reference.assignment2.positions import _inverse_frequencies, alibi_slopes, rotate_half

# =============================================================================
# heads: split_heads / merge_heads (§16)
# =============================================================================


@mutant(function="split_heads", id="split_heads_strided",
        title="each head takes every H-th column instead of a contiguous block", section="§16",
        explanation="Head h owns columns h*Dh to (h+1)*Dh - 1. Reshape the last dimension "
                    "to (H, Dh), heads first, then move the head axis in front of L.")
def split_heads_strided(x, n_heads):
    *batch, length, width = x.shape
    x = x.reshape(*batch, length, width // n_heads, n_heads)  # (..., L, Dh, H)
    return x.movedim(-1, -3)  # (..., H, L, Dh)


@mutant(function="split_heads", id="split_heads_no_transpose",
        title="reshaped straight to [B, H, L, Dh] without a transpose", section="§16",
        explanation="A reshape keeps the memory order, so reshaping [B, L, H*Dh] directly to "
                    "[B, H, L, Dh] mixes tokens between heads. Reshape to [B, L, H, Dh] first, "
                    "then swap the L and H axes.")
def split_heads_no_transpose(x, n_heads):
    *batch, length, width = x.shape
    return x.reshape(*batch, n_heads, length, width // n_heads)  # (..., H, L, Dh), scrambled


@mutant(function="merge_heads", id="merge_heads_no_transpose",
        title="reshaped straight to [B, L, H*Dh] without a transpose", section="§16",
        explanation="The heads must be concatenated token by token: move the head axis "
                    "behind L first ([B, L, H, Dh]), then flatten the last two axes.")
def merge_heads_no_transpose(x):
    *batch, n_heads, length, d_head = x.shape
    return x.reshape(*batch, length, n_heads * d_head)  # (..., L, H*Dh), scrambled


# =============================================================================
# multi_head_attention (§15–§16)
# =============================================================================


@mutant(function="multi_head_attention", id="mha_no_scaling",
        title="scores not divided by √Dh", section="§16",
        explanation="Each head is scaled dot-product attention in its own subspace: divide "
                    "q·k by the square root of the head size Dh before the softmax.")
def mha_no_scaling(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1)  # (B, H, Lq, Lk), no 1/√Dh
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_scale_by_d_model",
        title="scores divided by √d_model instead of √Dh", section="§16",
        explanation="The dot products inside one head sum over Dh = d_model / H terms, so "
                    "the right scale is 1/√Dh, not 1/√d_model.")
def mha_scale_by_d_model(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(x_q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_no_output_projection",
        title="the output projection W_O is missing", section="§16",
        explanation="After concatenating the heads, multiply by W_O (y = concat @ w_o.T): it "
                    "is what mixes the heads' outputs together.")
def mha_no_output_projection(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return merge_heads(torch.softmax(scores, dim=-1) @ v)  # (B, Lq, d_model), no W_O


@mutant(function="multi_head_attention", id="mha_mask_inverted",
        title="mask read with the opposite polarity (True = blocked)", section="§13",
        explanation="In this course True means 'may attend', as in F.scaled_dot_product_attention. "
                    "nn.MultiheadAttention's attn_mask uses the opposite convention; do not copy it.")
def mha_mask_inverted(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # blocks the allowed keys
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_mask_ignored",
        title="the mask is not applied", section="§13",
        explanation="Where the mask is False the score must become -inf before the softmax, "
                    "so that key gets a weight of exactly zero.")
def mha_mask_ignored(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_mask_fill_zero",
        title="masked scores set to 0 instead of -inf", section="§13",
        explanation="A masked score of 0 still gets a weight of e^(0 - max) in the softmax, so the "
                    "keys the mask hides keep a share of every head's attention. Fill them with -inf, "
                    "whose exponential is exactly 0.")
def mha_mask_fill_zero(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)  # a score of 0 is not "hidden"
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_mask_bool_index",
        title="masked scores selected with scores[~mask], which does not broadcast", section="§13",
        explanation="Boolean indexing needs a mask of exactly the scores' leading shape: a mask "
                    "[Lq, Lk] or [B, 1, 1, Lk] against scores [B, H, Lq, Lk] raises instead of "
                    "broadcasting over the heads. Use scores.masked_fill(~mask, float('-inf')) or "
                    "torch.where, which broadcast.")
def mha_mask_bool_index(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores[~mask] = float("-inf")  # right only for a mask of the full [B, H, Lq, Lk] shape
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_k_T_batched",
        title="k.T used on the per-head keys", section="§16",
        explanation="After the split the keys are [B, H, Lk, Dh], and Tensor.T reverses all four "
                    "axes ([Dh, Lk, H, B]), so q @ k.T fails or mixes heads and batches. Transpose "
                    "only the last two axes: k.transpose(-2, -1).")
def mha_k_T_batched(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q.T, n_heads)  # (B, H, Lq, Dh)
    k = split_heads(x_kv @ w_k.T, n_heads)  # (B, H, Lk, Dh)
    v = split_heads(x_kv @ w_v.T, n_heads)  # (B, H, Lk, Dh)
    scores = q @ k.T / math.sqrt(q.shape[-1])  # k.T is (Dh, Lk, H, B): not the per-head transpose
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


@mutant(function="multi_head_attention", id="mha_heads_strided",
        title="heads built from every H-th feature instead of contiguous blocks", section="§16",
        explanation="Head h owns features h*Dh to (h+1)*Dh - 1 of each projection, and its "
                    "output goes back to the same block before W_O.")
def mha_heads_strided(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    def split(t):  # (B, L, d_model) → (B, H, L, Dh), feature c to head c % H
        return t.reshape(*t.shape[:-1], t.shape[-1] // n_heads, n_heads).movedim(-1, -3)

    def merge(t):  # (B, H, L, Dh) → (B, L, d_model), the inverse of split
        return t.movedim(-3, -1).flatten(-2)

    q, k, v = split(x_q @ w_q.T), split(x_kv @ w_k.T), split(x_kv @ w_v.T)  # (B, H, L*, Dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return merge(torch.softmax(scores, dim=-1) @ v) @ w_o.T  # (B, Lq, d_model)


# =============================================================================
# sinusoidal_positions (§18)
# =============================================================================


@mutant(function="sinusoidal_positions", id="sinusoidal_concatenated",
        title="all sines first, then all cosines ([sin | cos] layout)", section="§18",
        explanation="The original layout interleaves: dimension 2i holds the sine and "
                    "dimension 2i+1 the cosine of the same angle, so position 0 reads "
                    "[0, 1, 0, 1, ...].")
def sinusoidal_concatenated(n_positions, d_model):
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    pair = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,) = 2i
    angle = p / 10000.0 ** (pair / d_model)  # (n, d/2)
    return torch.cat([angle.sin(), angle.cos()], dim=-1).to(torch.float32)  # (n, d)


@mutant(function="sinusoidal_positions", id="sinusoidal_off_by_one",
        title="positions counted from 1 instead of 0", section="§18",
        explanation="Row p encodes position p, starting at 0: the first row is "
                    "sin(0) = 0 and cos(0) = 1 alternating.")
def sinusoidal_off_by_one(n_positions, d_model):
    p = torch.arange(1, n_positions + 1, dtype=torch.float64)[:, None]  # (n, 1), from 1
    dim = torch.arange(d_model)  # (d,)
    angle = p / 10000.0 ** (2 * (dim // 2) / d_model)  # (n, d)
    return torch.where(dim % 2 == 0, angle.sin(), angle.cos()).to(torch.float32)


@mutant(function="sinusoidal_positions", id="sinusoidal_frequency_per_dim",
        title="every dimension gets its own frequency (exponent j/d)", section="§18",
        explanation="Dimensions 2i and 2i+1 are a pair: both use the angle p / 10000^(2i/d). "
                    "Using the dimension index j itself gives the cosine a different frequency.")
def sinusoidal_frequency_per_dim(n_positions, d_model):
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    dim = torch.arange(d_model)  # (d,)
    angle = p / 10000.0 ** (dim / d_model)  # (n, d), exponent j/d
    return torch.where(dim % 2 == 0, angle.sin(), angle.cos()).to(torch.float32)


@mutant(function="sinusoidal_positions", id="sinusoidal_cos_first",
        title="cosine in the even dimensions, sine in the odd ones", section="§18",
        explanation="Even dimensions (0, 2, 4, ...) hold the sine, odd ones the cosine.")
def sinusoidal_cos_first(n_positions, d_model):
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    dim = torch.arange(d_model)  # (d,)
    angle = p / 10000.0 ** (2 * (dim // 2) / d_model)  # (n, d)
    return torch.where(dim % 2 == 0, angle.cos(), angle.sin()).to(torch.float32)


# =============================================================================
# rope: rope_frequencies / apply_rope (§19, §21)
# =============================================================================


@mutant(function="rope_frequencies", id="rope_freq_missing_two",
        title="exponent i/d instead of 2i/d", section="§19",
        explanation="Pair i turns at base^(-2i/d): the exponent steps through the even "
                    "numbers 0, 2, 4, ... divided by d, so the slowest pair is close to 1/base.")
def rope_freq_missing_two(d_head, base=10000.0):
    i = torch.arange(d_head // 2, dtype=torch.float64)  # (D/2,)
    return (float(base) ** -(i / d_head)).to(torch.float32)


@mutant(function="apply_rope", id="rope_interleaved",
        title="interleaved pairs (2i, 2i+1) where the half-split layout is asked", section="§19",
        explanation="This course uses the half-split layout of HF Llama and GPT-NeoX: "
                    "dimension j is rotated together with dimension j + D/2, not with j + 1.")
def rope_interleaved(x, positions, base=10000.0, scale=1.0):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = _inverse_frequencies(x.shape[-1], base, compute, x.device)  # (D/2,)
    angle = (positions.to(x.device, compute) / scale)[:, None] * freq  # (L, D/2)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x.to(compute)[..., 0::2], x.to(compute)[..., 1::2]  # (..., L, D/2) each
    out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., L, D/2, 2)
    return out.flatten(-2).to(x.dtype)  # (..., L, D)


@mutant(function="apply_rope", id="rope_position_off_by_one",
        title="rotated by position p + 1 instead of p", section="§19",
        explanation="The angle is p * freq with the position exactly as given: position 0 "
                    "is not rotated at all.")
def rope_position_off_by_one(x, positions, base=10000.0, scale=1.0):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = _inverse_frequencies(x.shape[-1], base, compute, x.device)  # (D/2,)
    angle = ((positions.to(x.device, compute) + 1) / scale)[:, None] * freq  # (L, D/2)
    angle = torch.cat([angle, angle], dim=-1)  # (L, D)
    xc = x.to(compute)
    return (xc * angle.cos() + rotate_half(xc) * angle.sin()).to(x.dtype)


@mutant(function="apply_rope", id="rope_scale_multiplied",
        title="positions multiplied by scale instead of divided", section="§21",
        explanation="Linear position interpolation squeezes a long context into the trained "
                    "range: use p / scale, so scale = 4 makes position 4k look like 1k.")
def rope_scale_multiplied(x, positions, base=10000.0, scale=1.0):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = _inverse_frequencies(x.shape[-1], base, compute, x.device)  # (D/2,)
    angle = (positions.to(x.device, compute) * scale)[:, None] * freq  # (L, D/2)
    angle = torch.cat([angle, angle], dim=-1)  # (L, D)
    xc = x.to(compute)
    return (xc * angle.cos() + rotate_half(xc) * angle.sin()).to(x.dtype)


@mutant(function="apply_rope", id="rope_base_ignored",
        title="the base argument is ignored (always 10000)", section="§19",
        explanation="Models choose their own base (Llama 3 uses 500000); compute the "
                    "frequencies from the base you are given.")
def rope_base_ignored(x, positions, base=10000.0, scale=1.0):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = _inverse_frequencies(x.shape[-1], 10000.0, compute, x.device)  # (D/2,)
    angle = (positions.to(x.device, compute) / scale)[:, None] * freq  # (L, D/2)
    angle = torch.cat([angle, angle], dim=-1)  # (L, D)
    xc = x.to(compute)
    return (xc * angle.cos() + rotate_half(xc) * angle.sin()).to(x.dtype)


@mutant(function="apply_rope", id="rope_wrong_direction",
        title="rotated the wrong way (sign of the sine term flipped)", section="§19",
        explanation="rotate_half maps [x1, x2] to [-x2, x1], and the result is "
                    "x*cos + rotate_half(x)*sin: a counter-clockwise turn by the angle.")
def rope_wrong_direction(x, positions, base=10000.0, scale=1.0):
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freq = _inverse_frequencies(x.shape[-1], base, compute, x.device)  # (D/2,)
    angle = (positions.to(x.device, compute) / scale)[:, None] * freq  # (L, D/2)
    angle = torch.cat([angle, angle], dim=-1)  # (L, D)
    xc = x.to(compute)
    return (xc * angle.cos() - rotate_half(xc) * angle.sin()).to(x.dtype)


@mutant(function="apply_rope", id="rope_angles_in_input_dtype",
        title="angles computed in half precision", section="§19",
        explanation="p * freq grows with the position; in float16 it loses whole fractions of "
                    "a radian at positions in the thousands. Compute angles, cos and sin in "
                    "float32 (or float64), then cast the result back to x's dtype.")
def rope_angles_in_input_dtype(x, positions, base=10000.0, scale=1.0):
    freq = _inverse_frequencies(x.shape[-1], base, x.dtype, x.device)  # (D/2,) in x's dtype
    angle = (positions.to(x.device, x.dtype) / scale)[:, None] * freq  # (L, D/2)
    angle = torch.cat([angle, angle], dim=-1)  # (L, D)
    return x * angle.cos() + rotate_half(x) * angle.sin()


# =============================================================================
# alibi: alibi_slopes / alibi_bias (§21)
# =============================================================================


@mutant(function="alibi_slopes", id="alibi_slopes_plain_geometric",
        title="2^(-8h/n) used for a head count that is not a power of two", section="§21",
        explanation="For n heads that is not a power of two, ALiBi takes the slopes of the "
                    "closest smaller power of two, then every other slope of twice that count "
                    "until there are n.")
def alibi_slopes_plain_geometric(n_heads):
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)],
                        dtype=torch.float32)


@mutant(function="alibi_slopes", id="alibi_slopes_from_one",
        title="slopes start at 1 (exponent -8h/n with h from 0)", section="§21",
        explanation="The first slope is 2^(-8/n) and each next one is multiplied by the same "
                    "ratio, down to 2^(-8) for the last head of a power-of-two count.")
def alibi_slopes_from_one(n_heads):
    return torch.tensor([2.0 ** (-8.0 * h / n_heads) for h in range(n_heads)],
                        dtype=torch.float32)


@mutant(function="alibi_bias", id="alibi_bias_wrong_sign",
        title="the bias grows with distance instead of penalising it", section="§21",
        explanation="ALiBi subtracts m_h times the distance: far-away keys get a more "
                    "negative score, the aligned key gets 0.")
def alibi_bias_wrong_sign(n_heads, n_q, n_k):
    slopes = alibi_slopes(n_heads)  # (H,)
    distance = (torch.arange(n_q)[:, None] + (n_k - n_q)) - torch.arange(n_k)[None, :]  # (n_q, n_k)
    return slopes[:, None, None] * distance.to(torch.float32)  # (H, n_q, n_k), + instead of -


@mutant(function="alibi_bias", id="alibi_bias_top_left",
        title="query i placed at position i instead of i + n_k - n_q (top-left alignment)",
        section="§21",
        explanation="With fewer queries than keys the queries are the last n_q tokens, as in "
                    "the bottom-right causal mask: query i sits at position i + n_k - n_q.")
def alibi_bias_top_left(n_heads, n_q, n_k):
    slopes = alibi_slopes(n_heads)  # (H,)
    distance = torch.arange(n_q)[:, None] - torch.arange(n_k)[None, :]  # (n_q, n_k)
    return -slopes[:, None, None] * distance.to(torch.float32)  # (H, n_q, n_k)

