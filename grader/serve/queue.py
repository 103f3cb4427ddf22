"""The server's view of the gradebook: one connection behind a lock, and what the pages ask of the queue.

The server is the gradebook's one writer (grader.storage.gradebook writes; this module only calls it):
the pages' threads and the runner's share one connection, one call at a time. Here too: a job's place in
the queue and its estimated wait (the jobs ahead, spread over the executor's slots, times the recent jobs'
median), and a student's rate limit as it stands (uploads used in the window, when the next frees up).
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from grader.core.compat import UTC, parse_iso
from grader.core.settings import ServeSettings
from grader.storage.gradebook import Gradebook, JobRecord

DEFAULT_JOB_S = 30.0  # a job's expected length before any has finished (assignment 3 on CPUs: about 45 s)
T = TypeVar("T")


@dataclass(frozen=True)
class Place:
    """Where a job stands: its state, the jobs ahead of it and the estimated wait in seconds."""

    state: str
    ahead: int
    wait_s: float | None  # None once it runs or has finished


@dataclass(frozen=True)
class RateStatus:
    """A student's uploads for one assignment within the window."""

    used: int
    allowed: int
    window_minutes: int
    next_free: datetime | None  # when an upload frees up again (None: some are left)

    @property
    def left(self) -> int:
        return max(0, self.allowed - self.used)


class ServerBook:
    """The gradebook at `path`, shared by the server's threads (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._book = Gradebook(self.path, threads=True)
        self._lock = threading.Lock()
        self.changed = threading.Condition()  # notified when a job is queued or changes state

    @contextmanager
    def book(self) -> Iterator[Gradebook]:
        """The gradebook, for one call at a time."""
        with self._lock:
            yield self._book

    def call(self, what: Callable[[Gradebook], T]) -> T:
        with self.book() as book:
            return what(book)

    def notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def close(self) -> None:
        with self._lock:
            self._book.close()

    def place(self, job: JobRecord, slots: int) -> Place:
        """`job`'s place in its queue and its estimated wait with `slots` gradings at once."""
        if job.state != "queued":
            return Place(job.state, 0, None)
        with self.book() as book:
            ahead = book.jobs_ahead(job)
            running = book.job_counts(job.tier).get("running", 0)
            recent = book.recent_job_seconds(job.tier)
        each = statistics.median(recent) if recent else DEFAULT_JOB_S
        rounds = math.ceil((ahead + running + 1) / max(1, slots))
        return Place("queued", ahead, rounds * each)

    def rate(self, student: str, assignment_id: str, settings: ServeSettings,
             now: datetime | None = None) -> RateStatus:
        """The student's uploads for `assignment_id` within the window, as it stands at `now`."""
        now = now or datetime.now(UTC)
        window = timedelta(minutes=settings.window_minutes)
        since = (now - window).isoformat(timespec="microseconds")
        times = self.call(lambda book: book.uploads_since(student, assignment_id, since))
        used = len(times)
        next_free = parse_iso(times[used - settings.uploads_per_window]) + window \
            if used >= settings.uploads_per_window else None
        return RateStatus(used, settings.uploads_per_window, settings.window_minutes, next_free)
