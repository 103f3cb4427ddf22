"""One grade and where it goes: `grade_and_record` and its sinks.

Every grade is put together by `grade_and_record`, whoever asks: `grade submit` (through
`submit_and_record`, which opens the gradebook once: the student's due date, then the row),
`grade check` (no sink but the terminal), a batch job (in a pool worker or a Ray actor, which
write or render the report; the batch's parent delivers the gradebook row, since the parent
alone writes the gradebook), the Gradescope autograder (results.json) and `grade replay`.
What happens to a result is a list of sinks:

* `ResultsJson`: Gradescope's results.json;
* `HtmlReport`: the student's report, written;
* `RenderedReport`: the student's report, kept as text (to send to another machine);
* `GradebookRow`: the gradebook's record (the gradebook is the only writer of storage).

Files are written whole or not at all (grader.core.files.write_atomic).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from grader.core.assignment import Assignment
from grader.core.files import write_atomic
from grader.core.manifest import Manifest
from grader.core.records import GradeResult
from grader.intake.submission import Submission
from grader.render.report import render_html
from grader.render.results import gradescope_results, results_text
from grader.storage.gradebook import Gradebook

if TYPE_CHECKING:  # grading imports torch: a batch's parent records with these sinks and never grades
    from grader.pipeline.grading import GradeRequest


class Sink(Protocol):
    """Where a graded result goes; `deliver` says where it went, in a few words (or '')."""

    def deliver(self, result: GradeResult, submission: Submission) -> str: ...


@dataclass(frozen=True)
class ResultsJson:
    """Gradescope's results.json at `path`."""

    path: Path
    manifest: Manifest | None = None

    def deliver(self, result: GradeResult, submission: Submission) -> str:
        write_atomic(self.path, results_text(gradescope_results(result, self.manifest)))
        return f"results.json: {self.path}"


@dataclass(frozen=True)
class HtmlReport:
    """The student's HTML report at `path`, from the course's templates."""

    path: Path
    templates: Path

    def deliver(self, result: GradeResult, submission: Submission) -> str:
        write_atomic(self.path, render_html(result, self.templates))
        return f"report: {self.path}"


@dataclass
class RenderedReport:
    """The student's HTML report as text (`html`), for a machine that does not write it itself."""

    templates: Path
    html: str | None = field(default=None, init=False)

    def deliver(self, result: GradeResult, submission: Submission) -> str:
        self.html = render_html(result, self.templates)
        return ""


@dataclass(frozen=True)
class GradebookRow:
    """The gradebook's record of the grading (an earlier grading of the same files is kept in its history,
    replaced for `replaced_because`). `book`: an open gradebook, or the path of one to open (and create)
    only now, once there is a grade to record."""

    book: Gradebook | Path
    replaced_because: str = "graded again"

    def deliver(self, result: GradeResult, submission: Submission) -> str:
        with ExitStack() as stack:
            book = self.book if isinstance(self.book, Gradebook) else stack.enter_context(Gradebook(self.book))
            book.record(result, submission, replaced_because=self.replaced_because)
            return f"recorded in {book.path}"


def deliver(result: GradeResult, submission: Submission, sinks: Sequence[Sink]) -> list[str]:
    """Send `result` to every sink, in order; what each said."""
    return [said for sink in sinks if (said := sink.deliver(result, submission))]


def grade_and_record(assignment: Assignment, submission: Submission, request: GradeRequest,
                     sinks: Sequence[Sink] = (), progress: Callable[[str], None] | None = None,
                     notes: Sequence[str] = ()) -> tuple[GradeResult, list[str]]:
    """Grade one submission and deliver the result to `sinks` (`notes`, said by whoever asked, added to the
    result first); the result and what the sinks said."""
    from grader.pipeline.grading import grade

    result = grade(assignment, submission, request, progress)
    if notes:
        result = replace(result, notes=(*result.notes, *notes))
    return result, deliver(result, submission, sinks)


def submit_and_record(assignment: Assignment, submission: Submission, request: GradeRequest, *, report: Path,
                      gradebook: Path, results: Path | None = None, record: bool = True,
                      progress: Callable[[str], None] | None = None,
                      after: Callable[[Gradebook], list[str]] | None = None
                      ) -> tuple[GradeResult, list[str], list[str]]:
    """`grade submit`'s official grade: the gradebook at `gradebook` opened once, for the student's due date
    (their extension applied) and, with `record`, the row; the HTML report at `report`, results.json at
    `results` if given. An absent gradebook is created only when there is a grade to record (not for a
    refused grading, nor without `record`). The worker may read neither file (`request.protected`). The
    result, what the sinks said, and what `after` says of the recorded gradebook (the staff's warnings)."""
    request = replace(request, protected=(*request.protected, str(gradebook), str(report)))
    with ExitStack() as stack:
        book = stack.enter_context(Gradebook(gradebook)) if Path(gradebook).is_file() else None
        due = book.due_date(submission.student, assignment.manifest) if book else assignment.due_date
        sinks: list[Sink] = [*([ResultsJson(results, assignment.manifest)] if results else []),
                             HtmlReport(report, assignment.course.templates_dir),
                             *([GradebookRow(book or Path(gradebook))] if record else [])]
        result, said = grade_and_record(assignment, submission, replace(request, due=due), sinks, progress)
        warnings = after(book) if after is not None and record and book is not None else []
        return result, said, warnings
