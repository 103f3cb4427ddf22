"""Hidden tests of task flash_forward: the student's Triton forward kernel (§24, §22–§23).

Graded by construction: every call is `launch_forward` of the course's contract
(assignments/assignment3/contract.py), which the grader runs in a worker holding only
the student's @triton.jit kernels and constants. It allocates the output itself (NaN
where the kernel writes nothing) and launches `_flash_fwd_kernel` with the contract's
arguments, so the output is the kernel's and nothing else's, and it needs no N × N
memory whatever the host code would have done (a kernel allocates nothing). The output
must match float64 attention element by element; a wrong kernel is diagnosed. On CPU
the kernels run in Triton's interpreter, so the shapes stay small; bfloat16 is only
tested on a GPU (the interpreter cannot run it). Sequence lengths 1, 17, 100, 257 are
not multiples of any block size.
"""

import math

import pytest
import torch

from grader.harness.device_caps import kernel_dtypes
from grader.harness.draws import last_key_raises_the_maximum

pytestmark = pytest.mark.task("flash_forward")

FLASH = "launch_forward"
DTYPES = kernel_dtypes()  # bfloat16 where the GPU computes it natively (capability 8.0+)
# float32 scores of inputs scaled ×10 reach ±300 before the exponential: allow for their rounding.
STRESS_TOLERANCE = {torch.float32: (1e-3, 1e-3)}


def naive(q, k, v, causal=False, sm_scale=None):
    """Attention in float64 with torch (the trusted side may use anything)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = torch.matmul(q.double(), k.double().transpose(-2, -1)) * scale  # [B, H, N, N]
    if causal:
        visible = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v.double()).to(q.dtype)  # [B, H, N, D]


def judge(check, q, k, v, causal=False, sm_scale=None, rtol=None, atol=None):
    kwargs = {"causal": causal} if sm_scale is None else {"causal": causal, "sm_scale": sm_scale}
    out = check.call(FLASH, q, k, v, **kwargs)
    check.compare(out, naive(q, k, v, causal, sm_scale), what="your _flash_fwd_kernel's output", rtol=rtol,
                  atol=atol, diagnose_with=(FLASH, (q, k, v), kwargs))


def inputs(check, b, h, n, d, dtype, scale=1.0):
    return (check.randn(b, h, n, d, dtype=dtype, scale=scale), check.randn(b, h, n, d, dtype=dtype, scale=scale),
            check.randn(b, h, n, d, dtype=dtype))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_token_and_a_short_tail(check, dtype, causal):
    # One token's output is its value, which a kernel that copies V also writes: the same test
    # asks for 17 tokens, a tail past every block size.
    judge(check, *inputs(check, 1, 2, 1, 16, dtype), causal=causal)
    judge(check, *inputs(check, 2, 2, 17, 32, dtype), causal=causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_blocks_large_scores(check, dtype, causal):
    # q and k scaled ×10: the running maximum jumps from block to block.
    tol = STRESS_TOLERANCE.get(dtype, (None, None))
    judge(check, *inputs(check, 1, 2, 100, 64, dtype, scale=10.0), causal=causal, rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_five_blocks_large_scores(check, dtype, causal):
    tol = STRESS_TOLERANCE.get(dtype, (None, None))
    judge(check, *inputs(check, 1, 1, 257, 16, dtype, scale=10.0), causal=causal, rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_head_dim_128(check, dtype, causal):
    q, k, v = inputs(check, 1, 2, 70, 128, dtype)
    last_key_raises_the_maximum(q, k)  # rows 64-69 reach a second block of keys: it must rescale them
    judge(check, q, k, v, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_multiple_of_the_blocks(check, dtype):
    judge(check, *inputs(check, 2, 1, 128, 32, dtype))


def test_explicit_sm_scale(check):
    judge(check, *inputs(check, 1, 2, 80, 32, torch.float32), sm_scale=0.3)


def test_non_contiguous_inputs(check):
    # [B, N, H, D] tensors seen as [B, H, N, D]: the strides are not the contiguous ones.
    q, k, v = (check.randn(1, 40, 2, 32).transpose(1, 2) for _ in range(3))
    judge(check, q, k, v, causal=True)
