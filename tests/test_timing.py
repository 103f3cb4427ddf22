"""The timing protocol on the CPU: fresh inputs, the trusted clock, checked outputs, one timing per device.

The end-to-end defences (a patched timer, a memoising kernel, replayed outputs,
graded through the sandbox at both levels) are in tests/test_attacks.py; here
the pieces are tested one by one with an in-process runner.
"""

from __future__ import annotations

import multiprocessing
import random
import time

import pytest
import torch

from grader.harness.device_lock import device_lock
from grader.harness.runners import InProcessRunner
from grader.harness.timing import TimingCase, _checksum_bound, compare_speed, summarize
from grader.sandbox.timer import ALIGN, PoolSpec, inputs_at, make_pool, pool_size, random_offsets, run_block

SHAPE = (64, 32)
CASE = TimingCase(shapes=(SHAPE, SHAPE), dtype="float32", kwargs={})


def add(a, b):
    return a + b


def test_summary_statistics():
    summary = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert summary.median_ms == 3.0 and summary.min_ms == 1.0 and summary.n == 5
    assert summary.iqr_ms == pytest.approx(3.0)
    with pytest.raises(ValueError):
        summarize([])


def test_pool_is_the_same_in_every_process_and_offsets_are_aligned_and_fresh():
    spec = PoolSpec(seed=11, numel=pool_size(CASE.shapes), dtype="float32", device="cpu")
    assert torch.equal(make_pool(spec), make_pool(spec))
    plan = random_offsets(CASE.shapes, spec.numel, 50, random.Random(3))
    assert all(offset % ALIGN == 0 and offset + 64 * 32 <= spec.numel for call in plan for offset in call)
    assert len({tuple(call) for call in plan}) > 45  # no two calls share their inputs, bar rare collisions
    a, b = inputs_at(make_pool(spec), CASE.shapes, plan[0])
    assert a.shape == SHAPE and a.is_contiguous() and a.data_ptr() != b.data_ptr()


def test_block_keeps_every_output_and_checksums_it():
    spec = PoolSpec(seed=5, numel=pool_size(CASE.shapes), dtype="float32", device="cpu")
    pool = make_pool(spec)
    plan = random_offsets(CASE.shapes, spec.numel, 4, random.Random(1))
    block = run_block(add, pool, CASE.shapes, plan, {}, projection_seed=9, device="cpu")
    assert len(block.outputs) == 4 and len(block.checksums) == 4 and len(block.event_ms) == 4
    again = run_block(add, pool, CASE.shapes, plan, {}, projection_seed=9, device="cpu")
    assert block.checksums == again.checksums  # same inputs and vector: same numbers
    for output, offsets in zip(block.outputs, plan, strict=True):
        torch.testing.assert_close(output, add(*inputs_at(pool, CASE.shapes, offsets)))


def test_checksum_bound_passes_rounding_and_fails_garbage():
    torch.manual_seed(0)
    expected = torch.randn(4096)
    vector = torch.randn(4096, dtype=torch.float64)
    bound = _checksum_bound(expected, torch.float32, expected.numel())
    rounding = expected * (1 + 5e-5 * torch.randn(4096))  # within rtol=1e-4
    garbage = torch.randn(4096)
    assert abs(float((rounding.double() - expected.double()) @ vector)) <= bound
    assert abs(float((garbage.double() - expected.double()) @ vector)) > bound


def runner_for(tmp_path, source: str) -> InProcessRunner:
    (tmp_path / "student.py").write_text(source)
    return InProcessRunner(tmp_path, ("student.py",))


def test_honest_kernel_is_verified_and_slow_one_costs_its_time(tmp_path):
    honest = runner_for(tmp_path, "def add(a, b):\n    return a + b\n")
    result = compare_speed(honest, "add", add, CASE, device="cpu", rounds=2, seed=1)
    assert result.verified and result.problems == () and result.device == "cpu"
    slow = runner_for(tmp_path, "import time\ndef add(a, b):\n    time.sleep(0.004)\n    return a + b\n")
    result = compare_speed(slow, "add", add, CASE, device="cpu", rounds=2, seed=1)
    assert result.verified and result.student.median_ms >= 4.0 and result.ratio > 2.0
    assert result.student.n == 2 and result.reference.n == 2


def test_a_patched_timer_in_the_student_changes_nothing(tmp_path):
    source = ("import time\n_sleep = time.sleep\n"
              "def add(a, b):\n    time.perf_counter = lambda: 0.0\n    _sleep(0.004)\n    return a + b\n")
    patched = runner_for(tmp_path, source)
    real_clock = time.perf_counter
    try:
        result = compare_speed(patched, "add", add, CASE, device="cpu", rounds=2, seed=1, clock=real_clock)
    finally:
        time.perf_counter = real_clock  # in-process, the student's patch reached this process
    assert result.student.median_ms >= 4.0  # the trusted clock saw every millisecond


def test_memoised_or_replayed_outputs_are_caught(tmp_path):
    memo = runner_for(tmp_path, "_c = []\ndef add(a, b):\n    if not _c:\n        _c.append(a + b)\n    return _c[0]\n")
    result = compare_speed(memo, "add", add, CASE, device="cpu", rounds=1, seed=2)
    assert not result.verified and "does not match the reference" in result.problems[0]
    replay = runner_for(tmp_path, "_last = []\n_n = [0]\ndef add(a, b):\n    _n[0] += 1\n"
                                  "    if _n[0] % 2 == 0 and _last:\n        return _last[0]\n"
                                  "    _last[:] = [a + b]\n    return _last[0]\n")
    result = compare_speed(replay, "add", add, CASE, device="cpu", rounds=1, seed=2)
    assert not result.verified


def _hold(path: str, queue) -> None:
    with device_lock("cpu"):
        queue.put(("in", time.monotonic()))
        time.sleep(0.3)
        queue.put(("out", time.monotonic()))


@pytest.mark.slow
def test_one_timing_per_device_at_a_time():
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_hold, args=("cpu", queue)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=600)
    events = sorted((queue.get(timeout=120) for _ in range(4)), key=lambda e: e[1])
    assert [kind for kind, _ in events] == ["in", "out", "in", "out"]  # never two holders at once
