"""Hidden test of task flash_forward: what the kernel does as N grows, counted on the CPU (§24).

The grader launches the student's kernel itself (contract.launch_forward) at N = 40, 100
and 200, causal and not, and checks each output against float64 attention. Under Triton's
interpreter the kernel worker also counts what each launch did (key tiles per program,
multiply-adds, the widest tile, rescale factors, elements outside every tensor:
grader.sandbox.kernel_counts); grader.harness.kernel_behaviour reads misconceptions from
them (a causal kernel that visits tiles the mask hides, a whole row block of scores held at
once, a missing rescale). Those findings are feedback shown in the report with the counts:
the outputs alone decide this test. On a GPU the kernel is compiled and nothing is counted.
"""

import math

import pytest
import torch

from grader.harness.differences import outputs_match
from grader.harness.kernel_behaviour import Probe, behaviour, output_written

pytestmark = pytest.mark.task("flash_forward")

FLASH = "launch_forward"
KERNEL = "_flash_fwd_kernel"
# Not multiples of 16, and each tells a 16-key tile from a 64-key one (a tail bug is diagnosed at its
# size); 200 spans four 64-row blocks, enough to see which key tiles a causal program skips.
SIZES = (40, 100, 200)
HEAD_DIM = 16


def naive(q, k, v, causal=False):
    """Attention in float64 (the trusted side may use anything)."""
    n = q.shape[-2]
    scores = torch.matmul(q.double(), k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])  # [B, H, N, N]
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v.double()).to(q.dtype)  # [B, H, N, D]


def test_what_the_kernel_does_as_n_grows(check):
    probes, judged = [], []
    for n in SIZES:
        for causal in (False, True):
            q, k, v = (check.randn(1, 1, n, HEAD_DIM) for _ in range(3))
            out, facts = check.call_with_facts(FLASH, q, k, v, causal=causal)
            expected = naive(q, k, v, causal)
            launch = next((c for c in facts.kernel_counts if c.get("kernel") == KERNEL), {})
            probes.append(Probe(n, n, HEAD_DIM, 1, causal, launch, outputs_match(out, expected), output_written(out)))
            judged.append((out, expected, (q, k, v), {"causal": causal}))
    check.record["behaviour"] = behaviour(probes)
    for out, expected, args, kwargs in judged:
        check.compare(out, expected, what="your _flash_fwd_kernel's output", diagnose_with=(FLASH, args, kwargs))
