"""GPU timing of a student's kernel against the reference, in the same run.

Protocol (see grader.sandbox.timer for one block): the student's kernel is
timed in the sandbox worker and the reference kernel in the trusted process,
block after block (student, reference, student, ...) on the same device, so
clock boosts, thermals and neighbours affect both alike. Each block starts
with untimed calls (compilation) and warm-up, flushes L2 before every repeat,
uses CUDA events, and rotates through several seeded input sets. The verdict
is the ratio of medians; the spread is reported beside it. Numbers only: the
points come from the manifest's thresholds (grader.scoring.speed_fraction).
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from grader.sandbox.timer import time_function


@dataclass(frozen=True)
class Summary:
    median_ms: float
    iqr_ms: float  # interquartile range: the spread
    min_ms: float
    n: int


@dataclass(frozen=True)
class SpeedResult:
    student: Summary
    reference: Summary
    ratio: float  # student median / reference median (1.0 = as fast as the reference)
    rounds: int
    environment: dict

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples_ms: list[float]) -> Summary:
    """Median, interquartile range and minimum of timing samples."""
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4)
    else:
        q1 = q3 = ordered[len(ordered) // 2]
    return Summary(statistics.median(ordered), q3 - q1, ordered[0], len(ordered))


def environment() -> dict:
    """What the numbers were measured on."""
    info = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        try:
            import subprocess

            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            info["driver"] = None
    return info


def interleave(time_student: Callable[[], list[float]], time_reference: Callable[[], list[float]],
               rounds: int) -> tuple[list[float], list[float]]:
    """Alternate student and reference blocks; returns all samples of each."""
    student: list[float] = []
    reference: list[float] = []
    for _ in range(rounds):
        student += time_student()
        reference += time_reference()
    return student, reference


def compare_speed(runner, name: str, reference_fn: Callable, input_sets: list,
                  rounds: int = 5, repeats: int = 20, device: str = "cuda") -> SpeedResult:
    """Time the student's `name` (through `runner`) against `reference_fn` on the same inputs."""
    options = {"repeats": repeats, "warmup": 3, "device": device}

    def student_block() -> list[float]:
        result = runner.time(name, input_sets, options)
        if result.status != "ok":
            raise RuntimeError(f"timing {name} failed: {result.status} {result.detail} "
                               f"{result.error.get('message', '')}")
        return list(result.value)

    def reference_block() -> list[float]:
        return time_function(reference_fn, input_sets, **options)

    student, reference = interleave(student_block, reference_block, rounds)
    s, r = summarize(student), summarize(reference)
    return SpeedResult(s, r, s.median_ms / r.median_ms, rounds, environment())


def judge_speed(check, name: str, reference_fn: Callable, input_sets: list, flops: float,
                rounds: int = 5, repeats: int = 20) -> SpeedResult:
    """For a timing test: pending without CUDA, else award points by the manifest's thresholds."""
    from grader.scoring import speed_fraction

    if check.device != "cuda" or not torch.cuda.is_available():
        check.pending("not timed: no CUDA device")
    result = compare_speed(check.context.runner, name, reference_fn, input_sets, rounds, repeats)
    thresholds = check.context.manifest.task(check.task_id).speed
    fraction = speed_fraction(thresholds, result.ratio)
    tflops = flops / (result.student.median_ms * 1e-3) / 1e12
    check.record["timing"] = {**result.to_dict(), "student_tflops": tflops,
                              "reference_tflops": flops / (result.reference.median_ms * 1e-3) / 1e12,
                              "fraction": fraction}
    check.award(fraction, f"{result.ratio:.2f}× the reference time "
                          f"({result.student.median_ms:.3f} ms vs {result.reference.median_ms:.3f} ms, "
                          f"{tflops:.1f} TFLOP/s)")
    return result
