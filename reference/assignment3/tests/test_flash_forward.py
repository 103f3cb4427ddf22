"""Hidden tests of task flash_forward: the student's Triton forward kernel (§24, §22–§23).

Every call goes through `judge`: the output must match float64 attention
element by element, at least one Triton kernel must have been launched, and no
torch call may have produced a tensor as large as the B·H·N×N score matrix (the
check object also fails any call that changes its inputs). The comparison comes
first, so a wrong kernel is diagnosed. On CPU the kernels run in Triton's interpreter, so
the shapes stay small; bfloat16 is only tested on a GPU (the interpreter cannot
run it). Sequence lengths 1, 17, 100, 257 are not multiples of any block size.
"""

import math

import pytest
import torch

pytestmark = pytest.mark.task("flash_forward")

FLASH = "flash_attention"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if torch.cuda.is_available() else [])
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
    expected = naive(q, k, v, causal, sm_scale)
    out, facts = check.call_with_facts(FLASH, q, k, v, **kwargs)
    check.compare(out, expected, what=FLASH, rtol=rtol, atol=atol, diagnose_with=(FLASH, (q, k, v), kwargs))
    check.expect(facts.triton_launches >= 1,
                 "flash_attention returned the right numbers but launched no Triton kernel: the result "
                 "must come from your @triton.jit kernel", "§24")
    B, H, N, D = q.shape
    if N * N > 4 * (N + 128) * D:  # only where the score matrix dwarfs every legitimate buffer
        check.expect(facts.largest_tensor_numel < B * H * N * N,
                     f"flash_attention created a tensor with {facts.largest_tensor_numel:,} elements, as "
                     f"many as the B·H·N×N score matrix; FlashAttention never stores it", "§24")
    return facts


def inputs(check, b, h, n, d, dtype, scale=1.0):
    return (check.randn(b, h, n, d, dtype=dtype, scale=scale), check.randn(b, h, n, d, dtype=dtype, scale=scale),
            check.randn(b, h, n, d, dtype=dtype))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_token(check, dtype, causal):
    judge(check, *inputs(check, 1, 2, 1, 16, dtype), causal=causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_short_sequence_with_a_tail(check, dtype, causal):
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
    judge(check, *inputs(check, 1, 2, 70, 128, dtype), causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_multiple_of_the_blocks(check, dtype):
    judge(check, *inputs(check, 2, 1, 128, 32, dtype))


def test_explicit_sm_scale(check):
    judge(check, *inputs(check, 1, 2, 80, 32, torch.float32), sm_scale=0.3)


def test_non_contiguous_inputs(check):
    # [B, N, H, D] tensors seen as [B, H, N, D]: the strides are not the contiguous ones.
    q, k, v = (check.randn(1, 40, 2, 32).transpose(1, 2) for _ in range(3))
    judge(check, q, k, v, causal=True)


def test_memory_grows_linearly(check):
    # The N × N score matrix must never exist: N² elements here would dwarf everything else.
    n = 16384 if check.device == "cuda" else 1024
    q, k, v = inputs(check, 1, 1, n, 16, torch.float32)
    expected = naive(q, k, v, True)
    out, facts = check.call_with_facts(FLASH, q, k, v, causal=True, fresh_worker=True)
    # (the N²·D emulations of the mutants would not fit a GPU at N = 16384: diagnose on CPU only)
    diagnose_with = (FLASH, (q, k, v), {"causal": True}) if n <= 1024 else None
    check.compare(out, expected, what=FLASH, diagnose_with=diagnose_with)
    check.expect(facts.triton_launches >= 1, "flash_attention launched no Triton kernel", "§24")
    check.expect(facts.largest_tensor_numel < n * n // 8,
                 f"with N = {n} your call created a tensor with {facts.largest_tensor_numel:,} elements "
                 f"(N² = {n * n:,}): FlashAttention keeps only BLOCK_M × BLOCK_N scores at a time", "§24")
    if facts.memory_kind == "cuda":  # exact on a GPU; the CPU's resident-set size is too coarse here
        check.expect(facts.peak_memory_bytes < n * n,
                     f"with N = {n} your call allocated {facts.peak_memory_bytes / 2**20:.0f} MiB on the GPU, "
                     f"a quarter of an N × N float32 matrix or more", "§24")
