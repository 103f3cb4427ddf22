"""The executor of one machine: a pool of reused worker processes.

Workers are reused across jobs (no `max_tasks_per_child`): each imports torch, pytest
and the reference once (grader.pipeline.jobs.warm_process), not once per student. Each
student still gets a fresh sandbox worker (grade() starts it), so reuse never mixes
students' code. The pool uses the forkserver start method on Linux (spawn elsewhere):
the parent runs a progress thread and holds a SQLite connection, and forking a threaded
process is unsafe. A worker that dies breaks the pool: its futures then fail with
grader.pipeline.executor.ExecutorBroken.

Nothing outlives the command that started the pool:
- the parent decides when work stops. A worker ignores SIGINT (Ctrl-C reaches the whole
  process group; the parent then ends the workers), and on SIGTERM it unwinds the job it
  is running (its sandbox is closed on the way out) and exits;
- `shutdown(cancel=True)` and `stop_every_pool()` (what a command calls when it is
  stopped by a signal) end every worker: SIGTERM, STOP_GRACE_S to unwind, then SIGKILL;
  then they remove the sandbox folders each worker left (grader.sandbox.scratch).
  A worker's sandbox supervisors end their trees when it dies (their lifeline closes),
  and the forkserver exits once no worker is left;
- a worker watches the process that started the pool and ends itself when that process
  is gone, however it died (SIGKILL included).
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from grader.core.assignment import Assignment
from grader.pipeline.executor import ExecutorBroken
from grader.pipeline.jobs import GradingJob, JobResult, run_job, warm_process
from grader.sandbox import scratch
from grader.sandbox.template import Zygote

STOP_GRACE_S = 5.0  # a stopped worker's time to close its sandbox before it is killed
IDLE_EXIT_S = 1.0  # an idle worker's time to exit when told to, before it is stopped
WATCH_POLL_S = 1.0  # how often a worker looks for its parent where pidfds are missing

_LIVE: weakref.WeakSet[LocalProcessExecutor] = weakref.WeakSet()  # the pools this process runs now


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


# ------------------------------------------------------------------ inside a worker
class WorkerStopping(BaseException):
    """Raised in a worker's job by SIGTERM: it unwinds the job (closing its sandbox), then the worker exits."""


_in_job = False  # this worker is running a job now (a SIGTERM then unwinds it first)


def _exit_worker(code: int) -> None:
    """End this worker now, closing its sandbox templates first (os._exit skips every exit hook)."""
    Zygote.close_all()
    os._exit(code)


def _on_sigterm(signum: int, _frame) -> None:
    if _in_job:
        raise WorkerStopping()
    _exit_worker(128 + signum)


def _watch_parent(parent_pid: int) -> None:
    """End this worker (as SIGTERM does) when the process that started the pool is gone."""
    try:
        handle = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):  # no pidfds here: poll
        handle = None
    if handle is not None:
        select.select([handle], [], [])
    else:
        while True:
            time.sleep(WATCH_POLL_S)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:  # another user's process took the number: ours is gone
                break
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_GRACE_S)
    _exit_worker(128 + signal.SIGTERM)


def start_worker(assignment: Assignment | None, parent_pid: int | None = None) -> None:
    """A pool worker's start: its signals (see the module docstring), its watch on the parent, its imports."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(parent_pid,), name="grade-parent-watch", daemon=True).start()
    warm_process(assignment)


def run_in_worker(job: GradingJob) -> JobResult:
    """run_job, in a pool worker: a SIGTERM during the job unwinds it, then the worker exits."""
    global _in_job
    _in_job = True
    try:
        return run_job(job)
    except WorkerStopping:
        _exit_worker(128 + signal.SIGTERM)
    finally:
        _in_job = False


# ------------------------------------------------------------------ in the parent
def end_processes(processes: list, grace_s: float = STOP_GRACE_S, polite_s: float = 0.0) -> None:
    """Give the processes `polite_s` to exit by themselves (an idle worker told to stop), then SIGTERM each
    live one, give them `grace_s` together to exit, then SIGKILL what is left; last, remove the sandbox
    folders each left (one killed, or stopped while it made a template, could not)."""
    polite = time.monotonic() + polite_s
    for process in processes:
        if process.pid and polite_s > 0:
            process.join(max(0.0, polite - time.monotonic()))
    alive = [p for p in processes if p.pid and p.exitcode is None]
    for process in alive:
        try:
            os.kill(process.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    for process in alive:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in alive:
        if process.exitcode is None:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.join(grace_s)
    for process in processes:
        if process.pid and process.exitcode is not None:
            scratch.remove_left_by(process.pid)


def _workers(pool: ProcessPoolExecutor) -> list:
    for _ in range(3):  # the pool's own thread may change the table while it is read
        try:
            return list((getattr(pool, "_processes", None) or {}).values())
        except RuntimeError:
            continue
    return []


def stop_every_pool() -> None:
    """End the workers of every pool this process runs, with the jobs they run (a command stopped by a
    signal calls this, so that no worker grades on for minutes after its command was stopped)."""
    for executor in list(_LIVE):
        executor.stop_workers()


class LocalProcessExecutor:
    """A pool of `jobs` reused worker processes on this machine (started on first use), each warmed up
    for `assignment` when one is given."""

    def __init__(self, jobs: int = 1, *, assignment: Assignment | None = None):
        self.jobs = max(1, int(jobs))
        self.assignment = assignment
        self._pool: ProcessPoolExecutor | None = None
        _LIVE.add(self)

    @property
    def slots(self) -> int:
        return self.jobs

    def _start(self) -> ProcessPoolExecutor:
        method = "forkserver" if sys.platform.startswith("linux") else "spawn"
        return ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context(method),
                                   initializer=start_worker, initargs=(self.assignment, os.getpid()))

    def run(self, pool: ProcessPoolExecutor, job: GradingJob) -> Future:
        """Hand `job` to the pool (what each job runs: run_in_worker)."""
        return pool.submit(run_in_worker, job)

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

    def stop_workers(self) -> None:
        """End every worker now, with the job it runs (the pool is broken after; shutdown() still follows)."""
        if self._pool is not None:
            end_processes(_workers(self._pool))

    def shutdown(self, cancel: bool = False) -> None:
        """Wait for the jobs handed over, then end the workers; `cancel`: drop the jobs not started and
        end the running ones with their workers (see the module docstring)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if cancel:
            workers = _workers(pool)
            pool.shutdown(wait=False, cancel_futures=True)  # idle workers are told to stop: they exit at once
            end_processes(workers, polite_s=IDLE_EXIT_S)
        pool.shutdown(wait=True)
