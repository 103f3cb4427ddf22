"""Each student's grade as it stands: the latest graded submission, with the late policy of the
student's current extension and the staff overrides applied (grader.core.scoring.final_score).

The class report, the exports and the staff commands all read grades through here, so an
extension granted or an override set after grading counts everywhere at once, and nothing
is computed twice. The recorded grading itself is never changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from grader.core.compat import UTC, parse_iso
from grader.core.manifest import Manifest
from grader.core.records import Score
from grader.core.scoring import final_score
from grader.storage.gradebook import ExtensionRecord, Gradebook, OverrideRecord, SubmissionRecord, due_with


@dataclass(frozen=True)
class Standing:
    """One student's latest record and the score that counts for it today."""

    record: SubmissionRecord
    score: Score  # the final score (late policy with the extension, then overrides)
    extension: ExtensionRecord | None
    overrides: tuple[OverrideRecord, ...]  # the active ones

    @property
    def student(self) -> str:
        return self.record.student_id

    @property
    def total(self) -> float:
        return self.score.total

    @property
    def lowered(self) -> tuple[Lowered, ...]:
        """The active overrides set before the grading that counts now and below what it earns: a
        decision about other files (or an earlier grading) that now takes points away."""
        by_task = {o.task_id: o for o in self.overrides}
        found = []
        for applied in self.score.overrides:
            record = by_task.get(applied.task)
            if record is None or applied.computed is None or applied.points >= applied.computed:
                continue
            if record.sha256 != self.record.sha256 or _moment(record.created_at) < _moment(self.record.graded_at):
                found.append(Lowered(record, applied.computed))
        return tuple(found)


def _moment(text: str) -> datetime:
    """An ISO time; one written without a zone is UTC (as the gradebook writes them)."""
    moment = parse_iso(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Lowered:
    """An override below what the grading that counts earns (Standing.lowered)."""

    override: OverrideRecord
    earned: float  # what that grading computed for the task (or the total)

    @property
    def what(self) -> str:
        return f"task {self.override.task_id}" if self.override.task_id else "the total"

    def staff_line(self) -> str:
        """For staff: what is lowered, by whose decision, and the command that undoes it."""
        o = self.override
        task = f" --task {o.task_id}" if o.task_id else ""
        return (f"{o.student_id}: the override of {self.what} ({o.points:g}, set {o.created_at} by {o.author}: "
                f"{o.reason}) is below the {self.earned:g} the latest grading earns, so the grade counts "
                f"{o.points:g}. To undo: grade override {o.assignment_id} {o.student_id}{task} --clear "
                f"--reason \"...\"")

    def student_line(self) -> str:
        """For the student's report: the same, in their words."""
        return (f"A staff decision on an earlier grading sets {self.what} to {self.override.points:g} points, "
                f"below the {self.earned:g} this grading earns; ask course staff to review it.")


def standing_of(manifest: Manifest, record: SubmissionRecord, extension: ExtensionRecord | None,
                overrides: list[OverrideRecord] | tuple[OverrideRecord, ...]) -> Standing:
    """`record`'s final score under `extension` and `overrides`."""
    submitted = parse_iso(record.submitted_at) if record.submitted_at else None
    score = final_score(manifest, record.result.score, submitted, due=due_with(manifest, extension),
                        overrides=[o.as_override() for o in overrides])
    return Standing(record, score, extension, tuple(overrides))


def standings(manifest: Manifest, book: Gradebook) -> dict[str, Standing]:
    """student → Standing, for every student with a graded submission of the assignment."""
    extensions = book.extensions(manifest.id)
    overrides: dict[str, list[OverrideRecord]] = {}
    for override in book.overrides(manifest.id):
        overrides.setdefault(override.student_id, []).append(override)
    return {student: standing_of(manifest, record, extensions.get(student), overrides.get(student, []))
            for student, record in book.latest(manifest.id).items()}


def standing_for(manifest: Manifest, book: Gradebook, student: str) -> Standing | None:
    """One student's Standing (None when they have no graded submission of the assignment)."""
    record = book.latest_for(manifest.id, student)
    if record is None:
        return None
    return standing_of(manifest, record, book.extension_for(student, manifest.id),
                       book.overrides(manifest.id, student))


@dataclass(frozen=True)
class ClassList:
    """Who a class report or an export lists: the roster's students (by default), or, with everyone,
    every student graded for the assignment too; with no roster imported, the graded students."""

    students: tuple[str, ...]  # the ids listed, sorted
    info: dict[str, dict]  # id → {"name", "email", "section"} (blank for an id the roster does not know)
    off_roster: tuple[str, ...]  # graded, or recorded with an error, for the assignment but not on the roster
    has_roster: bool
    everyone: bool

    def knows(self, student: str) -> bool:
        return student in self.info

    def left_out(self) -> tuple[str, ...]:
        """The off-roster ids this listing leaves out (none with `everyone`, or without a roster)."""
        return () if self.everyone or not self.has_roster else self.off_roster


def class_list(book: Gradebook, assignment_id: str, graded: set[str] | dict, *, everyone: bool = False) -> ClassList:
    """The class list for `assignment_id`, given the ids `graded` for it (see ClassList). Ids recorded
    for other assignments only are never listed; ids with a batch error for this one count as graded
    here when they are not on the roster, so an entry misnamed in a batch shows up."""
    roster = {entry.id: {"name": entry.name, "email": entry.email, "section": entry.section}
              for entry in book.roster()}
    recorded = set(graded) | {error["student"] for error in book.errors(assignment_id)}
    off_roster = tuple(sorted(recorded - set(roster))) if roster else ()
    listed = set(roster) | (set(graded) if everyone or not roster else set())
    return ClassList(students=tuple(sorted(listed)), info=roster, off_roster=off_roster,
                     has_roster=bool(roster), everyone=everyone)
