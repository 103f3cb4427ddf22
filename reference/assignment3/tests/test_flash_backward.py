"""Hidden tests of the bonus task flash_backward: the student's Triton backward kernels (§24).

Graded by construction: `launch_backward` of the course's contract
(assignments/assignment3/contract.py) computes the forward's statistics itself
(LSE and Delta, in the forward kernel's base-2 convention), allocates dq, dk and dv,
and launches the student's `_flash_bwd_dkdv_kernel` and `_flash_bwd_dq_kernel` in the
worker that holds only the student's kernels. dq, dk, dv are compared with autograd of
float64 attention, so each backward kernel is judged on its own (a forward kernel's
mistake costs flash_forward, not this task).
"""

import math

import pytest
import torch

from grader.harness.device_caps import native_bfloat16

pytestmark = pytest.mark.task("flash_backward")

GRADS = "launch_backward"


def expected_grads(q, k, v, grad_out, causal):
    n_rep = q.shape[1] // k.shape[1]
    q, k, v = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    with torch.enable_grad():
        keys, values = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # [B, H, N, D]
        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # [B, H, N, N]
        if causal:
            n = q.shape[-2]
            scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=q.device).tril(), float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), values)
        return torch.autograd.grad(out, (q, k, v), grad_out.double())


def judge(check, b, h, h_kv, n, d, dtype, causal, tolerance):
    q, grad_out = check.randn(b, h, n, d, dtype=dtype), check.randn(b, h, n, d, dtype=dtype)
    k, v = check.randn(b, h_kv, n, d, dtype=dtype), check.randn(b, h_kv, n, d, dtype=dtype)
    grads = check.call(GRADS, q, k, v, grad_out, causal=causal)
    expected = tuple(g.to(dtype) for g in expected_grads(q, k, v, grad_out, causal))
    scale = max(float(g.abs().max()) for g in expected)
    check.compare(grads, expected, what="the gradients (dq, dk, dv) of your backward kernels", rtol=tolerance,
                  atol=tolerance * scale, section="§24", diagnose_with=(GRADS, (q, k, v, grad_out), {"causal": causal}))


CASES = [  # (B, H, H_KV, N, D, dtype, causal, relative tolerance)
    (1, 2, 2, 40, 16, torch.float32, False, 1e-4),
    (1, 2, 2, 40, 16, torch.float32, True, 1e-4),
    (1, 1, 1, 100, 64, torch.float32, False, 1e-4),
    (1, 1, 1, 100, 64, torch.float32, True, 1e-4),
    (2, 1, 1, 33, 32, torch.float16, True, 2e-2),
    (1, 4, 2, 40, 16, torch.float32, True, 1e-4),  # two query heads per kv head: dk, dv sum over the group
] + ([(1, 2, 2, 130, 64, torch.bfloat16, False, 5e-2)] if native_bfloat16() else [])


@pytest.mark.parametrize("b, h, h_kv, n, d, dtype, causal, tolerance", CASES)
def test_gradients(check, b, h, h_kv, n, d, dtype, causal, tolerance):
    judge(check, b, h, h_kv, n, d, dtype, causal, tolerance)
