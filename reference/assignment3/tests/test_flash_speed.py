"""Hidden tests of task flash_speed (timing): the student's kernel against
course_kernels.flash_attention.attention, on the same device in the same run and in the
same mode (both compiled on a GPU, both in Triton's interpreter with
`--timing-device cpu`). What is timed is the student's `_flash_fwd_kernel`, launched
by the contract's launch_forward(timed=True) in the kernel worker (its outputs allocated as
the reference kernel allocates its own, without the NaN fill): never torch host code.

The timing protocol (grader.harness.timing) decides: fresh inputs for every call, each
call's own time (CUDA events on a GPU, the L2 cache flushed before each call), paired
rounds of the student's and the reference's blocks in alternating order until the
ratio is known to about 1%, every timed output checked by the grader. Points come
from the manifest's speed thresholds on the geometric mean of the paired ratios (a
tie with the reference scores as its speed). On a GPU the shapes are large
(float16); with `grade submit --timing-device cpu` a small shape is timed
through Triton's interpreter, and the report marks the points as CPU-timed.
Without a timing device every test is pending, never failed. A kernel must
first be correct on the timed shape to be timed at all.
"""

import pytest

from grader.harness.timing import TimingCase, inputs_for

pytestmark = pytest.mark.task("flash_speed")

FLASH = "launch_forward"
CASES = {  # id → ((B, H, N, D, causal) timed on a GPU, the same on the CPU)
    "long": ((4, 16, 4096, 64, False), (1, 1, 64, 16, False)),
    "long_causal_d128": ((4, 16, 4096, 128, True), (1, 1, 64, 16, True)),
}


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_speed_against_the_reference_kernel(check, case_id):
    device = check.context.timing_device
    if device is None:
        check.pending("not timed: no CUDA device")
    from course_kernels.flash_attention import attention, attention_flops

    gpu_case, cpu_case = CASES[case_id]
    batch, heads, n, head_dim, causal = gpu_case if device == "cuda" else cpu_case
    shape = (batch, heads, n, head_dim)
    case = TimingCase(shapes=(shape, shape, shape), dtype="float16" if device == "cuda" else "float32",
                      kwargs={"causal": causal}, flops=attention_flops(batch, heads, n, head_dim, causal),
                      student_kwargs={"timed": True})  # outputs allocated as the reference's are: no NaN fill
    q, k, v = inputs_for(case, device, seed=check.seed)
    out = check.call(FLASH, q, k, v, causal=causal)
    check.compare(out, attention(q, k, v, causal), what="your _flash_fwd_kernel's output", section="§24")
    check.time_against(FLASH, attention, case)
