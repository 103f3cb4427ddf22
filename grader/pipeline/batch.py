"""Grade a class: one folder of submissions, graded in parallel, resumable.

Every entry of the submissions folder is one student: a folder, a `.zip` or
an `.ipynb`, named by the student's id (the stem). An optional
`timestamps.csv` (`student,submitted_at`) gives submission times for the
late policy; without it submissions are undated (never late).

Why the work is split this way:
- A *job* (open_submission + grade, and the student's HTML report) runs in a
  pool worker and returns plain data: the GradeResult as a dict, or an error
  string. Workers never touch the gradebook; the parent alone records, so the
  gradebook module stays the only writer and SQLite sees one writer.
- Workers are reused across jobs (no `max_tasks_per_child`): the trusted
  process imports torch, pytest and the reference once per worker, not once
  per student. Each student still gets a fresh sandbox worker (grade() starts
  it), so reuse never mixes students' code.
- Parallelism sits behind one small interface, `Executor.submit(job) ->
  Future[JobResult]`. `LocalProcessExecutor` uses a process pool on this
  machine; a distributed engine only has to run `run_job` elsewhere (jobs
  carry paths, so it needs the submissions folder on shared storage).
- Resumable by construction: before grading, the parent hashes each entry
  (load_submission is cheap) and skips (student, assignment, sha256) already
  in the gradebook. A killed batch continues where it stopped; a rerun over
  the same files grades nothing and duplicates nothing.
- Stale grades are noticed: each record carries the fingerprint of what
  graded it (grader.core.fingerprint: the manifest, reference/<id>/ with its
  hidden tests and catalogue, the grader's version). An entry whose files
  were graded under another fingerprint is graded again (the earlier grading
  stays in the gradebook's history), so adding a task or fixing a hidden test
  reaches everyone on the next run.
- Each student's extension (the gradebook's, see `grade extension`) travels
  in their job to the late policy.
- A submission that breaks the grader's assumptions (bad zip, unreadable
  notebook, an exception inside the grader) is stored with
  `Gradebook.record_error` and the batch goes on. Errors are retried on the
  next run, so a fixed grader picks them up.
- A grading worker that dies (BrokenProcessPool) fails every job in flight,
  but only the job that broke the pool pays for it: the jobs in flight run
  again one at a time, and a job that breaks the pool alone is retried, then
  recorded as its error after MAX_POOL_RESTARTS; its neighbours are graded.

The engine, one job per part: `_plan` hashes and skips, `_Dispatcher` feeds
the executor and recovers from a broken pool, `_Recorder` writes every record.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import stat
import sys
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from grader.core.compat import parse_iso
from grader.core.course import Course
from grader.core.errors import ClassDataError, GradebookError, GraderError, SubmissionError
from grader.core.fingerprint import grading_fingerprint
from grader.core.manifest import load_manifest
from grader.core.student_ids import check_student_id
from grader.core.text import one_line, printable, storable
from grader.intake.submission import Submission, load_submission
from grader.pipeline.policy import require_sandbox
from grader.storage.gradebook import ExtensionRecord, Gradebook
from grader.storage.roster import read_timestamps

TIMESTAMPS_FILE = "timestamps.csv"
SUBMISSION_SUFFIXES = (".zip", ".ipynb")
DEFAULT_JOBS = min(os.cpu_count() or 1, 8)  # each job is two processes: trusted worker + sandbox
MAX_POOL_RESTARTS = 2  # a job that kills its pool worker this often is recorded as an error


# --------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class GradingJob:
    """One student's submission, as a pool worker (or a remote one) needs it."""

    course_root: str
    assignment_id: str
    path: str  # the folder, .zip or .ipynb
    student: str
    submitted_at: str | None = None  # ISO 8601 with a zone
    report_path: str | None = None  # where the worker writes the student's HTML report
    seed: int | None = None
    allow_weak_sandbox: bool = False  # grade below the course's required sandbox level (recorded)
    protected: tuple[str, ...] = ()  # paths the worker must not read (the gradebook, say)
    mode: str = "submit"  # "check": the public tests only (grade validate proves them too)
    deadline: str | None = None  # ISO 8601: this student's own deadline (an extension to a date)
    extension_s: float | None = None  # this student's extra time past the deadline, in seconds

    def late_policy(self) -> dict:
        """The keyword arguments of grade() that hold this student to their extension."""
        return {"deadline": parse_iso(self.deadline) if self.deadline else None,
                "extension": timedelta(seconds=self.extension_s) if self.extension_s else None}


@dataclass(frozen=True)
class JobResult:
    """What comes back: a GradeResult as a dict (JSON-able), or why there is none."""

    student: str
    result: dict | None = None
    error: str | None = None
    worker_s: float = 0.0


def _describe(exc: BaseException) -> str:
    if isinstance(exc, GraderError):
        return f"{type(exc).__name__}: {exc}"
    frame = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {Path(frame[0].filename).name}:{frame[0].lineno})" if frame else ""
    return f"grader error: {type(exc).__name__}: {str(exc)[:300]}{where}"


def run_job(job: GradingJob, submission: Submission | None = None) -> JobResult:
    """Grade one submission (in whatever process runs it). Never raises.

    The files are read from `job.path`, unless `submission` is given: a remote
    executor reads them where the batch runs and ships them as data."""
    started = time.perf_counter()
    try:
        from grader.pipeline.grading import grade, open_submission

        warnings.simplefilter("ignore")  # nbformat's notes on old notebooks would flood the terminal
        course = Course(Path(job.course_root))
        if submission is None:
            when = parse_iso(job.submitted_at) if job.submitted_at else None
            submission = open_submission(course, job.assignment_id, job.path, student=job.student,
                                         submitted_at=when)
        result = grade(course, job.assignment_id, submission, mode=job.mode, seed=job.seed,
                       allow_weak_sandbox=job.allow_weak_sandbox, protected=tuple(job.protected),
                       **job.late_policy())
        if job.report_path:
            from grader.render.report import write_html

            write_html(result, job.report_path, course.templates_dir)
        return JobResult(job.student, result=result.to_dict(),
                         worker_s=time.perf_counter() - started)
    except Exception as exc:  # anything here is the grader's problem, recorded per student
        return JobResult(job.student, error=_describe(exc), worker_s=time.perf_counter() - started)


def _warm_worker(course_root: str | None, assignment_id: str | None, sandbox_switches: dict[str, str]) -> None:
    """Pool initializer: the batch's sandbox switches (the forkserver keeps the environment it started
    with), then pay the imports (torch, pytest, reference) once per worker."""
    from grader.sandbox.isolation import apply_switches

    apply_switches(sandbox_switches)
    if course_root is None or assignment_id is None:
        return
    try:
        import grader.pipeline.grading  # noqa: F401  (imports torch)
        import grader.render.report  # noqa: F401
        from grader.harness.diagnose import load_reference

        manifest = load_manifest(Path(course_root) / "assignments" / assignment_id / "assignment.toml")
        load_reference(Path(course_root), manifest)
    except Exception:  # a broken reference shows up per job, with its message
        pass


# ---------------------------------------------------------------------- executors
class Executor(Protocol):
    """Where jobs run. Replace LocalProcessExecutor to grade on other machines.

    A future that fails with BrokenProcessPool means the workers died: the batch
    then calls the executor's optional `restart()` and resubmits the jobs that were
    in flight, one at a time.
    """

    def submit(self, job: GradingJob) -> Future[JobResult]: ...

    def shutdown(self, cancel: bool = False) -> None: ...


class LocalProcessExecutor:
    """A pool of reused worker processes on this machine (started on first use).

    The pool uses the forkserver start method on Linux (spawn elsewhere): the
    parent runs a progress thread and holds a SQLite connection, and forking
    a threaded process is unsafe.
    """

    def __init__(self, jobs: int = 1, *, course_root: str | None = None,
                 assignment_id: str | None = None):
        self.jobs = max(1, int(jobs))
        self._initargs = (course_root, assignment_id) if course_root and assignment_id else None
        self._pool: ProcessPoolExecutor | None = None

    def _start(self) -> ProcessPoolExecutor:
        from grader.sandbox.isolation import switches

        method = "forkserver" if sys.platform.startswith("linux") else "spawn"
        initargs = (*(self._initargs or (None, None)), switches())
        return ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context(method),
                                   initializer=_warm_worker, initargs=initargs)

    def submit(self, job: GradingJob) -> Future[JobResult]:
        if self._pool is None:
            self._pool = self._start()
        return self._pool.submit(run_job, job)

    def restart(self) -> None:
        """After a worker died (BrokenProcessPool): a fresh pool for the remaining jobs."""
        self.shutdown(cancel=True)

    def shutdown(self, cancel: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
            self._pool = None


EXECUTORS = ("local", "ray")  # local: a process pool here; ray: actors on a Ray cluster (docs/RAY.md)
DEFAULT_EXECUTOR = "local"


def executor_choice(kind: str | None, address: str | None = None, node_course: str | None = None) -> str:
    """The executor's name (default: local); GraderError for an unknown one, or Ray's options without Ray."""
    kind = kind or DEFAULT_EXECUTOR
    if kind not in EXECUTORS:
        raise GraderError(f"unknown executor {kind!r} (choose one of {', '.join(EXECUTORS)})")
    if kind != "ray" and (address is not None or node_course is not None):
        raise GraderError("--address and --node-course are for --executor ray")
    return kind


def make_executor(kind: str | None, jobs: int | None, course: Course, assignment_id: str, *,
                  address: str | None = None, node_course: str | None = None,
                  allow_weak_sandbox: bool = False) -> Executor:
    """The executor named `kind` (default: local). `jobs`: submissions graded at once (local default:
    DEFAULT_JOBS; Ray default: one per slot of the cluster). `address` and `node_course` are Ray's:
    the cluster to join, and where the course folder is on its nodes (default: the same path)."""
    kind = executor_choice(kind, address, node_course)
    if kind == "local":
        return LocalProcessExecutor(DEFAULT_JOBS if jobs is None else jobs, course_root=str(course.root),
                                    assignment_id=assignment_id)
    from grader.pipeline.ray_executor import RayExecutor

    return RayExecutor(jobs, course_root=str(course.root), assignment_id=assignment_id, address=address,
                       node_course_root=node_course, allow_weak_sandbox=allow_weak_sandbox)


def student_seed(batch_seed: int, student: str) -> int:
    """The input seed of one student's grade in a batch run with `--seed batch_seed`: the same on any
    executor and in any order, and recorded, so `grade submit --seed` reproduces that grade alone."""
    digest = hashlib.sha256(f"{batch_seed}\0{student}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1) + 1


# ------------------------------------------------------------------------ batches
@dataclass(frozen=True)
class Entry:
    student: str  # the entry's name (a folder's name, a file's stem): the student id when valid
    path: Path
    problem: str | None = None  # why this entry cannot be graded (recorded as its error)


@dataclass
class BatchSummary:
    assignment_id: str
    total: int = 0
    graded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already graded with the same files, by the same grading
    stale: list[str] = field(default_factory=list)  # graded again: what grades them changed since (fingerprint)
    errors: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # entries that are not submissions
    scores: dict[str, float] = field(default_factory=dict)
    max_points: float = 0.0
    elapsed_s: float = 0.0
    worker_s: float = 0.0  # sum of the jobs' own durations

    @property
    def mean_score(self) -> float | None:
        return sum(self.scores.values()) / len(self.scores) if self.scores else None


def discover(directory: str | Path, *, strict: bool = True) -> tuple[list[Entry], list[str]]:
    """The submissions in `directory` (student id = the entry's stem), and ignored names.

    Entries are looked at without following links. An entry that cannot be
    graded (a name that is not a valid student id, a symbolic link, something
    that is not a regular file or folder, two entries for one student) raises
    ClassDataError when `strict`; otherwise it is returned with its `problem`
    set, so a batch records it as that entry's error and goes on.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise SubmissionError(f"{directory} is not a folder of submissions")
    entries: list[Entry] = []
    ignored: list[str] = []
    for item in sorted(directory.iterdir()):
        if item.name.startswith((".", "_")) or item.name == TIMESTAMPS_FILE:
            continue
        try:
            mode = os.lstat(item).st_mode
        except OSError as exc:
            entries.append(Entry(item.stem, item, f"SubmissionError: cannot read {printable(item.name)}: "
                                                  f"{exc.strerror}"))
            continue
        submission_file = item.suffix in SUBMISSION_SUFFIXES
        student = item.name if stat.S_ISDIR(mode) else item.stem
        problem = None
        if stat.S_ISLNK(mode):
            if not submission_file and not item.is_dir():
                ignored.append(item.name)
                continue
            problem = (f"SubmissionError: {item.name} is a symbolic link; batch entries must be real "
                       f"folders or files (copy the files in)")
        elif not stat.S_ISDIR(mode):
            if not submission_file:
                ignored.append(item.name)
                continue
            if not stat.S_ISREG(mode):
                problem = f"SubmissionError: {item.name} is not a regular file; hand in a folder, a .zip or an .ipynb"
        if problem is None:
            try:
                check_student_id(student, f"entry {item.name!r}", fix="rename the entry to the student's id")
            except GraderError as exc:
                problem = f"{type(exc).__name__}: {exc}"
        entries.append(Entry(student, item, None if problem is None else one_line(problem, 1000)))
    by_student: dict[str, list[Entry]] = {}
    for entry in entries:
        by_student.setdefault(entry.student, []).append(entry)
    for student, same in by_student.items():
        if len(same) > 1:
            names = " and ".join(printable(e.path.name) for e in same)
            message = f"student {student!r} has two submissions: {names}"
            if strict:
                raise ClassDataError(message)
            entries = [Entry(e.student, e.path, f"ClassDataError: {message}; keep one and run the batch again")
                       if e.student == student else e for e in entries]
    if strict:
        for entry in entries:
            if entry.problem:
                raise ClassDataError(entry.problem)
    return entries, ignored


HASHED_BYTES = 64 * 1024 * 1024  # of an unreadable entry, at most this much is hashed for its key
HASHED_FILES = 10_000


def _raw_sha256(path: Path) -> str:
    """A key for a submission that could not be read (never raises, never follows links).

    A file: the sha256 of its bytes; a folder: of each regular file's relative
    path and bytes, in path order. At most HASHED_BYTES are read, in chunks,
    and at most HASHED_FILES files; whatever cannot be read adds its error.
    """
    digest = hashlib.sha256()
    budget = [HASHED_BYTES]

    def add_file(item: Path) -> None:
        try:
            fd = os.open(item, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            digest.update(f"unreadable: {exc.errno}".encode())
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                digest.update(b"not a regular file")
                return
            while budget[0] > 0:
                chunk = os.read(fd, min(1 << 20, budget[0]))
                if not chunk:
                    break
                budget[0] -= len(chunk)
                digest.update(chunk)
        except OSError as exc:
            digest.update(f"unreadable: {exc.errno}".encode())
        finally:
            os.close(fd)

    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            digest.update(b"link\0" + os.fsencode(os.readlink(path)))
        elif not stat.S_ISDIR(mode):
            add_file(path)
        else:
            found: list[tuple[tuple[str, ...], Path]] = []
            folders, seen = [(path, ())], 0
            while folders and seen <= HASHED_FILES:
                folder, parts = folders.pop()
                with os.scandir(folder) as listing:
                    for entry in listing:  # lazily, so a folder of millions of files costs HASHED_FILES
                        seen += 1
                        if seen > HASHED_FILES:
                            break
                        if entry.is_dir(follow_symlinks=False):
                            folders.append((Path(entry.path), (*parts, entry.name)))
                        elif entry.is_file(follow_symlinks=False):
                            found.append(((*parts, entry.name), Path(entry.path)))
            for parts, item in sorted(found):
                digest.update("/".join(parts).encode("utf-8", "surrogateescape") + b"\0")
                add_file(item)
    except (OSError, ValueError) as exc:
        digest.update(f"unreadable: {type(exc).__name__}".encode())
    return digest.hexdigest()


ProgressCallback = Callable[[str, str, BatchSummary], None]  # (event, student, summary so far)


def _noop(_event: str, _student: str, _summary: BatchSummary) -> None:
    pass


@dataclass(frozen=True)
class _Intake:
    """Reads a batch's entries and turns them into jobs (planning and feeding both read)."""

    course: Course
    assignment_id: str
    files: tuple[str, ...]
    times: dict[str, datetime]
    gradebook_path: str
    write_reports: bool
    allow_weak_sandbox: bool
    seed: int | None = None  # the batch's seed: each student's is derived from it (student_seed)
    fingerprint: str = ""  # what grades this batch (grader.core.fingerprint): older gradings are stale
    extensions: dict[str, ExtensionRecord] = field(default_factory=dict)  # student → their extension

    def load(self, entry: Entry) -> Submission:
        with warnings.catch_warnings():  # nbformat's warnings about old notebooks, once per student
            warnings.simplefilter("ignore")
            return load_submission(entry.path, self.files, student=entry.student,
                                   submitted_at=self.times.get(entry.student))

    def job(self, entry: Entry, submission: Submission) -> GradingJob:
        report = self.course.report_path(entry.student, self.assignment_id) if self.write_reports else None
        return GradingJob(course_root=str(self.course.root), assignment_id=self.assignment_id,
                          path=str(entry.path), student=entry.student,
                          submitted_at=submission.submitted_at.isoformat() if submission.submitted_at else None,
                          report_path=str(report) if report else None,
                          seed=None if self.seed is None else student_seed(self.seed, entry.student),
                          allow_weak_sandbox=self.allow_weak_sandbox, protected=(self.gradebook_path,),
                          **self._late_policy(entry.student))

    def _late_policy(self, student: str) -> dict:
        extension = self.extensions.get(student)
        if extension is None:
            return {}
        return {"deadline": extension.until, "extension_s": extension.extra_s}


class _Recorder:
    """Everything a batch writes: the gradebook (the parent is its only writer), the summary, progress."""

    def __init__(self, gradebook: Gradebook, assignment_id: str, summary: BatchSummary,
                 progress: ProgressCallback, fingerprint: str = ""):
        self.gradebook = gradebook
        self.assignment_id = assignment_id
        self.summary = summary
        self.progress = progress
        self.fingerprint = fingerprint  # what this batch grades with
        self.regrading: dict[str, str] = {}  # student → why their graded files are graded again

    def error(self, entry: Entry, sha256: str, error: str) -> None:
        error = one_line(error, 2000)  # a record is one printable line, whatever the submission did
        student = storable(entry.student)  # an entry named by undecodable bytes is still recorded
        self.gradebook.record_error(student, self.assignment_id, sha256, error)
        self.summary.errors[student] = error
        self.progress("error", entry.student, self.summary)

    def skipped(self, entry: Entry) -> None:
        self.summary.skipped.append(entry.student)
        self.progress("skipped", entry.student, self.summary)

    def stale(self, entry: Entry) -> None:
        """Files graded before, by something that has changed since: they are graded again."""
        self.summary.stale.append(entry.student)
        self.progress("stale", entry.student, self.summary)

    def outcome(self, entry: Entry, submission: Submission, outcome: JobResult) -> None:
        """A finished job: its GradeResult recorded, or its error."""
        self.summary.worker_s += outcome.worker_s
        if outcome.error is not None:
            self.error(entry, submission.sha256, outcome.error)
            return
        from grader.core.records import GradeResult

        result = GradeResult.from_dict(outcome.result)
        if result.submission_sha256 != submission.sha256:
            self.error(entry, submission.sha256,
                       "the files changed while they were being graded; run the batch again")
            return
        if not result.fingerprint:  # an executor whose grader keeps none: what this batch grades with
            result = replace(result, fingerprint=self.fingerprint)
        try:
            self.gradebook.record(result, submission,
                                  replaced_because=self.regrading.get(entry.student, "graded again"))
        except GradebookError:
            raise  # storage itself is broken: no point going on
        except Exception as exc:  # something in this student's result the gradebook cannot hold
            self.error(entry, submission.sha256,
                       f"grader error: the result could not be recorded: {_describe(exc)}")
            return
        self.summary.graded.append(entry.student)
        self.summary.scores[entry.student] = result.score.total
        self.progress("graded", entry.student, self.summary)


def _plan(entries: list[Entry], intake: _Intake, gradebook: Gradebook, recorder: _Recorder,
          force: bool) -> deque[Entry]:
    """Hash every entry first (cheap), so skips are instant and the ETA is honest: what is left to grade.

    An entry that cannot be graded, or that the reader refuses, is recorded as its error here."""
    todo: deque[Entry] = deque()
    for entry in entries:
        if entry.problem:
            recorder.error(entry, _raw_sha256(entry.path), entry.problem)
            continue
        try:
            sha256 = intake.load(entry).sha256
        except Exception as exc:  # whatever a submission makes the reader raise is that entry's error
            recorder.error(entry, _raw_sha256(entry.path), _describe(exc))
            continue
        graded_with = gradebook.graded_fingerprint(entry.student, intake.assignment_id, sha256)
        if graded_with is not None:
            if force:
                recorder.regrading[entry.student] = "regraded with --force"
            elif graded_with == intake.fingerprint:
                recorder.skipped(entry)
                continue
            else:
                recorder.regrading[entry.student] = (
                    "regraded: graded before fingerprints were kept" if not graded_with else
                    "regraded: the manifest, hidden tests, reference, catalogue or grader changed")
                recorder.stale(entry)
        todo.append(entry)
    return todo


@dataclass
class _Running:
    """A job handed to the executor."""

    entry: Entry
    submission: Submission
    order: int  # when it was handed over
    alone: bool  # handed over as the only job in flight (after a break)
    started: bool = True  # False: the executor refused it, its pool already broken


class _Dispatcher:
    """Feeds the executor a bounded window of jobs, records what comes back, recovers from a broken pool.

    When a pool worker dies, the pool fails every job in flight (BrokenProcessPool),
    so the break is pinned on a job only when that job was the one running: it is
    charged an attempt and runs again alone, and after MAX_POOL_RESTARTS attempts
    the death is recorded as its error. When several were running, none is
    charged: the executor restarts and they run again one at a time (a window of
    one) until each has finished alone, graded or charged; then the full window
    resumes.
    """

    def __init__(self, executor: Executor, window: int, intake: _Intake, recorder: _Recorder):
        self.executor = executor
        self.window = window  # jobs in flight: enough to keep workers busy, files not all in memory
        self.intake = intake
        self.recorder = recorder
        self.todo: deque[Entry] = deque()
        self.suspects: deque[Entry] = deque()  # in flight at a break of unknown cause: each runs alone
        self.in_flight: dict[Future, _Running] = {}
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
                self.recorder.error(entry, _raw_sha256(entry.path), _describe(exc))
                continue
            running = _Running(entry, submission, self.handed, alone)
            self.handed += 1
            try:
                future = self.executor.submit(job)
            except BrokenProcessPool as exc:  # the pool broke since the last wait; this job never ran
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

    def _collect(self, done: set[Future]) -> list[_Running]:
        """Record every finished job; the jobs a broken pool failed are returned instead."""
        broken: list[_Running] = []
        for future in [f for f in self.in_flight if f in done]:
            running = self.in_flight.pop(future)
            try:
                outcome = future.result()
            except BrokenProcessPool:
                broken.append(running)
                continue
            except Exception as exc:  # an executor's own failure, kept per student
                outcome = JobResult(running.entry.student, error=_describe(exc))
            self.recorder.outcome(running.entry, running.submission, outcome)
        return broken

    def _recover(self, broken: list[_Running]) -> None:
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
        restart = getattr(self.executor, "restart", None)
        if restart is None:
            raise GraderError("the executor's workers died and it cannot restart")
        restart()
        self.restarted = True

    def _charge(self, running: _Running) -> None:
        student = running.entry.student
        self.attempts[student] = self.attempts.get(student, 0) + 1
        if self.attempts[student] >= MAX_POOL_RESTARTS:
            self.recorder.error(running.entry, running.submission.sha256, "grader error: the grading worker "
                                f"process died {MAX_POOL_RESTARTS} times on this submission")
        else:
            self.suspects.appendleft(running.entry)  # once more, alone


def run_batch(course: Course, assignment_id: str, submissions_dir: str | Path, gradebook: Gradebook, *,
              jobs: int | None = None, force: bool = False, executor: Executor | None = None,
              write_reports: bool = True, progress: ProgressCallback = _noop,
              allow_weak_sandbox: bool = False, executor_kind: str | None = None,
              address: str | None = None, node_course: str | None = None,
              seed: int | None = None) -> BatchSummary:
    """Grade every submission in `submissions_dir` not yet graded; record each result.

    `jobs`: submissions graded at once (default DEFAULT_JOBS, or one per slot of a Ray
    cluster). `executor_kind`: where jobs run when no `executor` is given (make_executor).
    `seed`: fixes every student's input seed (student_seed); default: a fresh one each.
    Raises SandboxRefused before grading anyone when the machines that grade cannot
    give the course's required sandbox level (unless `allow_weak_sandbox`): this host,
    or, on Ray, every node that grading actors start on."""
    started = time.perf_counter()
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    kind = executor_choice(executor_kind, address, node_course)
    if not allow_weak_sandbox and (executor is not None or kind == "local"):
        require_sandbox(course)  # a Ray executor checks each node's level before its first job there
    entries, ignored = discover(submissions_dir, strict=False)
    stamps_path = Path(submissions_dir) / TIMESTAMPS_FILE
    times = read_timestamps(stamps_path) if stamps_path.is_file() else {}
    summary = BatchSummary(assignment_id, total=len(entries), ignored=ignored,
                           max_points=manifest.max_points)
    fingerprint = grading_fingerprint(course, assignment_id)
    intake = _Intake(course, assignment_id, manifest.files, times, str(gradebook.path), write_reports,
                     allow_weak_sandbox, seed=seed, fingerprint=fingerprint,
                     extensions=gradebook.extensions(assignment_id))
    recorder = _Recorder(gradebook, assignment_id, summary, progress, fingerprint)
    todo = _plan(entries, intake, gradebook, recorder, force)
    progress("planned", str(len(todo)), summary)
    own_executor = executor is None
    if executor is None and todo:  # with nothing to grade, no pool is started and no cluster joined
        executor = make_executor(kind, jobs, course, assignment_id, address=address, node_course=node_course,
                                 allow_weak_sandbox=allow_weak_sandbox)
    try:
        if executor is not None:
            slots = getattr(executor, "jobs", None) or (DEFAULT_JOBS if jobs is None else jobs)
            _Dispatcher(executor, max(2, 2 * slots), intake, recorder).run(todo)
    finally:
        if own_executor and executor is not None:
            executor.shutdown(cancel=True)
    summary.elapsed_s = time.perf_counter() - started
    return summary
