"""Comparison tolerances, one place, per dtype.

float16/bfloat16 allow for rounding of every intermediate; float64 demands
near-exact agreement so that a subtly different formula cannot hide.
"""

from __future__ import annotations

import torch

# dtype → (rtol, atol)
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}


def tolerance_for(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing outputs of `dtype`; exact for integers and bools."""
    return TOLERANCES.get(dtype, (0.0, 0.0))
