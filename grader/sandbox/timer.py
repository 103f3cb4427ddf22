"""Low-level timing of one function, in whichever process runs it.

The worker uses it for the student's kernel, the trusted process for the
reference kernel; `grader.timing` interleaves the two and does the statistics.
Protocol per repeat: rotate to the next seeded input set, flush the L2 cache
by writing a buffer larger than it, then time the call alone with CUDA events.
The first call of each input set is untimed (it compiles the kernel).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current GPU's L2 (H100/H200: 50 MiB)


class WallClock:
    """A CPU timer with the same shape as a pair of CUDA events."""

    def __init__(self, now: Callable[[], float] = time.perf_counter):
        self.now = now

    def start(self) -> float:
        return self.now()

    def stop(self, started: float) -> float:
        return (self.now() - started) * 1e3


def time_function(
    function: Callable,
    input_sets: Sequence[tuple[tuple, dict]],
    repeats: int = 30,
    warmup: int = 3,
    device: str = "cuda",
    flush_bytes: int = L2_FLUSH_BYTES,
    clock: WallClock | None = None,
) -> list[float]:
    """Milliseconds of `repeats` calls, cycling through `input_sets`."""
    if not input_sets:
        raise ValueError("time_function needs at least one input set")
    use_cuda = device.startswith("cuda") and torch.cuda.is_available()
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device) if use_cuda else None
    for args, kwargs in input_sets:  # compile and load every specialisation, untimed
        function(*args, **kwargs)
    for i in range(warmup):
        args, kwargs = input_sets[i % len(input_sets)]
        function(*args, **kwargs)
    samples: list[float] = []
    if use_cuda:
        torch.cuda.synchronize()
        for i in range(repeats):
            args, kwargs = input_sets[i % len(input_sets)]
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            function(*args, **kwargs)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        return samples
    clock = clock or WallClock()
    for i in range(repeats):
        args, kwargs = input_sets[i % len(input_sets)]
        started = clock.start()
        function(*args, **kwargs)
        samples.append(clock.stop(started))
    return samples
