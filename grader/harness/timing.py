"""Timing a student's kernel against the reference: the kernel's own time, paired, to a stop rule.

The protocol (docs/ARCHITECTURE.md, "Timing", sets it beside triton.testing.do_bench and
GPU MODE's evaluation):

1. Inputs are fresh for every call (views at random offsets into a seeded pool, chosen by the
   trusted side), and identical for the two sides within a round.
2. What is timed is one call's own work: on a GPU a pair of CUDA events around the call, with the
   L2 cache flushed before the start event (outside the timed region); on the CPU the call's own
   wall clock. grader.sandbox.timer.run_block does this, the same code for both sides: the
   student's block in the worker, the reference's in the trusted process while the worker's
   processes are stopped (SIGSTOP). A round's figure per side is the mean over its calls.
3. Round 0 is a warm-up (compilation, autotuning) and sizes the blocks; then rounds alternate
   which side goes first, and each round gives one paired ratio student / reference.
4. Rounds repeat until each side's mean and the ratio have a standard error under
   `Protocol.target_rel_se` (1%) of their value, after at least `min_rounds`, or a cap (rounds,
   or seconds of the trusted clock) stops them; the result says which.
5. The ratio is the geometric mean of the paired ratios, with a 95% interval from their spread;
   the verdict is "tie" when that interval holds 1, i.e. the paired intervals of the two sides
   overlap (a tie scores as the reference's own speed), else "faster" or "slower".
6. Every timed output is checked on the trusted side: the worker's float64 checksum of each
   against the reference's, and a few outputs chosen after the block, fetched whole or, above
   `Protocol.sample_bytes`, as random spans (so a large shape never meets the reply limit).

Whose clock is believed: a worker's own per-call times are trusted only from a worker that runs
no host code of the student's (the kernel worker: the course's launchers, the grader's timer and
the student's vetted device kernels, grader.intake.kernels), and even then never beyond the
trusted process's wall clock around the block. From a worker that runs the student's host code
(or in-process, where nothing is isolated), the figure per call is the trusted wall clock around
the block divided by its calls, for both sides alike. One job holds the device for all its GPU
work, and a timing holds it again (grader.harness.device_lock).

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
from dataclasses import asdict, dataclass, field

import torch

from grader.core.tolerances import tolerance_for
from grader.harness.device_lock import device_lock
from grader.harness.threads import torch_threads
from grader.sandbox.limits import WORKER_TORCH_THREADS
from grader.sandbox.timer import PoolSpec, inputs_at, make_pool, pool_size, random_offsets, run_block

CHECKSUM_SIGMAS = 6.0  # a within-tolerance output fails the checksum test with probability < 2e-9
TARGET_BLOCK_MS = {"cuda": 50.0, "cpu": 200.0}  # long enough that one request's IPC is noise
MAX_BLOCK_BYTES = 2 << 30  # outputs kept per block (each side)
CALL_LIMITS = {"cuda": (10, 200), "cpu": (2, 200)}
Z_95 = 1.96  # two-sided 95% normal quantile: the confidence intervals' half-width in standard errors
CLOCK_SLACK = 1.02  # the worker's own times may sum to at most this share of the trusted wall clock


@dataclass(frozen=True)
class Protocol:
    """The stop rule and the verification sample.

    Defaults differ per device (`for_device`): on a GPU a round costs tens of milliseconds, on
    the CPU (Triton's interpreter) hundreds."""

    min_rounds: int = 3
    max_rounds: int = 40
    target_rel_se: float = 0.01  # stop once the standard errors are under 1% of the means
    max_seconds: float = 30.0  # of the trusted clock, for the timed rounds (the warm-up not counted)
    samples: int = 2  # outputs per block fetched from the worker after it ran
    sample_bytes: int = 32 << 20  # above this an output is checked on random spans of this many bytes
    sample_spans: int = 16

    @classmethod
    def for_device(cls, device: str) -> Protocol:
        if device.startswith("cuda"):
            return cls()
        return cls(min_rounds=3, max_rounds=10, max_seconds=20.0)


@dataclass(frozen=True)
class Summary:
    """One side's per-call times over the timed rounds (ms): one value per round."""

    median_ms: float
    iqr_ms: float  # interquartile range: the spread
    min_ms: float
    n: int
    mean_ms: float = 0.0
    se_ms: float = 0.0  # standard error of the mean

    def interval(self, z: float = Z_95) -> tuple[float, float]:
        return self.mean_ms - z * self.se_ms, self.mean_ms + z * self.se_ms


@dataclass(frozen=True)
class Rounds:
    """The paired rounds and what the stop rule concluded."""

    student_ms: tuple[float, ...]
    reference_ms: tuple[float, ...]
    student_first: tuple[bool, ...]
    stopped_by: str  # "spread" (standard errors under target), "rounds" or "time" (a cap)

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(s / r for s, r in zip(self.student_ms, self.reference_ms, strict=True))


@dataclass(frozen=True)
class TimingCase:
    """One timed problem: the tensor arguments' shapes and dtype, constant keywords, FLOPs.

    `student_kwargs` go to the student's side only, after `kwargs`: what makes the course's launcher
    do no more than the reference's own (assignment 3's `launch_forward(..., timed=True)` allocates
    its outputs as the reference kernel does, without the NaN fill its correctness tests use)."""

    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    kwargs: dict
    flops: float = 0.0
    student_kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SpeedResult:
    student: Summary  # per call, by the clock `measured_by` names
    reference: Summary
    ratio: float  # geometric mean of the paired ratios student / reference (1.0 = as fast)
    ratio_low: float  # its 95% interval
    ratio_high: float
    verdict: str  # "faster", "slower" or "tie" (the ratio's interval holds 1)
    rounds: int  # timed rounds run (the warm-up not counted)
    stopped_by: str  # "spread", "rounds" or "time"
    calls: int  # per block
    device: str
    measured_by: str  # "kernel" (the call's own time in the kernel worker) or "wall" (the trusted clock)
    verified: bool  # every checksum and every sampled output matched the reference
    problems: tuple[str, ...]
    environment: dict
    sampled_spans: bool = False  # some sampled output was checked on spans (too large to fetch whole)
    paired_ratios: tuple[float, ...] = field(default_factory=tuple)

    @property
    def scored_ratio(self) -> float:
        """The ratio the speed points are read at: a tie is the reference's own speed at worst."""
        return min(self.ratio, 1.0) if self.verdict == "tie" else self.ratio

    def to_dict(self) -> dict:
        data = asdict(self)
        data["scored_ratio"] = self.scored_ratio
        return data


@contextlib.contextmanager
def _threads_like_the_worker(device: str):
    """On the CPU the reference runs on as many threads as a worker (WORKER_TORCH_THREADS, one):
    the same work per call on both sides, and no idle thread pool for a loaded machine to
    stall (grader.harness.threads)."""
    if device.startswith("cuda"):
        yield
        return
    with torch_threads(WORKER_TORCH_THREADS):
        yield


class TimingFailed(Exception):
    """The student's block did not run (raised, crashed, timed out)."""


def summarize(samples_ms: list[float] | tuple[float, ...]) -> Summary:
    """Median, interquartile range, minimum, mean and its standard error of timing samples."""
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4)
    else:
        q1 = q3 = ordered[len(ordered) // 2]
    mean = statistics.fmean(ordered)
    se = statistics.stdev(ordered) / math.sqrt(len(ordered)) if len(ordered) > 1 else math.inf
    return Summary(statistics.median(ordered), q3 - q1, ordered[0], len(ordered), mean, se)


def relative_se(values: list[float] | tuple[float, ...]) -> float:
    """Standard error of the mean over the mean (inf with fewer than two values)."""
    if len(values) < 2:
        return math.inf
    mean = statistics.fmean(values)
    return statistics.stdev(values) / math.sqrt(len(values)) / abs(mean) if mean else math.inf


def log_ratio_interval(ratios: tuple[float, ...], z: float = Z_95) -> tuple[float, float, float]:
    """(geometric mean, low, high) of paired ratios: a normal interval on their logarithms."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    se = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    return math.exp(mean), math.exp(mean - z * se) if math.isfinite(se) else 0.0, \
        math.exp(mean + z * se) if math.isfinite(se) else math.inf


def verdict(ratio_low: float, ratio_high: float) -> str:
    """"tie" when the paired ratio's interval holds 1 (the two sides' times cannot be told apart:
    paired, their intervals overlap), else "faster" or "slower" (the student)."""
    if ratio_low <= 1.0 <= ratio_high:
        return "tie"
    return "faster" if ratio_high < 1.0 else "slower"


def run_rounds(time_round: Callable[[int, bool], tuple[float, float]], protocol: Protocol,
               clock: Callable[[], float] = time.perf_counter) -> Rounds:
    """The timed rounds: `time_round(index, student_first)` → (student ms, reference ms) per call.

    Round `index` (from 1) puts the student first when odd, so each side goes first in half the
    rounds. At least two rounds run (a spread needs two). Stops after `protocol.min_rounds` once
    each side's mean and the paired log-ratio have a relative standard error under
    `protocol.target_rel_se`, or at `max_rounds`, or once `max_seconds` of `clock` have passed
    (checked between rounds)."""
    started = clock()
    student: list[float] = []
    reference: list[float] = []
    firsts: list[bool] = []
    stopped_by = "rounds"
    last = max(2, protocol.max_rounds)  # a spread needs two rounds
    for index in range(1, last + 1):
        first = index % 2 == 1
        s, r = time_round(index, first)
        student.append(s)
        reference.append(r)
        firsts.append(first)
        if index >= max(2, protocol.min_rounds):
            logs = [math.log(a / b) for a, b in zip(student, reference, strict=True)]
            log_se = statistics.stdev(logs) / math.sqrt(len(logs))
            if max(relative_se(student), relative_se(reference), log_se) < protocol.target_rel_se:
                stopped_by = "spread"
                break
        if clock() - started >= protocol.max_seconds and index >= 2 and index < last:
            stopped_by = "time"
            break
    return Rounds(tuple(student), tuple(reference), tuple(firsts), stopped_by)


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
        info["capability"] = ".".join(str(v) for v in torch.cuda.get_device_capability())
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


def sample_spans(output: torch.Tensor, protocol: Protocol, rng: random.Random) -> list[list[int]] | None:
    """None (fetch the whole output) when it fits `protocol.sample_bytes`; else
    `protocol.sample_spans` random [start, length] spans of its flat elements, sorted and
    disjoint, `sample_bytes` in all, chosen by the trusted side after the block ran."""
    if output.numel() * output.element_size() <= protocol.sample_bytes:
        return None
    count = max(1, protocol.sample_spans)
    length = max(1, protocol.sample_bytes // output.element_size() // count)
    slots = output.numel() // length  # disjoint slots of `length` elements
    chosen = sorted(rng.sample(range(slots), k=min(count, slots)))
    return [[slot * length, length] for slot in chosen]


def take_spans(output: torch.Tensor, spans: list[list[int]]) -> torch.Tensor:
    """The elements of `spans` ([start, length] of the flat output), concatenated: [Σ length]."""
    flat = output.detach().reshape(-1)
    return torch.cat([flat[int(start):int(start) + int(length)] for start, length in spans])


def _calls_per_block(reference_ms: float, output_bytes: int, device: str) -> int:
    low, high = CALL_LIMITS["cuda" if device.startswith("cuda") else "cpu"]
    target = TARGET_BLOCK_MS["cuda" if device.startswith("cuda") else "cpu"]
    wanted = math.ceil(target / max(reference_ms, 1e-3))
    by_memory = max(1, MAX_BLOCK_BYTES // max(output_bytes, 1))
    return max(low, min(high, wanted, by_memory))


class _Session:
    """One comparison's state: the pool, the block size, the problems found."""

    def __init__(self, runner, name: str, reference_fn: Callable, case: TimingCase, device: str,
                 protocol: Protocol, rng: random.Random, clock: Callable[[], float]):
        self.runner, self.name, self.reference_fn, self.case = runner, name, reference_fn, case
        self.device, self.protocol, self.rng, self.clock = device, protocol, rng, clock
        self.spec = PoolSpec(seed=rng.randrange(2**31), numel=pool_size(case.shapes), dtype=case.dtype,
                             device=device)
        self.pool = make_pool(self.spec)
        self.dtype = getattr(torch, case.dtype)
        self.problems: list[str] = []
        self.calls = CALL_LIMITS["cuda" if device.startswith("cuda") else "cpu"][0]
        self.kernel_clock = bool(getattr(runner, "trusted_call_times", False))
        self.spanned = False

    def _student(self, plan, projection_seed: int, index: int):
        started = self.clock()
        result = self.runner.time_block(self.name, self.spec, self.case.shapes,
                                        {**self.case.kwargs, **self.case.student_kwargs}, plan, projection_seed)
        wall_ms = (self.clock() - started) * 1e3
        if result.status != "ok":
            raise TimingFailed(f"{result.status}: {result.detail} {result.error.get('message', '')}".strip())
        value = result.value if isinstance(result.value, dict) else {}
        per_call = wall_ms / len(plan)
        if self.kernel_clock:
            own = value.get("event_ms", [])
            if (len(own) == len(plan) and all(isinstance(e, (int, float)) and math.isfinite(e) and e > 0 for e in own)
                    and sum(own) <= wall_ms * CLOCK_SLACK):
                per_call = statistics.fmean(own)
            else:
                self.problems.append(f"round {index}: the worker's own call times do not fit the grader's clock")
        return value, per_call, wall_ms

    def _reference(self, plan, projection_seed: int):
        freeze = getattr(self.runner, "frozen", contextlib.nullcontext)
        with freeze(), _threads_like_the_worker(self.device):
            started = self.clock()
            block = run_block(self.reference_fn, self.pool, self.case.shapes, plan, self.case.kwargs,
                              projection_seed, self.device)
            wall_ms = (self.clock() - started) * 1e3
        per_call = statistics.fmean(block.event_ms) if self.kernel_clock and block.event_ms else wall_ms / len(plan)
        return block, per_call, wall_ms

    def _verify(self, index: int, plan, value: dict, reference) -> None:
        checksums = list(value.get("checksums", []))
        first = next((o for o in reference.outputs if isinstance(o, torch.Tensor)), None)
        numel = first.numel() if first is not None else 0
        if len(checksums) != len(plan):
            self.problems.append(f"round {index}: {len(checksums)} checksums for {len(plan)} calls")
        else:
            for call, (mine, theirs, output) in enumerate(zip(checksums, reference.checksums, reference.outputs,
                                                              strict=True)):
                if not (isinstance(mine, float) and abs(mine - theirs) <= _checksum_bound(output, self.dtype, numel)):
                    self.problems.append(f"round {index}, call {call + 1}: the output does not match the reference")
        chosen = sorted(self.rng.sample(range(len(plan)), k=min(self.protocol.samples, len(plan))))
        spans = [sample_spans(reference.outputs[c], self.protocol, self.rng)
                 if isinstance(reference.outputs[c], torch.Tensor) else None for c in chosen]
        if any(s is not None for s in spans):
            self.spanned = True
            fetched = self.runner.timed_outputs(chosen, spans)
        else:
            fetched = self.runner.timed_outputs(chosen)
        values = fetched.value if fetched.status == "ok" and isinstance(fetched.value, list) else []
        if len(values) != len(chosen):
            self.problems.append(f"round {index}: the worker did not return its timed outputs")
            return
        for call, span, got in zip(chosen, spans, values, strict=True):
            expected = reference.outputs[call]
            if span is not None:
                expected = take_spans(expected, span)
            if not _close(got, expected, self.dtype):
                self.problems.append(f"round {index}, call {call + 1}: the whole output differs from the reference")

    def round(self, index: int, student_first: bool) -> tuple[float, float]:
        """One block per side on the same fresh inputs, in the order given; both checked."""
        plan = random_offsets(self.case.shapes, self.spec.numel, self.calls, self.rng)
        projection_seed = self.rng.randrange(2**31)
        if student_first:
            value, student_ms, student_wall = self._student(plan, projection_seed, index)
            reference, reference_ms, reference_wall = self._reference(plan, projection_seed)
        else:
            reference, reference_ms, reference_wall = self._reference(plan, projection_seed)
            value, student_ms, student_wall = self._student(plan, projection_seed, index)
        self._verify(index, plan, value, reference)
        if index == 0:  # size the blocks by the slower side, so a slow kernel cannot stretch timing
            per_call = max(reference_wall, student_wall) / len(plan)
            own = value.get("event_ms") if self.kernel_clock else None
            if own and reference.event_ms and not self.problems:  # the median call: compiling was in the first
                per_call = max(statistics.median(own), statistics.median(reference.event_ms))
            first = next((o for o in reference.outputs if isinstance(o, torch.Tensor)), None)
            out_bytes = first.numel() * first.element_size() if first is not None else 1
            self.calls = _calls_per_block(per_call, out_bytes, self.device)
        del reference
        return student_ms, reference_ms


def compare_speed(runner, name: str, reference_fn: Callable, case: TimingCase, *, device: str,
                  protocol: Protocol | None = None, seed: int = 0,
                  clock: Callable[[], float] = time.perf_counter) -> SpeedResult:
    """Time the student's `name` (through `runner`) against `reference_fn` on fresh inputs, by the
    protocol above; `clock` is the trusted clock (a stand-in in tests)."""
    protocol = protocol or Protocol.for_device(device)
    session = _Session(runner, name, reference_fn, case, device, protocol, random.Random(seed), clock)
    with device_lock(device):
        session.round(0, True)  # warm-up: compiles and autotunes both kernels, sizes the blocks; untimed
        rounds = run_rounds(session.round, protocol, clock)
    s, r = summarize(rounds.student_ms), summarize(rounds.reference_ms)
    ratio, low, high = log_ratio_interval(rounds.ratios)
    problems = session.problems
    return SpeedResult(student=s, reference=r, ratio=ratio, ratio_low=low, ratio_high=high, verdict=verdict(low, high),
                       rounds=len(rounds.student_ms), stopped_by=rounds.stopped_by, calls=session.calls,
                       device=device, measured_by="kernel" if session.kernel_clock else "wall",
                       verified=not problems, problems=tuple(problems[:5]), environment=environment(),
                       sampled_spans=session.spanned, paired_ratios=rounds.ratios)


def inputs_for(case: TimingCase, device: str, seed: int = 0) -> list[torch.Tensor]:
    """One set of the case's inputs (for a correctness check before timing)."""
    spec = PoolSpec(seed=seed, numel=pool_size(case.shapes), dtype=case.dtype, device=device)
    offsets = random_offsets(case.shapes, spec.numel, 1, random.Random(seed))[0]
    return inputs_at(make_pool(spec), case.shapes, offsets)
