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
- Parallelism sits behind one protocol, grader.pipeline.executor.Executor
  (submit, restart, slots, shutdown). grader.pipeline.local_pool runs jobs in a
  process pool on this machine; grader.pipeline.ray_executor on a Ray cluster.
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
- A grading worker that dies fails every job in flight, but only the job that
  broke the executor pays for it (grader.pipeline.dispatch).

The engine, one job per part: grader.pipeline.discovery finds the entries, `plan`
hashes and skips, grader.pipeline.dispatch feeds the executor and recovers from a
break, `ClassRecorder` writes every record (through grader.pipeline.record's gradebook
sink), grader.pipeline.jobs runs each job where the executor runs it.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.errors import GradebookError, GraderError
from grader.core.records import GRADER_ERROR, HANDIN_PROBLEM
from grader.core.text import one_line, storable
from grader.intake.submission import Submission, open_submission
from grader.pipeline.discovery import TIMESTAMPS_FILE, Entry, discover, raw_sha256
from grader.pipeline.dispatch import Dispatcher
from grader.pipeline.executor import Executor
from grader.pipeline.jobs import GradingJob, JobResult, describe_failure, failure_kind
from grader.pipeline.local_pool import LocalProcessExecutor
from grader.pipeline.policy import require_sandbox
from grader.pipeline.record import GradebookRow
from grader.pipeline.staff import after_grading
from grader.render.standing import standing_for
from grader.storage.gradebook import ExtensionRecord, Gradebook, due_with
from grader.storage.roster import read_timestamps

FORCED = "regraded with --force"  # why files already graded are graded again when the batch is forced
DEFAULT_JOBS = min(os.cpu_count() or 1, 8)  # each job is two processes: trusted worker + sandbox


def student_seed(batch_seed: int, student: str) -> int:
    """The input seed of one student's grade in a batch run with `--seed batch_seed`: the same on any
    executor and in any order, and recorded, so `grade submit --seed` reproduces that grade alone."""
    digest = hashlib.sha256(f"{batch_seed}\0{student}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1) + 1


# ------------------------------------------------------------------------ batches
@dataclass
class BatchSummary:
    assignment_id: str
    total: int = 0
    graded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already graded with the same files, by the same grading
    stale: list[str] = field(default_factory=list)  # graded again: what grades them changed since (fingerprint)
    errors: dict[str, str] = field(default_factory=dict)  # student → why not graded (hand-in problems too)
    error_kinds: dict[str, str] = field(default_factory=dict)  # student → HANDIN_PROBLEM or GRADER_ERROR
    ignored: list[str] = field(default_factory=list)  # entries that are not submissions
    scores: dict[str, float] = field(default_factory=dict)
    max_points: float = 0.0
    elapsed_s: float = 0.0
    worker_s: float = 0.0  # sum of the jobs' own durations
    lines: list[StudentLine] = field(default_factory=list)  # one per entry, by student id (batch_lines)

    def errors_of(self, kind: str) -> dict[str, str]:
        """The errors of one kind (HANDIN_PROBLEM, GRADER_ERROR)."""
        return {s: e for s, e in self.errors.items() if self.error_kinds.get(s, GRADER_ERROR) == kind}

    @property
    def mean_score(self) -> float | None:
        return sum(self.scores.values()) / len(self.scores) if self.scores else None


@dataclass(frozen=True)
class StudentLine:
    """One entry of a batch run, for the table that ends it: the grade as it stands after the run and
    what changed since the grading that counted before it."""

    student: str
    outcome: str  # graded | regraded | skipped | error
    total: float | None  # as it stands now (late policy, extension, overrides); None: no grade at all
    late_days: int = 0
    late_penalty: float = 0.0
    change: str = ""  # in words: first grading, new files (40 → 80), unchanged, not graded: why...


ProgressCallback = Callable[[str, str, BatchSummary], None]  # (event, student, summary so far)


def _noop(_event: str, _student: str, _summary: BatchSummary) -> None:
    pass


@dataclass(frozen=True)
class ClassJobs:
    """Reads a batch's entries and turns them into jobs (planning and feeding both read)."""

    assignment: Assignment
    times: dict[str, datetime]
    gradebook_path: str
    write_reports: bool
    allow_weak_sandbox: bool
    seed: int | None = None  # the batch's seed: each student's is derived from it (student_seed)
    extensions: dict[str, ExtensionRecord] = field(default_factory=dict)  # student → their extension

    def load(self, entry: Entry) -> Submission:
        return open_submission(self.assignment, entry.path, student=entry.student,
                               submitted_at=self.times.get(entry.student))

    def job(self, entry: Entry, submission: Submission) -> GradingJob:
        course = self.assignment.course
        report = course.report_path(entry.student, self.assignment.id) if self.write_reports else None
        return GradingJob(assignment=self.assignment, path=str(entry.path), student=entry.student,
                          submitted_at=submission.submitted_at.isoformat() if submission.submitted_at else None,
                          report_path=str(report) if report else None,
                          seed=None if self.seed is None else student_seed(self.seed, entry.student),
                          allow_weak_sandbox=self.allow_weak_sandbox, protected=(self.gradebook_path,),
                          due=due_with(self.assignment.manifest, self.extensions.get(entry.student)))


class ClassRecorder:
    """Everything a batch writes: the gradebook (the parent is its only writer), the summary, progress."""

    def __init__(self, gradebook: Gradebook, assignment_id: str, summary: BatchSummary,
                 progress: ProgressCallback, fingerprint: str = ""):
        self.gradebook = gradebook
        self.assignment_id = assignment_id
        self.summary = summary
        self.progress = progress
        self.fingerprint = fingerprint  # what this batch grades with
        self.regrading: dict[str, str] = {}  # student → why their graded files are graded again
        self.before: dict[str, float] = {}  # student → their total as it stood before this run
        self.before_tasks: dict[str, dict[str, float]] = {}  # student → task → points graded before this run
        self.found_in: dict[str, str] = {}  # student → the folder inside their entry that was graded

    def error(self, entry: Entry, sha256: str, error: str, kind: str = GRADER_ERROR) -> None:
        error = one_line(error, 2000)  # a record is one printable line, whatever the submission did
        student = storable(entry.student)  # an entry named by undecodable bytes is still recorded
        self.gradebook.record_error(student, self.assignment_id, sha256, error, kind)
        self.summary.errors[student] = error
        self.summary.error_kinds[student] = kind
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
            self.error(entry, submission.sha256, outcome.error, outcome.error_kind)
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
            GradebookRow(self.gradebook, self.regrading.get(entry.student, "graded again")).deliver(result, submission)
        except GradebookError:
            raise  # storage itself is broken: no point going on
        except Exception as exc:  # something in this student's result the gradebook cannot hold
            self.error(entry, submission.sha256,
                       f"grader error: the result could not be recorded: {describe_failure(exc)}")
            return
        self.summary.graded.append(entry.student)
        self.summary.scores[entry.student] = result.score.total
        self.progress("graded", entry.student, self.summary)


def plan(entries: list[Entry], intake: ClassJobs, gradebook: Gradebook, recorder: ClassRecorder,
          force: bool) -> deque[Entry]:
    """Hash every entry first (cheap), so skips are instant and the ETA is honest: what is left to grade.

    An entry that cannot be graded, or that the reader refuses, is recorded as its error here."""
    todo: deque[Entry] = deque()
    manifest = intake.assignment.manifest
    for entry in entries:
        earlier = standing_for(manifest, gradebook, entry.student) if not entry.problem else None
        if earlier is not None:
            recorder.before[entry.student] = earlier.total
            recorder.before_tasks[entry.student] = {t.task_id: t.earned for t in earlier.record.result.score.tasks}
        if entry.problem:  # the entry itself: misnamed, a link, not a file or folder
            recorder.error(entry, raw_sha256(entry.path), entry.problem, HANDIN_PROBLEM)
            continue
        try:
            submission = intake.load(entry)
        except Exception as exc:  # whatever a submission makes the reader raise is that entry's error
            recorder.error(entry, raw_sha256(entry.path), describe_failure(exc), failure_kind(exc))
            continue
        sha256 = submission.sha256
        if submission.found_in:
            recorder.found_in[entry.student] = submission.found_in
        graded_with = gradebook.graded_fingerprint(entry.student, intake.assignment.id, sha256)
        if graded_with is not None:
            if force:
                recorder.regrading[entry.student] = FORCED
            elif graded_with == intake.assignment.fingerprint:
                recorder.skipped(entry)
                continue
            else:
                recorder.regrading[entry.student] = (
                    "regraded: graded before fingerprints were kept" if not graded_with else
                    "regraded: the manifest, hidden tests, reference, catalogue or grader changed")
                recorder.stale(entry)
        todo.append(entry)
    return todo


def batch_lines(assignment: Assignment, gradebook: Gradebook, summary: BatchSummary,
                recorder: ClassRecorder) -> list[StudentLine]:
    """One StudentLine per entry of the run, by student id (see StudentLine)."""
    manifest = assignment.manifest
    outcomes = {**{s: "skipped" for s in summary.skipped}, **{s: "graded" for s in summary.graded},
                **{s: "regraded" for s in summary.graded if s in recorder.regrading},
                **{s: "error" for s in summary.errors}}
    lines = []
    for student, outcome in sorted(outcomes.items()):
        standing = standing_for(manifest, gradebook, student) if outcome != "error" or student in recorder.before \
            else None
        before = recorder.before.get(student)
        now = standing.total if standing else None
        if outcome == "error":
            handin = summary.error_kinds.get(student) == HANDIN_PROBLEM
            change = f"{'hand-in could not be read' if handin else 'not graded'}: {summary.errors[student]}"
            if before is not None:
                change += f" (the earlier grade, {before:g}, still counts)"
        elif outcome == "skipped":
            change = "unchanged: same files, same grading"
        else:
            why = ("first grading" if before is None else
                   FORCED if recorder.regrading.get(student) == FORCED else
                   "regraded: the grading changed" if outcome == "regraded" else "new files")
            change = why if before is None else f"{why}: {before:g} → {now:g}"
            if before is not None and standing and student in recorder.before_tasks:
                change += task_changes(manifest, recorder.before_tasks[student], standing.record.result.score)
        if student in recorder.found_in:
            change += f"; its files were in the folder {recorder.found_in[student]}/ inside the entry"
        if standing and outcome in ("graded", "regraded"):
            change += "".join(f"; {lowered.staff_line()}" for lowered in standing.lowered)
        score = standing.score if standing else None
        lines.append(StudentLine(student, outcome, now, score.late_days if score else 0,
                                 score.late_penalty if score else 0.0, change))
    return lines


def task_changes(manifest, before: dict[str, float], after) -> str:
    """What a new grading changed, task by task, for a batch row ('; only the quiz changed: quiz 10 → 20',
    '; changed: softmax 5 → 20', '; no task's points changed'), from the points graded (before overrides)."""
    kinds = {task.id: task.kind for task in manifest.tasks}
    moved = [(t.task_id, before.get(t.task_id, 0.0), t.earned) for t in after.tasks
             if before.get(t.task_id, 0.0) != t.earned]
    if not moved:
        return "; no task's points changed"
    text = ", ".join(f"{task} {old:g} → {new:g}" for task, old, new in moved)
    if all(kinds.get(task) == "quiz" for task, _, _ in moved):
        return f"; only the quiz changed: {text}"
    return f"; changed: {text}"


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


def make_executor(kind: str | None, jobs: int | None, assignment: Assignment, *, address: str | None = None,
                  node_course: str | None = None, allow_weak_sandbox: bool = False) -> Executor:
    """The executor named `kind` (default: local). `jobs`: submissions graded at once (local default:
    DEFAULT_JOBS; Ray default: one per slot of the cluster). `address` and `node_course` are Ray's:
    the cluster to join, and where the course folder is on its nodes (default: the same path)."""
    kind = executor_choice(kind, address, node_course)
    if kind == "local":
        return LocalProcessExecutor(DEFAULT_JOBS if jobs is None else jobs, assignment=assignment)
    from grader.pipeline.ray_executor import RayExecutor

    return RayExecutor(jobs, assignment=assignment, address=address, node_course_root=node_course,
                       allow_weak_sandbox=allow_weak_sandbox)


def run_batch(assignment: Assignment, submissions_dir: str | Path, gradebook: Gradebook, *,
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
    kind = executor_choice(executor_kind, address, node_course)
    if not allow_weak_sandbox and (executor is not None or kind == "local"):
        require_sandbox(assignment)  # a Ray executor checks each node's level before its first job there
    entries, ignored = discover(submissions_dir, strict=False)
    stamps_path = Path(submissions_dir) / TIMESTAMPS_FILE
    times = read_timestamps(stamps_path) if stamps_path.is_file() else {}
    summary = BatchSummary(assignment.id, total=len(entries), ignored=ignored,
                           max_points=assignment.manifest.max_points)
    intake = ClassJobs(assignment, times, str(gradebook.path), write_reports, allow_weak_sandbox, seed=seed,
                    extensions=gradebook.extensions(assignment.id))
    recorder = ClassRecorder(gradebook, assignment.id, summary, progress, assignment.fingerprint)
    todo = plan(entries, intake, gradebook, recorder, force)
    progress("planned", str(len(todo)), summary)
    own_executor = executor is None
    if executor is None and todo:  # with nothing to grade, no pool is started and no cluster joined
        executor = make_executor(kind, jobs, assignment, address=address, node_course=node_course,
                                 allow_weak_sandbox=allow_weak_sandbox)
    try:
        if executor is not None:
            Dispatcher(executor, max(2, 2 * executor.slots), intake, recorder).run(todo)
    finally:
        if own_executor and executor is not None:
            executor.shutdown(cancel=True)
    if write_reports:  # a report the job wrote shows the grading; with staff decisions, the grade as it stands
        for student in summary.graded:
            after_grading(assignment, gradebook, student)
    summary.lines = batch_lines(assignment, gradebook, summary, recorder)
    summary.elapsed_s = time.perf_counter() - started
    return summary
