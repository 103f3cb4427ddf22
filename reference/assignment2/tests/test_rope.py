"""Hidden tests, task rope: rope_frequencies and apply_rope (§19, §21)."""

import pytest
import torch

from grader.core.tolerances import tolerance_for


def arange(check, n, offset=0, step=1, dtype=torch.long):
    return (torch.arange(n, device=check.device) * step + offset).to(dtype)


@pytest.mark.task("rope")
def test_frequencies_default_base(check):
    check.close("rope_frequencies", 16)


@pytest.mark.task("rope")
def test_frequencies_large_base(check):
    check.close("rope_frequencies", 128, base=500000.0)


@pytest.mark.task("rope")
def test_position_zero_is_the_identity(check):
    # Position 0 rotates nothing, which handing x back does too: the same test also asks for
    # positions 0 and 1 mixed, where only a real rotation is right.
    x = check.randn(2, 3, 4, 8)
    check.close("apply_rope", x, torch.zeros(4, dtype=torch.long, device=check.device),
                expected=x.clone())
    check.close("apply_rope", x, torch.tensor([0, 1, 0, 1], device=check.device))


@pytest.mark.task("rope")
def test_consecutive_positions(check):
    check.close("apply_rope", check.randn(2, 4, 6, 16), arange(check, 6))


@pytest.mark.task("rope")
def test_positions_with_an_offset(check):
    check.close("apply_rope", check.randn(1, 2, 5, 32), arange(check, 5, offset=37))


@pytest.mark.task("rope")
def test_base_argument(check):
    check.close("apply_rope", check.randn(2, 8, 16), arange(check, 8, step=7), base=500000.0)


@pytest.mark.task("rope")
def test_linear_interpolation_scale(check):
    check.close("apply_rope", check.randn(2, 2, 8, 16), arange(check, 8, step=3), scale=4.0)


@pytest.mark.task("rope")
def test_large_base_with_interpolation(check):
    x = check.randn(2, 6, 32)
    check.close("apply_rope", x, arange(check, 6, offset=200, step=5), base=500000.0, scale=8.0)


@pytest.mark.task("rope")
def test_scores_depend_only_on_position_difference(check):
    q, k = check.randn(2, 8, 16), check.randn(2, 8, 16)
    positions = check.randint(0, 40, (8,)).to(check.device)
    scores = []
    for shift in (0, 29):
        q_rot = check.call("apply_rope", q, positions + shift)
        k_rot = check.call("apply_rope", k, positions + shift)
        scores.append(q_rot @ k_rot.transpose(-2, -1))  # (B, L, L)
    check.compare(scores[1], scores[0], what="q·k after shifting both positions by 29",
                  rtol=1e-4, atol=1e-4, section="§19")


@pytest.mark.task("rope")
def test_rotation_preserves_norms(check):
    x = check.randn(3, 10, 32)
    out = check.call("apply_rope", x, check.randint(0, 100, (10,)).to(check.device))
    check.expect(isinstance(out, torch.Tensor) and out.shape == x.shape,
                 "apply_rope must return a tensor shaped like x", "§19")
    check.compare(out.norm(dim=-1), x.norm(dim=-1), what="length of each rotated vector",
                  section="§19")


@pytest.mark.task("rope")
def test_float64_without_batch_dims(check):
    x = check.randn(6, 16, dtype=torch.float64)
    # The contract asks for angles in float32 or better: float32 angles (HF, GPT-NeoX) are right,
    # so a float64 result is held to float32's tolerance here.
    rtol, atol = tolerance_for(torch.float32)
    check.close("apply_rope", x, arange(check, 6, offset=3), rtol=rtol, atol=atol)


@pytest.mark.task("rope")
def test_float16_at_large_positions(check):
    x = check.randn(1, 2, 4, 16, dtype=torch.float16)
    check.close("apply_rope", x, arange(check, 4, offset=2000))


@pytest.mark.task("rope")
def test_view_input_and_int32_positions(check):
    x = check.randn(2, 16, 5).transpose(-1, -2)  # (B, L, D) view
    check.close("apply_rope", x, arange(check, 5, offset=1, dtype=torch.int32))


@pytest.mark.task("rope")
def test_single_position(check):
    check.close("apply_rope", check.randn(2, 3, 1, 8), arange(check, 1, offset=5))
