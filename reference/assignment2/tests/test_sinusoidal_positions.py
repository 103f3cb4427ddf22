"""Hidden tests, task sinusoidal_positions (§18)."""

import pytest
import torch


@pytest.mark.task("sinusoidal_positions")
def test_position_zero_is_zero_one_alternating(check):
    expected = torch.tensor([[0.0, 1.0] * 5])  # sin(0), cos(0), ...
    check.close("sinusoidal_positions", 1, 10, expected=expected)


@pytest.mark.task("sinusoidal_positions")
def test_small_table(check):
    check.close("sinusoidal_positions", 50, 16)


@pytest.mark.task("sinusoidal_positions")
def test_larger_table(check):
    check.close("sinusoidal_positions", 128, 64)


@pytest.mark.task("sinusoidal_positions")
def test_width_not_a_multiple_of_four(check):
    check.close("sinusoidal_positions", 7, 10)


@pytest.mark.task("sinusoidal_positions")
def test_each_pair_lies_on_the_unit_circle(check):
    table = check.call("sinusoidal_positions", 40, 12)
    check.expect(isinstance(table, torch.Tensor) and table.shape == (40, 12),
                 "sinusoidal_positions(40, 12) must return a [40, 12] tensor", "§18")
    radius = table[:, 0::2] ** 2 + table[:, 1::2] ** 2  # sin² + cos² of one angle
    check.compare(radius, torch.ones_like(radius), what="sin² + cos² of each dimension pair",
                  section="§18")
