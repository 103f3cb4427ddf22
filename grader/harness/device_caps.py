"""What the grading GPU can run, asked of the device rather than assumed from `cuda.is_available()`.

bfloat16 tensor-core products need compute capability 8.0 (Ampere) or newer; Triton refuses or
miscompiles them below, so a bfloat16 test on such a card would fail every submission, the
reference's included. Hidden tests read their dtypes from here.
"""

from __future__ import annotations

import torch

BF16_CAPABILITY = (8, 0)


def native_bfloat16(device: int | None = None) -> bool:
    """Whether a CUDA device is present and computes bfloat16 natively (capability ≥ 8.0)."""
    if not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(device) >= BF16_CAPABILITY


def kernel_dtypes() -> list[torch.dtype]:
    """The dtypes a Triton kernel test runs here: float32 and float16 everywhere (Triton's
    interpreter included), bfloat16 where the GPU computes it natively."""
    return [torch.float32, torch.float16] + ([torch.bfloat16] if native_bfloat16() else [])
