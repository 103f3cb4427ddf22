"""Hidden tests of the bonus task flash_gqa: flash_attention with fewer kv heads (§25, §24).

Query head h reads kv head h // (H / H_KV), inside the kernel. The student
function is flash_attention (owned by flash_forward, whose forbidden APIs apply).
"""

import math

import pytest
import torch

pytestmark = pytest.mark.task("flash_gqa")

FLASH = "flash_attention"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if torch.cuda.is_available() else [])


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
    out, facts = check.call_with_facts(FLASH, q, k, v, causal=causal)
    check.compare(out, naive(q, k, v, causal), what=FLASH, section="§25",
                  diagnose_with=(FLASH, (q, k, v), {"causal": causal}))
    check.expect(facts.triton_launches >= 1, "flash_attention launched no Triton kernel", "§24")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_query_heads_per_kv_head(check, dtype, causal):
    q = check.randn(1, 4, 70, 32, dtype=dtype)
    k, v = check.randn(1, 2, 70, 32, dtype=dtype), check.randn(1, 2, 70, 32, dtype=dtype)
    judge(check, q, k, v, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_multi_query(check, causal):
    q = check.randn(2, 3, 33, 16)
    k, v = check.randn(2, 1, 33, 16), check.randn(2, 1, 33, 16)
    judge(check, q, k, v, causal)
