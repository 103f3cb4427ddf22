"""The timing protocol on the CPU: fresh inputs, the trusted clock, checked outputs, one job per device.

The end-to-end defences (a patched timer, a memoising kernel, replayed outputs,
graded through the sandbox at both levels) are in tests/test_attacks.py; here
the pieces are tested one by one with an in-process runner, and the statistics
(stop rule, pairing, tie) with a stand-in clock and stand-in times.
"""

from __future__ import annotations

import fcntl
import math
import multiprocessing
import os
import random
import statistics
import sys
import time

import pytest
import torch

from grader.harness.device_lock import device_lock, held_here, job_device_lock, lock_path
from grader.harness.runners import InProcessRunner
from grader.harness.timing import (
    Protocol,
    TimingCase,
    _checksum_bound,
    compare_speed,
    log_ratio_interval,
    run_rounds,
    sample_spans,
    summarize,
    take_spans,
    verdict,
)
from grader.sandbox.timer import ALIGN, PoolSpec, inputs_at, make_pool, pool_size, random_offsets, run_block

SHAPE = (64, 32)
CASE = TimingCase(shapes=(SHAPE, SHAPE), dtype="float32", kwargs={})
TWO = Protocol(min_rounds=2, max_rounds=2)  # two timed rounds: the fewest with a spread


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
    result = compare_speed(honest, "add", add, CASE, device="cpu", protocol=TWO, seed=1)
    assert result.verified and result.problems == () and result.device == "cpu"
    slow = runner_for(tmp_path, "import time\ndef add(a, b):\n    time.sleep(0.004)\n    return a + b\n")
    result = compare_speed(slow, "add", add, CASE, device="cpu", protocol=TWO, seed=1)
    assert result.verified and result.student.median_ms >= 4.0 and result.ratio > 2.0
    assert result.student.n == 2 and result.reference.n == 2


def test_the_students_own_keywords_reach_the_student_only(tmp_path):
    """A launcher's timed=True (its outputs allocated as the reference's are) goes to the student's
    side; the reference, which has no such keyword, never sees it."""
    student = runner_for(tmp_path, "def add(a, b, timed=False):\n    assert timed\n    return a + b\n")
    case = TimingCase(shapes=(SHAPE, SHAPE), dtype="float32", kwargs={}, student_kwargs={"timed": True})
    result = compare_speed(student, "add", add, case, device="cpu", protocol=TWO, seed=1)
    assert result.verified and result.problems == ()


def test_the_timed_launch_of_assignment3_computes_what_the_checked_one_does(monkeypatch):
    """contract.launch_forward(timed=True) skips only the NaN fill: the same output, bit for bit, from
    the reference solution's kernel (Triton's interpreter on the CPU)."""
    pytest.importorskip("triton")
    from content_harness import load_file

    from tests.conftest import ROOT

    monkeypatch.setitem(sys.modules, "flash", load_file(ROOT / "reference" / "assignment3" / "flash.py", "flash"))
    contract = load_file(ROOT / "assignments" / "assignment3" / "contract.py", "contract")
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=generator) for _ in range(3))  # [B, H, N, D] each
    checked = contract.launch_forward(q, k, v, causal=True)
    timed = contract.launch_forward(q, k, v, causal=True, timed=True)
    assert torch.equal(checked, timed) and not torch.isnan(timed).any()


def test_a_task_a_finding_already_zeroes_is_not_timed(tmp_path):
    """No device time for a kernel that cannot earn a speed point: the timing test is pending, saying why,
    and nothing is run (the runner would fail the test if it were asked)."""
    from grader.harness.testing import Check, GradingContext, Pending

    class Refusing:
        def time_block(self, *args):
            raise AssertionError("timed a task that earns nothing")

    context = GradingContext(runner=Refusing(), manifest=None, reference={}, timing_device="cpu",
                             zeroed_tasks=frozenset({"speed"}))
    with pytest.raises(Pending, match="not timed: a finding of the static check already gives this task no"):
        Check(context, "test_speed", "speed").time_against("add", add, CASE)
    with pytest.raises(AssertionError, match="timed a task that earns nothing"):  # another task is timed
        Check(context, "test_other", "other").time_against("add", add, CASE)


def test_a_patched_timer_in_the_student_changes_nothing(tmp_path):
    source = ("import time\n_sleep = time.sleep\n"
              "def add(a, b):\n    time.perf_counter = lambda: 0.0\n    _sleep(0.004)\n    return a + b\n")
    patched = runner_for(tmp_path, source)
    real_clock = time.perf_counter
    try:
        result = compare_speed(patched, "add", add, CASE, device="cpu", protocol=TWO, seed=1,
                               clock=real_clock)
    finally:
        time.perf_counter = real_clock  # in-process, the student's patch reached this process
    assert result.student.median_ms >= 4.0  # the trusted clock saw every millisecond


def test_memoised_or_replayed_outputs_are_caught(tmp_path):
    memo = runner_for(tmp_path, "_c = []\ndef add(a, b):\n    if not _c:\n        _c.append(a + b)\n    return _c[0]\n")
    result = compare_speed(memo, "add", add, CASE, device="cpu", protocol=TWO, seed=2)
    assert not result.verified and "does not match the reference" in result.problems[0]
    replay = runner_for(tmp_path, "_last = []\n_n = [0]\ndef add(a, b):\n    _n[0] += 1\n"
                                  "    if _n[0] % 2 == 0 and _last:\n        return _last[0]\n"
                                  "    _last[:] = [a + b]\n    return _last[0]\n")
    result = compare_speed(replay, "add", add, CASE, device="cpu", protocol=TWO, seed=2)
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


# ------------------------------------------------------------ the protocol's statistics, stand-in times

class StandInClock:
    """A clock that advances `step` seconds each time it is read."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_stop_rule_stops_on_a_small_spread_and_at_the_caps():
    steady = run_rounds(lambda i, first: (2.0 + 1e-4 * (i % 2), 1.0), Protocol(min_rounds=3, max_rounds=40),
                        StandInClock(0.001))
    assert steady.stopped_by == "spread" and len(steady.student_ms) == 3  # the minimum, no more
    noise = random.Random(0)
    noisy = lambda i, first: (2.0 * (1 + 0.3 * noise.random()), 1.0 * (1 + 0.3 * noise.random()))
    capped = run_rounds(noisy, Protocol(min_rounds=3, max_rounds=12), StandInClock(0.001))
    assert capped.stopped_by == "rounds" and len(capped.student_ms) == 12
    timed_out = run_rounds(noisy, Protocol(min_rounds=3, max_rounds=40, max_seconds=5.0), StandInClock(1.0))
    assert timed_out.stopped_by == "time" and 2 <= len(timed_out.student_ms) < 40


def test_stop_rule_waits_for_one_percent():
    """Each side alone is steady, but their pairing is not yet: the rounds go on until the ratio's
    standard error is under 1% too (a spread of 4% in the ratio needs about 16 rounds for that)."""
    noise = random.Random(1)
    rounds = run_rounds(lambda i, first: (1.0 + 0.04 * noise.gauss(0, 1), 1.0), Protocol(max_rounds=200),
                        StandInClock(0.0))
    assert rounds.stopped_by == "spread" and len(rounds.student_ms) > 8
    logs = [math.log(r) for r in rounds.ratios]
    assert statistics.stdev(logs) / math.sqrt(len(logs)) < 0.01


def test_rounds_alternate_and_pairing_cancels_order_and_drift():
    """The side timed second runs 10% slower (a warmed, throttled GPU) and the machine drifts 3×
    over the rounds: alternating the order and pairing each round make two equal kernels equal."""
    calls = []

    def same_kernel(index: int, student_first: bool) -> tuple[float, float]:
        calls.append(student_first)
        drift = 1.0 + 2.0 * index / 40
        first, second = drift, drift * 1.1
        return (first, second) if student_first else (second, first)

    rounds = run_rounds(same_kernel, Protocol(min_rounds=10, max_rounds=10), StandInClock(0.0))
    assert list(rounds.student_first) == calls == [True, False] * 5
    ratio, low, high = log_ratio_interval(rounds.ratios)
    assert ratio == pytest.approx(1.0) and low < 1.0 < high
    assert verdict(low, high) == "tie"
    always_first = [same_kernel(i, True) for i in range(1, 11)]  # what a fixed order would have measured
    assert log_ratio_interval(tuple(s / r for s, r in always_first))[0] == pytest.approx(1 / 1.1)


def test_verdicts_and_what_a_tie_scores(tmp_path):
    noise = random.Random(2)
    slower = run_rounds(lambda i, f: (2.0 * (1 + 0.01 * noise.random()), 1.0), Protocol(), StandInClock(0.0))
    ratio, low, high = log_ratio_interval(slower.ratios)
    assert verdict(low, high) == "slower" and 1.95 < ratio < 2.05
    assert verdict(0.5, 0.6) == "faster" and verdict(0.97, 1.08) == "tie"
    honest = runner_for(tmp_path, "def add(a, b):\n    return a + b\n")
    result = compare_speed(honest, "add", add, CASE, device="cpu", protocol=TWO, seed=1)
    if result.verdict == "tie":
        assert result.scored_ratio == min(result.ratio, 1.0) and result.to_dict()["scored_ratio"] <= 1.0
    else:
        assert result.scored_ratio == result.ratio
    assert result.ratio_low <= result.ratio <= result.ratio_high
    assert len(result.paired_ratios) == result.rounds == 2


def test_spans_sample_a_large_output():
    output = torch.arange(10_000, dtype=torch.float32).reshape(100, 100)
    assert sample_spans(output, Protocol(sample_bytes=output.numel() * 4), random.Random(0)) is None  # whole
    spans = sample_spans(output, Protocol(sample_bytes=4000, sample_spans=8), random.Random(0))
    assert len(spans) == 8 and all(length == 125 for _, length in spans)
    starts = [start for start, _ in spans]
    assert starts == sorted(starts) and all(b - a >= 125 for a, b in zip(starts, starts[1:], strict=False))
    assert all(start + length <= output.numel() for start, length in spans)
    taken = take_spans(output, spans)
    assert taken.numel() * 4 == 4000 and taken[:125].tolist() == list(range(starts[0], starts[0] + 125))
    assert spans != sample_spans(output, Protocol(sample_bytes=4000, sample_spans=8), random.Random(1))


class ZeroSpans(InProcessRunner):
    """Honest checksums, but the spans it is asked for come back as zeros."""

    def timed_outputs(self, indices, spans=None):
        result = super().timed_outputs(indices, spans)
        if spans is not None:
            result.value = [torch.zeros_like(v) if s is not None else v
                            for v, s in zip(result.value, spans, strict=True)]
        return result


def test_verification_fetches_spans_of_an_output_above_the_sample_size(tmp_path):
    (tmp_path / "student.py").write_text("def add(a, b):\n    return a + b\n")
    small = Protocol(min_rounds=2, max_rounds=2, sample_bytes=1024)  # a 64×32 float32 output is 8 KiB
    result = compare_speed(InProcessRunner(tmp_path, ("student.py",)), "add", add, CASE, device="cpu",
                           protocol=small, seed=3)
    assert result.verified and result.sampled_spans
    whole = compare_speed(InProcessRunner(tmp_path, ("student.py",)), "add", add, CASE, device="cpu",
                          protocol=TWO, seed=3)
    assert whole.verified and not whole.sampled_spans
    lying = compare_speed(ZeroSpans(tmp_path, ("student.py",)), "add", add, CASE, device="cpu", protocol=small,
                          seed=3)
    assert not lying.verified and "whole output differs" in lying.problems[0]


class KernelWorkerStandIn(InProcessRunner):
    """What a kernel worker is to the protocol: its own per-call times are believed."""

    trusted_call_times = True


class Overreporting(KernelWorkerStandIn):
    def time_block(self, *args):
        result = super().time_block(*args)
        result.value["event_ms"] = [1e6 for _ in result.value["event_ms"]]
        return result


def test_the_kernel_clock_leaves_the_blocks_overhead_out(tmp_path):
    """Per block the stand-in clock reads 200 ms (a flush, the checksums and the reply, all outside
    the calls): a kernel worker's figure is the calls' own time, the wall clock's that 200 ms shared."""
    (tmp_path / "student.py").write_text("def add(a, b):\n    return a + b\n")
    own = compare_speed(KernelWorkerStandIn(tmp_path, ("student.py",)), "add", add, CASE, device="cpu",
                        protocol=TWO, seed=4, clock=StandInClock(0.2))
    assert own.measured_by == "kernel" and own.verified, own.problems
    assert own.student.median_ms < 200.0 / own.calls / 2 and own.reference.median_ms < 200.0 / own.calls / 2
    wall = compare_speed(InProcessRunner(tmp_path, ("student.py",)), "add", add, CASE, device="cpu",
                         protocol=TWO, seed=4, clock=StandInClock(0.2))
    assert wall.measured_by == "wall" and wall.student.median_ms == pytest.approx(200.0 / wall.calls)
    forged = compare_speed(Overreporting(tmp_path, ("student.py",)), "add", add, CASE, device="cpu",
                           protocol=TWO, seed=4, clock=StandInClock(0.2))
    assert not forged.verified and "do not fit the grader's clock" in forged.problems[0]


def test_a_job_holds_the_device_across_its_gpu_work(tmp_path):
    """The job's hold covers the timing inside it (re-entrant, no deadlock) and outlasts it:
    another holder (a separate open file, as another process would be) is refused throughout."""

    def taken_elsewhere() -> bool:
        fd = os.open(lock_path("cuda"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    assert not taken_elsewhere()
    honest = runner_for(tmp_path, "def add(a, b):\n    return a + b\n")
    with job_device_lock("cuda"):
        assert held_here("cuda") and taken_elsewhere()
        with device_lock("cuda"):  # what the timing protocol takes
            assert taken_elsewhere()
        compare_speed(honest, "add", add, CASE, device="cpu", protocol=TWO, seed=1)
        assert held_here("cuda") and taken_elsewhere()  # still the job's after its timing
    assert not held_here("cuda") and not taken_elsewhere()
    with job_device_lock("cpu"):  # CPU jobs share the cores: no hold
        assert not taken_elsewhere()
