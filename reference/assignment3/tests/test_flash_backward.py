"""Hidden tests of the bonus task flash_backward: gradients through flash_attention (§24).

They call the given helper flash_attention_grads(q, k, v, grad_out, causal), which
differentiates the student's launcher in the sandbox, and compare dq, dk, dv with
autograd of float64 attention. The backward must launch Triton kernels of its own
(at least one more launch than the forward).
"""

import math

import pytest
import torch

pytestmark = pytest.mark.task("flash_backward")

GRADS = "flash_attention_grads"


def expected_grads(q, k, v, grad_out, causal):
    q, k, v = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # [B, H, N, N]
        if causal:
            n = q.shape[-2]
            scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=q.device).tril(), float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return torch.autograd.grad(out, (q, k, v), grad_out.double())


def judge(check, b, h, n, d, dtype, causal, tolerance):
    q, k, v, grad_out = (check.randn(b, h, n, d, dtype=dtype) for _ in range(4))
    grads, facts = check.call_with_facts(GRADS, q, k, v, grad_out, causal=causal)
    expected = tuple(g.to(dtype) for g in expected_grads(q, k, v, grad_out, causal))
    scale = max(float(g.abs().max()) for g in expected)
    check.compare(grads, expected, what="the gradients (dq, dk, dv)", rtol=tolerance,
                  atol=tolerance * scale, section="§24")
    check.expect(facts.triton_launches >= 2,
                 "the gradients are right, but the backward pass launched no Triton kernel of its own", "§24")


CASES = [  # (B, H, N, D, dtype, causal, relative tolerance)
    (1, 2, 40, 16, torch.float32, False, 1e-4),
    (1, 2, 40, 16, torch.float32, True, 1e-4),
    (1, 1, 100, 64, torch.float32, False, 1e-4),
    (1, 1, 100, 64, torch.float32, True, 1e-4),
    (2, 1, 33, 32, torch.float16, True, 2e-2),
] + ([(1, 2, 130, 64, torch.bfloat16, False, 5e-2)] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("b, h, n, d, dtype, causal, tolerance", CASES)
def test_gradients(check, b, h, n, d, dtype, causal, tolerance):
    judge(check, b, h, n, d, dtype, causal, tolerance)
