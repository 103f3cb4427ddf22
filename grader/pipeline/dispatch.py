"""Feeding an executor and recovering when its workers die (the batch's engine room).

The dispatcher keeps a bounded window of jobs in flight (enough to keep the workers busy,
not every submission in memory), hands each finished one to the batch's recorder, and
recovers from grader.pipeline.executor.ExecutorBroken: when the workers die, every job in
flight fails with them, so the break is pinned on a job only when that job was the one
running. It is charged an attempt and runs again alone; after MAX_POOL_RESTARTS attempts
the death is recorded as its error. When several were running, none is charged: the
executor restarts and they run again one at a time (a window of one) until each has
finished alone, graded or charged; then the full window resumes.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Protocol

from grader.core.errors import GraderError
from grader.intake.submission import Submission
from grader.pipeline.discovery import Entry, raw_sha256
from grader.pipeline.executor import Executor, ExecutorBroken
from grader.pipeline.jobs import GradingJob, JobResult, describe_failure


class JobSource(Protocol):
    """What the dispatcher reads entries with (the batch's intake)."""

    def load(self, entry: Entry) -> Submission: ...

    def job(self, entry: Entry, submission: Submission) -> GradingJob: ...


class OutcomeSink(Protocol):
    """Where the dispatcher sends what happened to each entry (the batch's recorder)."""

    def error(self, entry: Entry, sha256: str, error: str) -> None: ...

    def outcome(self, entry: Entry, submission: Submission, outcome: JobResult) -> None: ...

MAX_POOL_RESTARTS = 2  # a job that kills its worker this often is recorded as an error


@dataclass
class Running:
    """A job handed to the executor."""

    entry: Entry
    submission: Submission
    order: int  # when it was handed over
    alone: bool  # handed over as the only job in flight (after a break)
    started: bool = True  # False: the executor refused it, its pool already broken


class Dispatcher:
    """Feeds the executor a bounded window of jobs, records what comes back, recovers from a break
    (see the module docstring)."""

    def __init__(self, executor: Executor, window: int, intake: JobSource, recorder: OutcomeSink):
        self.executor = executor
        self.window = window  # jobs in flight: enough to keep workers busy, files not all in memory
        self.intake = intake
        self.recorder = recorder
        self.todo: deque[Entry] = deque()
        self.suspects: deque[Entry] = deque()  # in flight at a break of unknown cause: each runs alone
        self.in_flight: dict[Future, Running] = {}
        self.attempts: dict[str, int] = {}  # breaks charged, per student
        self.handed = 0
        self.restarted = False  # since the executor's last restart, nothing was accepted

    def run(self, todo: deque[Entry]) -> None:
        self.todo = todo
        self._feed()
        while self.in_flight:
            done, _ = wait(list(self.in_flight), return_when=FIRST_COMPLETED)
            broken = self._collect(done)
            if broken:
                self._recover(broken)
            self._feed()

    def _next(self) -> tuple[Entry, bool] | None:
        """The next entry to hand over and whether it runs alone; None while the window is full."""
        if self.suspects or any(r.alone for r in self.in_flight.values()):
            if self.in_flight or not self.suspects:
                return None
            return self.suspects.popleft(), True
        if self.todo and len(self.in_flight) < self.window:
            return self.todo.popleft(), False
        return None

    def _feed(self) -> None:
        while (chosen := self._next()) is not None:
            entry, alone = chosen
            try:
                submission = self.intake.load(entry)  # read again: only the jobs in flight stay in memory
                job = self.intake.job(entry, submission)
            except Exception as exc:  # as in planning: the entry's error, and the batch goes on
                self.recorder.error(entry, raw_sha256(entry.path), describe_failure(exc))
                continue
            running = Running(entry, submission, self.handed, alone)
            self.handed += 1
            try:
                future = self.executor.submit(job)
            except ExecutorBroken as exc:  # the workers died since the last wait; this job never ran
                if self.restarted:
                    raise GraderError("the executor's workers died and restarting did not bring them back") \
                        from exc
                future = Future()
                future.set_exception(exc)
                running.started = False
                self.in_flight[future] = running
                return
            self.restarted = False
            self.in_flight[future] = running

    def _collect(self, done: set[Future]) -> list[Running]:
        """Record every finished job; the jobs a broken pool failed are returned instead."""
        broken: list[Running] = []
        for future in [f for f in self.in_flight if f in done]:
            running = self.in_flight.pop(future)
            try:
                outcome = future.result()
            except ExecutorBroken:
                broken.append(running)
                continue
            except Exception as exc:  # an executor's own failure, kept per student
                outcome = JobResult(running.entry.student, error=describe_failure(exc))
            self.recorder.outcome(running.entry, running.submission, outcome)
        return broken

    def _recover(self, broken: list[Running]) -> None:
        """After a break: charge the job that was running alone, or isolate those in flight; restart."""
        caught = sorted([*broken, *self.in_flight.values()], key=lambda r: r.order)  # the break fails all
        self.in_flight.clear()
        for running in reversed(caught):
            if not running.started:  # refused, never ran: back where it came from
                (self.suspects if running.alone else self.todo).appendleft(running.entry)
        ran = [r for r in caught if r.started]
        if len(ran) == 1:
            self._charge(ran[0])
        else:
            self.suspects.extendleft(r.entry for r in reversed(ran))
        self.executor.restart()
        self.restarted = True

    def _charge(self, running: Running) -> None:
        student = running.entry.student
        self.attempts[student] = self.attempts.get(student, 0) + 1
        if self.attempts[student] >= MAX_POOL_RESTARTS:
            self.recorder.error(running.entry, running.submission.sha256, "grader error: the grading worker "
                                f"process died {MAX_POOL_RESTARTS} times on this submission")
        else:
            self.suspects.appendleft(running.entry)  # once more, alone
