"""The runner: the server's thread that grants queued jobs to the executor and records what comes back.

A job is granted (running, under a lease of LEASE_S) only when a slot of the executor is free; while it
runs, the runner renews the leases of every job it holds each HEARTBEAT_S. Its upload is written to a
private folder under the server's spool for the grading to read, and removed when the job ends. What
comes back is plain data (grader.pipeline.jobs.JobResult): the runner reads the upload again, checks its
digest, and records the grading and the job's end in one transaction (Gradebook.finish_job), so a job is
recorded once even when it was granted twice.

When the executor's workers die (ExecutorBroken), every job in flight is queued again (a job granted
MAX_ATTEMPTS times fails with the reason), and the executor restarts. A job whose lease passed (a server
that stopped heartbeating) is queued again; a server that starts queues again whatever was running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import parse_iso
from grader.core.records import GradeResult
from grader.pipeline.executor import Executor, ExecutorBroken
from grader.pipeline.jobs import GradingJob, JobResult, describe_failure
from grader.serve.queue import ServerBook
from grader.serve.uploads import Spooled, Upload, read_upload
from grader.storage.gradebook import JobRecord

LEASE_S = 120.0  # a running job's lease, renewed by each heartbeat
HEARTBEAT_S = 10.0
POLL_S = 1.0  # how often the runner looks at the queue when nothing woke it
MAX_ATTEMPTS = 3  # grants before a job whose worker keeps dying is failed


@dataclass
class InFlight:
    job: JobRecord
    assignment: Assignment
    spooled: Spooled
    path: Path
    future: Future


class Runner:
    """Grants jobs of `tier` from `store` to `executor` and records them (see the module docstring)."""

    def __init__(self, store: ServerBook, executor: Executor, assignments: dict[str, Assignment], spool: Path, *,
                 protected: tuple[str, ...] = (), allow_weak_sandbox: bool = False, tier: str = "cpu",
                 lease_s: float = LEASE_S, heartbeat_s: float = HEARTBEAT_S,
                 after_grading: Callable[[JobRecord, Assignment, GradeResult], None] | None = None):
        self.store = store
        self.executor = executor
        self.assignments = assignments
        self.spool = Path(spool)
        self.protected = protected
        self.allow_weak_sandbox = allow_weak_sandbox
        self.tier = tier
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s
        self.after_grading = after_grading  # told of each grading recorded (the GPU tier's queueing)
        self.in_flight: dict[int, InFlight] = {}
        self.graded = 0  # jobs recorded by this runner
        self.restarts = 0  # times the executor's workers died
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0

    @property
    def slots(self) -> int:
        return self.executor.slots

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"grade-serve-{self.tier}", daemon=True)
        self._thread.start()

    def stop(self, cancel: bool = True) -> None:
        """Stop granting and end the executor (`cancel`: with the jobs it runs; they stay running in the
        gradebook and are granted again when a server starts)."""
        self._stop.set()
        self.store.notify()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.executor.shutdown(cancel=cancel)
        for flight in self.in_flight.values():
            flight.spooled.__exit__(None, None, None)

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._fill()
                self._collect()
                self._beat()
            except Exception as exc:  # the runner must keep going: one bad job fails, not the server
                print(f"grade serve: runner: {describe_failure(exc)}", flush=True)
                time.sleep(POLL_S)
            with self.store.changed:
                if not self._stop.is_set() and not any(f.future.done() for f in self.in_flight.values()):
                    self.store.changed.wait(timeout=POLL_S)

    def _fill(self) -> None:
        while len(self.in_flight) < self.executor.slots and not self._stop.is_set():
            granted = self.store.call(lambda book: book.grant_job(self.tier, time.time(), self.lease_s))
            if granted is None:
                return
            job, data = granted
            assignment = self.assignments.get(job.assignment_id)
            if assignment is None:
                self._finish(job, None, None, f"the assignment {job.assignment_id} is not served any more")
                continue
            spooled = Spooled(self.spool, Upload(job.upload_name, data))
            path = spooled.__enter__()
            extension = self.store.call(lambda book, j=job: book.extension_for(j.student_id, j.assignment_id))
            grading = GradingJob(assignment=assignment, path=str(path), student=job.student_id,
                                 submitted_at=job.submitted_at, allow_weak_sandbox=self.allow_weak_sandbox,
                                 protected=self.protected,
                                 due=extension.applied_to(assignment.due_date) if extension else None)
            try:
                future = self.executor.submit(grading)
            except ExecutorBroken as exc:
                future = Future()
                future.set_exception(exc)
            self.in_flight[job.id] = InFlight(job, assignment, spooled, path, future)
            future.add_done_callback(lambda _done: self.store.notify())

    def _collect(self) -> None:
        broken: list[InFlight] = []
        for job_id, flight in list(self.in_flight.items()):
            if not flight.future.done():
                continue
            del self.in_flight[job_id]
            try:
                error = flight.future.exception()
                if isinstance(error, ExecutorBroken):
                    broken.append(flight)
                    continue
                if error is not None:
                    self._finish(flight.job, None, None, describe_failure(error))
                else:
                    self._record(flight, flight.future.result())
            finally:
                if flight not in broken:
                    flight.spooled.__exit__(None, None, None)
        if broken:
            self.restarts += 1
            self.executor.restart()
            for flight in broken:
                self.store.call(lambda book, f=flight: book.requeue_job(
                    f.job.id, "its grading worker died; graded again", max_attempts=MAX_ATTEMPTS))
                flight.spooled.__exit__(None, None, None)
            self.store.notify()

    def _record(self, flight: InFlight, outcome: JobResult) -> None:
        job = flight.job
        if outcome.error is not None:
            self._finish(job, None, None, outcome.error)
            return
        try:
            result = GradeResult.from_dict(outcome.result)
            when = parse_iso(job.submitted_at) if job.submitted_at else None
            submission = read_upload(flight.assignment, self.spool, Upload(job.upload_name, flight.path.read_bytes()),
                                     job.student_id, when)
        except Exception as exc:  # the files cannot be read back: the job's error, not the server's
            self._finish(job, None, None, describe_failure(exc))
            return
        if result.submission_sha256 != submission.sha256 or submission.sha256 != job.sha256:
            self._finish(job, None, None, "the files graded are not the files uploaded: upload them again")
            return
        if not result.fingerprint:
            result = replace(result, fingerprint=flight.assignment.fingerprint)
        if self._finish(job, result, submission, None) and self.after_grading is not None:
            self.after_grading(job, flight.assignment, result)

    def _finish(self, job: JobRecord, result, submission, error: str | None) -> bool:
        """Record the job's end; whether a grading was recorded."""
        because = "graded again" if job.reason == "uploaded" else job.reason
        recorded = self.store.call(lambda book: book.finish_job(job.id, result, submission, error=error,
                                                                replaced_because=because)) and result is not None
        self.graded += int(recorded)
        self.store.notify()
        return recorded

    def _beat(self) -> None:
        now = time.time()
        if now - self._last_beat < self.heartbeat_s:
            return
        self._last_beat = now
        held = list(self.in_flight)
        if held:
            self.store.call(lambda book: book.heartbeat_jobs(held, now, self.lease_s))
        expired = self.store.call(lambda book: [j for j in book.expire_leases(now) if j not in self.in_flight])
        if expired:
            self.store.notify()


def submitted_now() -> str:
    """An upload's arrival time as the jobs table keeps it (UTC, microseconds: ordered as text)."""
    from grader.core.compat import UTC

    return datetime.now(UTC).isoformat(timespec="microseconds")
