"""Hidden tests of task flash_launcher: the student's own flash_attention, the host code
that launches `_flash_fwd_kernel` (§24).

flash_attention runs in the student's worker. It must return exactly what the student's
kernel writes for the same inputs: the grader launches `_flash_fwd_kernel` itself through
the contract's launch_forward, with the tile sizes and launch options flash_attention used
(read from its launches, a hint only: whatever they are, the bytes must come out equal),
and compares the two bit for bit. Host code that computes attention with torch, or
overwrites the kernel's result, returns other bytes; a host mistake (strides of a
contiguous copy, say) is compared with float64 attention and diagnosed. A wrong kernel
costs flash_forward, not this task. flash_attention must also refuse what the kernel
cannot compute.
"""

import math

import pytest
import torch

from grader.harness.device_caps import kernel_dtypes

pytestmark = pytest.mark.task("flash_launcher")

HOST = "flash_attention"
KERNEL = "launch_forward"
DTYPES = kernel_dtypes()  # bfloat16 where the GPU computes it natively (capability 8.0+)
SETTINGS = {"BLOCK_M": "BLOCK_M", "BLOCK_N": "BLOCK_N", "num_warps": "NUM_WARPS", "num_stages": "NUM_STAGES"}


def naive(q, k, v, causal=False, sm_scale=None):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = torch.matmul(q.double(), k.double().transpose(-2, -1)) * scale  # [B, H, N, N]
    if causal:
        visible = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v.double()).to(q.dtype)  # [B, H, N, D]


def judge(check, q, k, v, causal=False, sm_scale=None):
    kwargs = {"causal": causal} if sm_scale is None else {"causal": causal, "sm_scale": sm_scale}
    out, facts = check.call_with_facts(HOST, q, k, v, **kwargs)
    launches = [launch for launch in facts.launches if launch.get("kernel") == "_flash_fwd_kernel"]
    used = launches[-1].get("meta", {}) if launches else {}
    config = {setting: used[name] for name, setting in SETTINGS.items() if type(used.get(name)) is int}
    written = check.call(KERNEL, q, k, v, config=config, **kwargs)
    shown = ", ".join(f"{name} = {value}" for name, value in config.items()) or "the contract's defaults"
    check.returns_kernel_output(HOST, out, written, naive(q, k, v, causal, sm_scale), launched_with=shown,
                                diagnose_with=(HOST, (q, k, v), kwargs))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_returns_what_your_kernel_writes(check, dtype, causal):
    q, k, v = (check.randn(2, 2, 100, 32, dtype=dtype) for _ in range(3))
    judge(check, q, k, v, causal=causal)


def test_non_contiguous_inputs(check):
    # [B, N, H, D] tensors seen as [B, H, N, D]: pass the strides, not those of a contiguous copy.
    q, k, v = (check.randn(1, 40, 2, 32).transpose(1, 2) for _ in range(3))
    judge(check, q, k, v, causal=True)


def test_explicit_sm_scale(check):
    q, k, v = (check.randn(1, 2, 50, 16) for _ in range(3))
    judge(check, q, k, v, sm_scale=0.25)


# A function that always raises ValueError refuses everything: each refusal is asked for in the
# same test as a computation the kernel can do.
@pytest.mark.parametrize("head_dim", [24, 256])
def test_refuses_head_dims_the_kernel_cannot_take(check, head_dim):
    judge(check, *(check.randn(1, 1, 24, 64) for _ in range(3)))
    q, k, v = (check.randn(1, 1, 8, head_dim) for _ in range(3))
    check.raises(HOST, q, k, v, exception="ValueError",
                 because=f"head dim {head_dim}: the kernel's tiles need D in 16, 32, 64 or 128")


def test_refuses_keys_that_do_not_fit_the_queries(check):
    judge(check, *(check.randn(2, 1, 30, 16) for _ in range(3)), causal=True)
    q, k, v = check.randn(1, 2, 8, 32), check.randn(1, 2, 8, 16), check.randn(1, 2, 8, 16)
    check.raises(HOST, q, k, v, exception="ValueError", because="keys with another head dim than the queries")
