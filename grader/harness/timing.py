"""Timing a student's kernel against the reference, with evidence the worker cannot forge.

The worker runs the student's calls (grader.sandbox.timer.run_block), but
nothing it says about time is believed. Per round:

1. The trusted process picks fresh input offsets into a seeded pool and a
   projection seed, sends them in one request, and times the whole request
   with its own clock: wall time / calls is an upper bound of the student's
   time per call (IPC included, kept small by making the block long).
2. It runs the identical block for the reference, in this process, while the
   worker's processes are stopped (SIGSTOP), timed the same way.
3. It checks every output: the worker's checksums against the reference's
   (a within-tolerance output passes with certainty ≥ 1 − 10⁻⁸; a skipped or
   garbage one fails), and a few whole outputs chosen after the block.

A patched timer, an answer sent before the GPU finished, outputs cached by
input identity or replayed from an earlier call: none of them changes the
trusted wall clock, and the skipped work shows in the outputs, which then earn
no speed credit. Round 0 is an untimed warm-up (compilation). Rounds
alternate student and reference, so drift affects both alike; one timing runs
per device at a time (grader.harness.device_lock). The worker's CUDA events are
reported as a refinement, but the figure is never below the trusted bound.

Numbers only: the points come from the manifest's thresholds in grader.core.scoring.
"""

from __future__ import annotations

import contextlib
import math
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from grader.core.tolerances import tolerance_for
from grader.harness.device_lock import device_lock
from grader.sandbox.limits import WORKER_TORCH_THREADS
from grader.sandbox.timer import PoolSpec, inputs_at, make_pool, pool_size, random_offsets, run_block

CHECKSUM_SIGMAS = 6.0  # a within-tolerance output fails the checksum test with probability < 2e-9
TARGET_BLOCK_MS = {"cuda": 50.0, "cpu": 200.0}  # long enough that one request's IPC is noise
MAX_BLOCK_BYTES = 2 << 30  # outputs kept per block (each side)
CALL_LIMITS = {"cuda": (10, 200), "cpu": (2, 200)}


@dataclass(frozen=True)
class Summary:
    median_ms: float
    iqr_ms: float  # interquartile range: the spread
    min_ms: float
    n: int


@dataclass(frozen=True)
class TimingCase:
    """One timed problem: the tensor arguments' shapes and dtype, constant keywords, FLOPs."""

    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    kwargs: dict
    flops: float = 0.0


@dataclass(frozen=True)
class SpeedResult:
    student: Summary  # per call, from the trusted wall clock
    reference: Summary
    ratio: float  # student / reference (1.0 = as fast as the reference)
    rounds: int
    calls: int  # per block
    device: str
    verified: bool  # every checksum and every sampled output matched the reference
    problems: tuple[str, ...]
    student_event_ms: float | None  # the worker's own CUDA events (shown, never used for points)
    environment: dict

    def to_dict(self) -> dict:
        return asdict(self)


@contextlib.contextmanager
def _threads_like_the_worker(device: str):
    """On the CPU the reference runs on as many threads as a worker (WORKER_TORCH_THREADS, one):
    the same work per call on both sides, and no idle thread pool for a loaded machine to
    stall (spinning barriers of a second thread multiplied the reference's time under load)."""
    if device.startswith("cuda"):
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(WORKER_TORCH_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TimingFailed(Exception):
    """The student's block did not run (raised, crashed, timed out)."""


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


def _checksum_bound(output: object, dtype: torch.dtype, projection_numel: int) -> float:
    """How far a within-tolerance output's checksum may be from the reference's."""
    if not isinstance(output, torch.Tensor) or output.numel() != projection_numel:
        return 0.0
    rtol, atol = tolerance_for(dtype)
    tol = atol + rtol * output.detach().double().abs()
    return CHECKSUM_SIGMAS * float(tol.square().sum().sqrt()) + 1e-9


def _close(actual: object, expected: object, dtype: torch.dtype) -> bool:
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)):
        return False
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    rtol, atol = tolerance_for(dtype)
    return bool(torch.allclose(actual.to(expected.device).double(), expected.double(), rtol=rtol, atol=atol))


def _calls_per_block(reference_ms: float, output_bytes: int, device: str) -> int:
    low, high = CALL_LIMITS["cuda" if device.startswith("cuda") else "cpu"]
    target = TARGET_BLOCK_MS["cuda" if device.startswith("cuda") else "cpu"]
    wanted = math.ceil(target / max(reference_ms, 1e-3))
    by_memory = max(1, MAX_BLOCK_BYTES // max(output_bytes, 1))
    return max(low, min(high, wanted, by_memory))


def compare_speed(runner, name: str, reference_fn: Callable, case: TimingCase, *, device: str,
                  rounds: int = 5, samples: int = 2, seed: int = 0,
                  clock: Callable[[], float] = time.perf_counter) -> SpeedResult:
    """Time the student's `name` (through `runner`) against `reference_fn` on fresh inputs."""
    rng = random.Random(seed)
    spec = PoolSpec(seed=rng.randrange(2**31), numel=pool_size(case.shapes), dtype=case.dtype, device=device)
    pool = make_pool(spec)
    dtype = getattr(torch, case.dtype)
    problems: list[str] = []
    student_ms: list[float] = []
    reference_ms: list[float] = []
    events: list[float] = []
    calls = CALL_LIMITS["cuda" if device.startswith("cuda") else "cpu"][0]
    with device_lock(device):
        for index in range(rounds + 1):  # round 0: warm-up, compiles both kernels, untimed
            plan = random_offsets(case.shapes, spec.numel, calls, rng)
            projection_seed = rng.randrange(2**31)
            started = clock()
            result = runner.time_block(name, spec, case.shapes, case.kwargs, plan, projection_seed)
            student_wall = clock() - started
            if result.status != "ok":
                raise TimingFailed(f"{result.status}: {result.detail} {result.error.get('message', '')}".strip())
            freeze = getattr(runner, "frozen", contextlib.nullcontext)
            with freeze(), _threads_like_the_worker(device):
                started = clock()
                reference = run_block(reference_fn, pool, case.shapes, plan, case.kwargs, projection_seed, device)
                reference_wall = clock() - started
            checksums = list(result.value.get("checksums", []))
            first = next((o for o in reference.outputs if isinstance(o, torch.Tensor)), None)
            numel = first.numel() if first is not None else 0
            if len(checksums) != len(plan):
                problems.append(f"round {index}: {len(checksums)} checksums for {len(plan)} calls")
            else:
                for call, (mine, theirs, output) in enumerate(zip(checksums, reference.checksums,
                                                                  reference.outputs, strict=True)):
                    if not (isinstance(mine, float) and abs(mine - theirs) <= _checksum_bound(output, dtype, numel)):
                        problems.append(f"round {index}, call {call + 1}: the output does not match the reference")
            chosen = sorted(rng.sample(range(len(plan)), k=min(samples, len(plan))))
            fetched = runner.timed_outputs(chosen)
            values = fetched.value if fetched.status == "ok" and isinstance(fetched.value, list) else []
            if len(values) != len(chosen):
                problems.append(f"round {index}: the worker did not return its timed outputs")
            else:
                for call, value in zip(chosen, values, strict=True):
                    if not _close(value, reference.outputs[call], dtype):
                        problems.append(f"round {index}, call {call + 1}: the whole output differs from the reference")
            if index == 0:  # size the blocks by the slower side, so a slow kernel cannot stretch timing
                per_call = max(reference_wall, student_wall) * 1e3 / len(plan)
                out_bytes = first.numel() * first.element_size() if first is not None else 1
                calls = _calls_per_block(per_call, out_bytes, device)
                continue
            student_ms.append(student_wall * 1e3 / len(plan))
            reference_ms.append(reference_wall * 1e3 / len(plan))
            events += [float(e) for e in result.value.get("event_ms", []) if isinstance(e, (int, float))]
            del reference
    s, r = summarize(student_ms), summarize(reference_ms)
    event_median = statistics.median(events) if events else None
    median = max(s.median_ms, event_median or 0.0)  # a refinement never beats the trusted bound
    s = Summary(median, s.iqr_ms, s.min_ms, s.n)
    return SpeedResult(student=s, reference=r, ratio=s.median_ms / r.median_ms, rounds=rounds, calls=calls,
                       device=device, verified=not problems, problems=tuple(problems[:5]),
                       student_event_ms=event_median, environment=environment())


def inputs_for(case: TimingCase, device: str, seed: int = 0) -> list[torch.Tensor]:
    """One set of the case's inputs (for a correctness check before timing)."""
    spec = PoolSpec(seed=seed, numel=pool_size(case.shapes), dtype=case.dtype, device=device)
    offsets = random_offsets(case.shapes, spec.numel, 1, random.Random(seed))[0]
    return inputs_at(make_pool(spec), case.shapes, offsets)
