"""The timing harness on CPU: fake clocks for the protocol, real CPU timers for ratios."""

from __future__ import annotations

import time

import pytest
import torch

from grader.sandbox.client import CallResult
from grader.sandbox.timer import WallClock, time_function
from grader.timing import compare_speed, interleave, summarize


class FakeClock(WallClock):
    """Each call 'takes' the next duration from a list (seconds)."""

    def __init__(self, durations):
        self.durations = list(durations)
        self.t = 0.0
        super().__init__(now=lambda: self.t)

    def start(self):
        return self.t

    def stop(self, started):
        self.t += self.durations.pop(0)
        return (self.t - started) * 1e3


def test_time_function_untimed_first_calls_warmup_and_rotation():
    seen = []
    sets = [((torch.tensor(i),), {}) for i in range(3)]
    clock = FakeClock([0.001, 0.002, 0.003, 0.004])
    samples = time_function(lambda x: seen.append(int(x)), sets, repeats=4, warmup=2,
                            device="cpu", clock=clock)
    assert samples == pytest.approx([1.0, 2.0, 3.0, 4.0])
    # 3 compile calls (one per set), 2 warm-up, then 4 timed calls rotating through the sets
    assert seen == [0, 1, 2, 0, 1, 0, 1, 2, 0]


def test_summary_statistics():
    summary = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert summary.median_ms == 3.0 and summary.min_ms == 1.0 and summary.n == 5
    assert summary.iqr_ms == pytest.approx(3.0)
    with pytest.raises(ValueError):
        summarize([])


def test_interleave_alternates_blocks():
    order = []
    student, reference = interleave(lambda: order.append("s") or [1.0],
                                    lambda: order.append("r") or [2.0], rounds=3)
    assert order == ["s", "r", "s", "r", "s", "r"]
    assert student == [1.0] * 3 and reference == [2.0] * 3


class SlowRunner:
    """Stands in for the sandbox: the 'student' sleeps 4 ms per call."""

    def time(self, name, input_sets, options):
        def slow(x):
            time.sleep(0.004)
            return x

        return CallResult(status="ok", value=time_function(slow, input_sets, **options))


def test_compare_speed_ratio_on_cpu_timers():
    def fast(x):
        time.sleep(0.001)
        return x

    result = compare_speed(SlowRunner(), "f", fast, [((torch.ones(1),), {})], rounds=2,
                           repeats=5, device="cpu")
    assert result.student.n == 10 and result.reference.n == 10
    assert 2.0 < result.ratio < 8.0
    assert result.environment["torch"] == torch.__version__
