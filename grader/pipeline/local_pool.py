"""The executor of one machine: a pool of reused worker processes.

Workers are reused across jobs (no `max_tasks_per_child`): each imports torch, pytest
and the reference once (grader.pipeline.jobs.warm_process), not once per student. Each
student still gets a fresh sandbox worker (grade() starts it), so reuse never mixes
students' code. The pool uses the forkserver start method on Linux (spawn elsewhere):
the parent runs a progress thread and holds a SQLite connection, and forking a threaded
process is unsafe. A worker that dies breaks the pool: its futures then fail with
grader.pipeline.executor.ExecutorBroken.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from grader.core.assignment import Assignment
from grader.pipeline.executor import ExecutorBroken
from grader.pipeline.jobs import GradingJob, JobResult, run_job, warm_process


def _relay(inner: Future, outer: Future) -> None:
    """Settle `outer` as `inner` settled, a broken pool as ExecutorBroken."""
    if inner.cancelled():
        outer.cancel()
        return
    error = inner.exception()
    if isinstance(error, BrokenProcessPool):
        outer.set_exception(ExecutorBroken(str(error) or "a grading worker process died"))
    elif error is not None:
        outer.set_exception(error)
    else:
        outer.set_result(inner.result())


class LocalProcessExecutor:
    """A pool of `jobs` reused worker processes on this machine (started on first use), each warmed up
    for `assignment` when one is given."""

    def __init__(self, jobs: int = 1, *, assignment: Assignment | None = None):
        self.jobs = max(1, int(jobs))
        self.assignment = assignment
        self._pool: ProcessPoolExecutor | None = None

    @property
    def slots(self) -> int:
        return self.jobs

    def _start(self) -> ProcessPoolExecutor:
        method = "forkserver" if sys.platform.startswith("linux") else "spawn"
        return ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context(method),
                                   initializer=warm_process, initargs=(self.assignment,))

    def run(self, pool: ProcessPoolExecutor, job: GradingJob) -> Future:
        """Hand `job` to the pool (what each job runs: run_job)."""
        return pool.submit(run_job, job)

    def submit(self, job: GradingJob) -> Future[JobResult]:
        if self._pool is None:
            self._pool = self._start()
        try:
            inner = self.run(self._pool, job)
        except BrokenProcessPool as exc:
            raise ExecutorBroken(str(exc) or "the pool's workers died") from exc
        outer: Future[JobResult] = Future()
        inner.add_done_callback(lambda done: _relay(done, outer))
        return outer

    def restart(self) -> None:
        """After a worker died: a fresh pool for the remaining jobs."""
        self.shutdown(cancel=True)

    def shutdown(self, cancel: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
            self._pool = None

    def terminate(self, grace_s: float = 3.0) -> None:
        """End the workers now, whatever they are grading (a command interrupted): each is sent SIGTERM,
        then SIGKILL after `grace_s`. A worker's sandboxes end with it (their lifeline is its pipe)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())  # no public handle on them
        for process in processes:
            process.terminate()
        deadline = time.monotonic() + grace_s
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)
        pool.shutdown(wait=False, cancel_futures=True)
