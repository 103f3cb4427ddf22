"""Public tests of assignment 2: run `grade check assignment2`, or `pytest tests` here.

Every expectation below is computed in this file with plain torch, so you can
read exactly what is asked. Every rule the hidden tests grade is tried here at
least once (leading dimensions, float64, views, each kind of mask, the base and
scale of RoPE, half precision at large positions, head counts that are not a
power of two); the hidden tests try each rule on more inputs.

Masks are passed to multi_head_attention as its 8th positional argument:
check.close keeps a `mask=` keyword for itself.
"""

import math

import pytest
import torch

# ----------------------------------------------------------------------------- heads


@pytest.mark.task("heads")
def test_split_heads_gives_head_h_columns_h_times_dh_onwards(check):
    x = check.randn(2, 5, 12)  # B=2, L=5, H*Dh = 3*4
    expected = torch.stack([x[..., 0:4], x[..., 4:8], x[..., 8:12]], dim=1)  # (B, H, L, Dh)
    check.close("split_heads", x, 3, expected=expected)


@pytest.mark.task("heads")
def test_merge_heads_undoes_split_heads(check):
    x = check.randn(2, 6, 24)
    back = check.call("merge_heads", check.call("split_heads", x, 4))
    check.compare(back, x, what="merge_heads(split_heads(x, 4))", section="§16")


@pytest.mark.task("heads")
def test_split_heads_keeps_any_leading_dims_and_views(check):
    x = check.randn(2, 3, 4, 6)  # two leading dims, L=4, H*Dh = 2*3
    check.close("split_heads", x, 2, expected=torch.stack([x[..., 0:3], x[..., 3:6]], dim=-3))
    x = check.randn(2, 8, 5, dtype=torch.float64).transpose(1, 2)  # (B, L, d) view, float64
    check.close("split_heads", x, 2, expected=torch.stack([x[..., 0:4], x[..., 4:8]], dim=1))


@pytest.mark.task("heads")
def test_merge_heads_puts_the_heads_side_by_side_per_token(check):
    x = check.randn(2, 3, 4, 5)  # (B, H, L, Dh)
    expected = torch.cat([x[:, 0], x[:, 1], x[:, 2]], dim=-1)  # (B, L, H*Dh)
    check.close("merge_heads", x, expected=expected)
    unbatched = check.randn(2, 3, 4, dtype=torch.float64)  # (H, L, Dh)
    check.close("merge_heads", unbatched, expected=torch.cat([unbatched[0], unbatched[1]], dim=-1))


# -------------------------------------------------------------- multi_head_attention


def torch_mha(w_q, w_k, w_v, w_o, n_heads):
    """PyTorch's own module with our weights (its masks use the opposite polarity)."""
    d_model = w_q.shape[0]
    module = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True, dtype=w_q.dtype)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        module.out_proj.weight.copy_(w_o)
    return module.to(w_q.device)


def weights(check, d_model):
    return [check.randn(d_model, d_model, scale=d_model ** -0.5) for _ in range(4)]


@pytest.mark.task("multi_head_attention")
def test_self_attention_matches_torch(check):
    x, w = check.randn(2, 6, 16), weights(check, 16)
    with torch.no_grad():
        expected, _ = torch_mha(*w, 4)(x, x, x, need_weights=False)
    check.close("multi_head_attention", x, x, *w, 4, expected=expected)


@pytest.mark.task("multi_head_attention")
def test_cross_attention_with_causal_mask_matches_torch(check):
    x_q, x_kv, w = check.randn(2, 3, 16), check.randn(2, 5, 16), weights(check, 16)
    # Bottom-right aligned causal mask: query i (at position i + 2) sees keys 0 .. i + 2.
    mask = torch.ones(3, 5, dtype=torch.bool, device=check.device).tril(diagonal=2)
    with torch.no_grad():
        expected, _ = torch_mha(*w, 2)(x_q, x_kv, x_kv, attn_mask=~mask, need_weights=False)
    check.close("multi_head_attention", x_q, x_kv, *w, 2, mask, expected=expected)


@pytest.mark.task("multi_head_attention")
def test_padding_mask_per_sequence_matches_torch(check):
    x_q, x_kv, w = check.randn(2, 3, 16), check.randn(2, 6, 16), weights(check, 16)
    valid = torch.arange(6, device=check.device) < torch.tensor([4, 6], device=check.device)[:, None]  # (B, Lk)
    with torch.no_grad():
        expected, _ = torch_mha(*w, 4)(x_q, x_kv, x_kv, key_padding_mask=~valid, need_weights=False)
    check.close("multi_head_attention", x_q, x_kv, *w, 4, valid[:, None, None, :], expected=expected)


@pytest.mark.task("multi_head_attention")
def test_a_mask_per_head_matches_torch(check):
    x_q, x_kv, w = check.randn(2, 4, 8), check.randn(2, 5, 8), weights(check, 8)
    mask = check.rand_bool(2, 2, 4, 5, p=0.5).to(check.device)  # (B, H, Lq, Lk)
    mask[..., 2] = True  # every query keeps at least one key
    with torch.no_grad():
        expected, _ = torch_mha(*w, 2)(x_q, x_kv, x_kv, attn_mask=~mask.reshape(4, 4, 5), need_weights=False)
    check.close("multi_head_attention", x_q, x_kv, *w, 2, mask, expected=expected)


@pytest.mark.task("multi_head_attention")
def test_float64_views_and_a_single_token(check):
    x = check.randn(2, 16, 5, dtype=torch.float64).transpose(1, 2)  # (B, L, d) view
    w = [check.randn(16, 16, dtype=torch.float64, scale=0.25).T for _ in range(4)]  # transposed views
    with torch.no_grad():
        expected, _ = torch_mha(*w, 8)(x, x, x, need_weights=False)  # a float64 module
    check.close("multi_head_attention", x, x, *w, 8, expected=expected)
    one, w = check.randn(3, 1, 8), weights(check, 8)
    with torch.no_grad():
        expected, _ = torch_mha(*w, 1)(one, one, one, need_weights=False)
    check.close("multi_head_attention", one, one, *w, 1, expected=expected)


# -------------------------------------------------------------- sinusoidal_positions


@pytest.mark.task("sinusoidal_positions")
def test_sinusoidal_table_entries(check):
    n, d = 6, 8
    expected = torch.empty(n, d)
    for p in range(n):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            expected[p, 2 * i], expected[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    check.close("sinusoidal_positions", n, d, expected=expected)  # row 0: [0, 1, 0, 1, ...]


@pytest.mark.task("sinusoidal_positions")
def test_sinusoidal_width_not_a_multiple_of_four(check):
    n, d = 5, 6
    p = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    angle = p / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (n, d/2): 2i/d
    expected = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(n, d).float()  # sin, cos interleaved
    check.close("sinusoidal_positions", n, d, expected=expected)


# ------------------------------------------------------------------------------ rope


@pytest.mark.task("rope")
def test_rope_frequencies(check):
    expected = torch.tensor([1.0, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75])
    check.close("rope_frequencies", 8, expected=expected)


@pytest.mark.task("rope")
def test_rope_pairs_dimension_j_with_j_plus_half(check):
    # D = 4: dim 0 pairs with dim 2 (frequency 1), dim 1 with dim 3 (frequency 1/100).
    x = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], device=check.device)
    positions = torch.tensor([3, 3], device=check.device)
    c0, s0, c1, s1 = math.cos(3), math.sin(3), math.cos(0.03), math.sin(0.03)
    expected = torch.tensor([[c0, 0.0, s0, 0.0], [0.0, c1, 0.0, s1]], device=check.device)
    check.close("apply_rope", x, positions, expected=expected)


@pytest.mark.task("rope")
def test_rope_position_zero_changes_nothing(check):
    x = check.randn(2, 4, 3, 8)
    check.close("apply_rope", x, torch.zeros(3, dtype=torch.long, device=check.device),
                expected=x.clone())


@pytest.mark.task("rope")
def test_rope_scores_depend_only_on_position_difference(check):
    q, k = check.randn(1, 5, 16), check.randn(1, 5, 16)
    positions = torch.arange(5, device=check.device)
    before = check.call("apply_rope", q, positions) @ check.call("apply_rope", k, positions).mT
    after = (check.call("apply_rope", q, positions + 11)
             @ check.call("apply_rope", k, positions + 11).mT)
    check.compare(after, before, what="q·k after shifting both positions by 11",
                  rtol=1e-4, atol=1e-4, section="§19")


@pytest.mark.task("rope")
def test_rope_float64_stays_float64(check):
    x = check.randn(4, 8, dtype=torch.float64)
    out = check.call("apply_rope", x, torch.arange(4, device=check.device))
    check.expect(out.dtype == torch.float64, "apply_rope must return x's dtype", "§19")


def rotated(x, positions, base=10000.0, scale=1.0):
    """Half-split RoPE with plain torch, in float64: dim j turns with dim j + D/2."""
    half = x.shape[-1] // 2
    freq = base ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])  # (D/2,)
    angle = (positions.double().cpu() / scale)[:, None] * freq  # (L, D/2)
    cos, sin = angle.cos().to(x.device), angle.sin().to(x.device)
    first, second = x.double()[..., :half], x.double()[..., half:]  # (..., L, D/2) each
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).to(x.dtype)


@pytest.mark.task("rope")
def test_rope_frequencies_with_another_base(check):
    expected = 500000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    check.close("rope_frequencies", 8, base=500000.0, expected=expected.float())


@pytest.mark.task("rope")
def test_rope_positions_with_an_offset_and_int32(check):
    x = check.randn(2, 3, 5, 8)
    positions = torch.arange(40, 45, dtype=torch.int32, device=check.device)
    check.close("apply_rope", x, positions, expected=rotated(x, positions))


@pytest.mark.task("rope")
def test_rope_base_and_interpolation_scale(check):
    x, positions = check.randn(3, 6, 16), torch.arange(0, 60, 10, device=check.device)
    check.close("apply_rope", x, positions, base=1000.0, expected=rotated(x, positions, base=1000.0))
    check.close("apply_rope", x, positions, scale=2.0, expected=rotated(x, positions, scale=2.0))


@pytest.mark.task("rope")
def test_rope_of_a_view(check):
    x = check.randn(2, 8, 4).transpose(-1, -2)  # (B, L, D) view
    positions = torch.arange(4, device=check.device)
    check.close("apply_rope", x, positions, expected=rotated(x, positions))


@pytest.mark.task("rope")
def test_rope_float16_at_large_positions(check):
    # p * freq near 3000 needs float32 angles: float16 is off by whole radians up there.
    x = check.randn(2, 3, 8, dtype=torch.float16)
    positions = torch.arange(3000, 3003, device=check.device)
    check.close("apply_rope", x, positions, expected=rotated(x, positions))


# ----------------------------------------------------------------------------- alibi


@pytest.mark.task("alibi")
def test_alibi_slopes_eight_heads(check):
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    check.close("alibi_slopes", 8, expected=expected)


@pytest.mark.task("alibi")
def test_alibi_bias_two_queries_four_keys(check):
    m = torch.tensor([2 ** -4, 2 ** -8])  # the slopes for 2 heads
    # Bottom-right aligned: the queries sit at positions 2 and 3 of the 4 keys.
    distance = torch.tensor([[2.0, 1.0, 0.0, -1.0], [3.0, 2.0, 1.0, 0.0]])
    check.close("alibi_bias", 2, 2, 4, expected=-m[:, None, None] * distance)


@pytest.mark.task("alibi")
def test_alibi_slopes_for_a_head_count_that_is_not_a_power_of_two(check):
    # 10 heads: the 8 slopes of 8 heads, then every other slope of 16 heads until there are 10.
    expected = torch.tensor([2.0 ** -(h + 1) for h in range(8)] + [2.0 ** -0.5, 2.0 ** -1.5])
    check.close("alibi_slopes", 10, expected=expected)
    check.close("alibi_slopes", 2, expected=torch.tensor([2.0 ** -4, 2.0 ** -8]))


@pytest.mark.task("alibi")
def test_alibi_bias_square_three_heads(check):
    m = torch.tensor([2.0 ** -4, 2.0 ** -8, 2.0 ** -2])  # 3 heads: the 2 slopes of 2 heads, then 4 heads' first
    i, j = torch.arange(4)[:, None], torch.arange(4)[None, :]
    check.close("alibi_bias", 3, 4, 4, expected=-m[:, None, None] * (i - j).float())
