"""Hidden tests of the bonus task flash_gqa: flash_attention with fewer kv heads (§25, §24).

Query head h reads kv head h // (H / H_KV), inside the kernel: graded by construction,
through the contract's launch_forward with fewer kv heads (N_REP = H // H_KV), which
launches the student's `_flash_fwd_kernel` itself.
"""

import math

import pytest
import torch

from grader.harness.device_caps import kernel_dtypes
from grader.harness.draws import last_key_raises_the_maximum

pytestmark = pytest.mark.task("flash_gqa")

FLASH = "launch_forward"
DTYPES = kernel_dtypes()  # bfloat16 where the GPU computes it natively (capability 8.0+)


def naive(q, k, v, causal=False):
    n_rep = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(n_rep, dim=1)  # [B, H, N, D]
    v = v.double().repeat_interleave(n_rep, dim=1)
    scores = torch.matmul(q.double(), k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v).to(q.dtype)


def judge(check, q, k, v, causal):
    out = check.call(FLASH, q, k, v, causal=causal)
    check.compare(out, naive(q, k, v, causal), what="your _flash_fwd_kernel's output with N_REP > 1",
                  section="§25", diagnose_with=(FLASH, (q, k, v), {"causal": causal}))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_query_heads_per_kv_head(check, dtype, causal):
    q = check.randn(1, 4, 70, 32, dtype=dtype)
    k, v = check.randn(1, 2, 70, 32, dtype=dtype), check.randn(1, 2, 70, 32, dtype=dtype)
    last_key_raises_the_maximum(q, k)  # rows 64-69 reach a second block of keys: it must rescale them
    judge(check, q, k, v, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_multi_query(check, causal):
    q = check.randn(2, 3, 33, 16)
    k, v = check.randn(2, 1, 33, 16), check.randn(2, 1, 33, 16)
    judge(check, q, k, v, causal)
