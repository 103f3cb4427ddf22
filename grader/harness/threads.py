"""How many CPU threads torch computes with while the grader runs a suite.

The grader's side of a grading (reference outputs, comparisons, diagnosis) works on the
hidden tests' tensors, the same sizes a sandbox worker's calls get, and a worker computes on
WORKER_TORCH_THREADS (one). So does the grader's side while a suite runs: the cores belong
to the workers and to the other gradings beside it (a pool's, a server's), and torch's idle
OpenMP threads spin after every parallel operation, on the cores the neighbours need:
benchmarks/bench_threads.py measures two gradings side by side both ways.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from grader.sandbox.limits import WORKER_TORCH_THREADS


@contextlib.contextmanager
def torch_threads(count: int = WORKER_TORCH_THREADS) -> Iterator[None]:
    """torch computes on `count` intra-op threads inside the block; the process's own setting after it."""
    before = torch.get_num_threads()
    if before == count:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
