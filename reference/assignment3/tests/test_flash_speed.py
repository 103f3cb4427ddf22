"""Hidden tests of task flash_speed (timing, GPU only): the student's kernel against
kernels.flash_attention.attention, on the same GPU in the same run.

Points come from the manifest's speed thresholds on the ratio of median times
(grader.timing.judge_speed). Without CUDA every test is pending, never failed.
A kernel must first be correct on the timed inputs to be timed at all.
"""

import pytest
import torch

pytestmark = pytest.mark.task("flash_speed")

FLASH = "flash_attention"
CASES = [  # (B, H, N, D, causal), float16
    (4, 16, 4096, 64, False),
    (4, 16, 4096, 128, True),
]


@pytest.mark.parametrize("batch, heads, n, head_dim, causal", CASES)
def test_speed_against_the_reference_kernel(check, batch, heads, n, head_dim, causal):
    if check.device != "cuda":
        check.pending("not timed: no CUDA device")
    from grader.timing import judge_speed
    from kernels.flash_attention import attention, attention_flops

    input_sets = []
    for _ in range(3):
        q, k, v = (check.randn(batch, heads, n, head_dim, dtype=torch.float16) for _ in range(3))
        input_sets.append(((q, k, v), {"causal": causal}))
    (q, k, v), kwargs = input_sets[0]
    out = check.call(FLASH, q, k, v, **kwargs)
    check.compare(out, attention(q, k, v, causal), what=FLASH, section="§24")
    judge_speed(check, FLASH, attention, input_sets, attention_flops(batch, heads, n, head_dim, causal))
