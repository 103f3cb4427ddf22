"""What the batch asks of an executor: the protocol, and the one failure an executor reports.

An executor runs grader.pipeline.jobs.run_job somewhere (a process pool here, actors on
a Ray cluster) and hands back a Future per job. When its workers die it fails the jobs
in flight with `ExecutorBroken`; the batch (grader.pipeline.dispatch) then calls
`restart()` and runs those jobs again, one at a time, so that only a job that breaks the
executor on its own is charged for it.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from grader.pipeline.jobs import GradingJob, JobResult


class ExecutorBroken(Exception):
    """The executor's workers died (a pool worker, a Ray actor or its node): every job in flight failed
    with them, whichever one caused it."""


class Executor(Protocol):
    """Where jobs run."""

    @property
    def slots(self) -> int:
        """Jobs it grades at once."""
        ...

    def submit(self, job: GradingJob) -> Future[JobResult]:
        """Run `job`; the future fails with ExecutorBroken when the workers die. Raises ExecutorBroken
        when the executor is already broken (nothing was started)."""
        ...

    def restart(self) -> None:
        """After ExecutorBroken: fresh workers for the jobs still to come."""
        ...

    def shutdown(self, cancel: bool = False) -> None:
        """End the workers (`cancel`: without waiting for the jobs handed over)."""
        ...
