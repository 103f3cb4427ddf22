"""A batch's unit of work: one student's submission, graded wherever an executor runs it.

A `GradingJob` carries the assignment (grader.core.assignment: built once where the
batch started, so a pool worker grades with the batch's manifest, settings and sandbox
switches), the submission's path and the student's request (seed, due date, the report's
path). `run_job` grades it through grader.pipeline.record and returns plain data: the
GradeResult as a dict (and the report as text, for an executor whose nodes write
nothing), or the error string. It never raises and never writes the gradebook: the
batch's parent alone records.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from grader.core.assignment import Assignment
from grader.core.compat import parse_iso
from grader.core.due import DueDate
from grader.core.errors import GraderError, SubmissionError
from grader.core.records import GRADER_ERROR, HANDIN_PROBLEM
from grader.intake.submission import Submission

if TYPE_CHECKING:  # grading imports torch: only the processes that grade import it, never a batch's parent
    from grader.pipeline.grading import GradeRequest


@dataclass(frozen=True)
class GradingJob:
    """One student's submission, as a pool worker (or a remote one) needs it."""

    assignment: Assignment
    path: str  # the folder, .zip or .ipynb
    student: str
    submitted_at: str | None = None  # ISO 8601 with a zone
    report_path: str | None = None  # where the student's HTML report goes
    seed: int | None = None
    allow_weak_sandbox: bool = False  # grade below the course's required sandbox level (recorded)
    protected: tuple[str, ...] = ()  # paths the worker must not read (the gradebook, say)
    mode: str = "submit"  # "check": the public tests only (grade validate proves them too)
    due: DueDate | None = None  # this student's due date (default: the manifest's)

    def request(self) -> GradeRequest:
        from grader.pipeline.grading import GradeRequest

        return GradeRequest(mode=self.mode, seed=self.seed, allow_weak_sandbox=self.allow_weak_sandbox,
                            protected=tuple(self.protected), due=self.due)

    def on(self, assignment: Assignment, protected: tuple[str, ...] = ()) -> GradingJob:
        """This job for another process's copy of the assignment (a node's), with more protected paths."""
        return replace(self, assignment=assignment, protected=(*self.protected, *protected))


@dataclass(frozen=True)
class JobResult:
    """What comes back: a GradeResult as a dict (JSON-able), or why there is none."""

    student: str
    result: dict | None = None
    error: str | None = None
    worker_s: float = 0.0
    report_html: str | None = None  # the report as text, when the job asked for it rendered, not written
    error_kind: str = GRADER_ERROR  # with an error: HANDIN_PROBLEM (the files could not be read) or GRADER_ERROR


def failure_kind(exc: BaseException) -> str:
    """Whose problem a failure is: the hand-in's (SubmissionError: an empty folder, a truncated zip...)
    or the grader's (anything else)."""
    return HANDIN_PROBLEM if isinstance(exc, SubmissionError) else GRADER_ERROR


def describe_failure(exc: BaseException) -> str:
    """One line for a grader-side failure (recorded as that student's error)."""
    if isinstance(exc, GraderError):
        return f"{type(exc).__name__}: {exc}"
    frame = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {Path(frame[0].filename).name}:{frame[0].lineno})" if frame else ""
    return f"grader error: {type(exc).__name__}: {str(exc)[:300]}{where}"


def run_job(job: GradingJob, submission: Submission | None = None, *, render_report: bool = False) -> JobResult:
    """Grade one submission (in whatever process runs it). Never raises.

    The files are read from `job.path`, unless `submission` is given: a remote executor
    reads them where the batch runs and ships them as data. The report is written to
    `job.report_path`, or, with `render_report`, returned as text for the batch to write."""
    from grader.intake.submission import open_submission
    from grader.pipeline.record import HtmlReport, RenderedReport, Sink, grade_and_record

    started = time.perf_counter()
    try:
        if submission is None:
            when = parse_iso(job.submitted_at) if job.submitted_at else None
            submission = open_submission(job.assignment, job.path, student=job.student, submitted_at=when)
        templates = job.assignment.course.templates_dir
        rendered = RenderedReport(templates) if render_report and job.report_path else None
        sinks: list[Sink] = [rendered] if rendered else (
            [HtmlReport(Path(job.report_path), templates)] if job.report_path else [])
        result, _ = grade_and_record(job.assignment, submission, job.request(), sinks)
        return JobResult(job.student, result=result.to_dict(), worker_s=time.perf_counter() - started,
                         report_html=rendered.html if rendered else None)
    except Exception as exc:  # anything here is the grader's problem, recorded per student
        return JobResult(job.student, error=describe_failure(exc), worker_s=time.perf_counter() - started,
                         error_kind=failure_kind(exc))


def warm_process(assignment: Assignment | None) -> None:
    """Pay the imports of grading (torch, pytest, the report, the reference) once per process."""
    if assignment is not None:  # its workers fork from a template: start it first, so that it imports torch
        from grader.sandbox.template import Zygote  # while this process imports the rest

        Zygote.warm(assignment.settings.sandbox.uid_range, assignment.switches)
    from grader.harness.reference import load_reference
    from grader.render import report  # noqa: F401

    if assignment is None:
        return
    try:
        load_reference(assignment)
    except Exception:  # a broken reference shows up per job, with its message
        pass
