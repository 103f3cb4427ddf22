"""The resource limits of a sandbox worker, with their defaults: the one place they live.

An assignment's `[limits]` table (grader.core.manifest) sets any of them by
these names; `Sandbox` takes one `SandboxLimits` and hands the worker's share
(memory, CPU time, file size, processes) to it in its `WorkerSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass

WORKER_TORCH_THREADS = 1  # torch's intra-op threads in a worker; the reference is timed with as many


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the sandbox worker (per call and per submission)."""

    call_timeout_s: float = 30.0  # one call of student code
    submission_budget_s: float = 600.0  # wall-clock time of all calls of one submission, start-up included
    memory_mb: int = 8192  # address space of the worker (not set where a GPU is used)
    cpu_time_s: int = 900  # RLIMIT_CPU of the worker
    file_size_mb: int = 64  # the largest file the worker may write
    max_processes: int = 256  # processes of the worker's uid
    output_cap_kb: int = 64  # what the student's code prints, kept per call
    max_reply_mb: int = 256  # the largest reply the trusted side reads from the worker
