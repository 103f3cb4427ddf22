"""Staff decisions on recorded grades: score overrides and extensions, checked and audited.

Each function checks the decision against the manifest and the gradebook, then
records it through the gradebook (its only writer), with who made it, when and
why; nothing here edits a grading. The totals before and after an override are
the scores as they stand (render/standing.py), so the audit says what the
decision changed. When the student's HTML report exists where `grade submit`
and `grade batch` write it, it is written again with the grade as it now
stands, the decision named in its notes (the reason included: it is written for
the student).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.errors import OptionsConflict, StaffActionRefused
from grader.core.manifest import Manifest
from grader.core.scoring import check_override
from grader.core.student_ids import check_student_id
from grader.pipeline.record import HtmlReport
from grader.render.standing import Standing, standing_for, standing_of
from grader.storage.gradebook import EVERY_ASSIGNMENT, ExtensionRecord, Gradebook, OverrideRecord

MAX_EXTENSION = timedelta(days=365)


def _reason(reason: str | None) -> str:
    text = " ".join((reason or "").split())
    if not text:
        raise StaffActionRefused("give a reason (--reason \"...\"): every override and extension is audited")
    return text


def _graded(manifest: Manifest, book: Gradebook, student: str) -> Standing:
    standing = standing_for(manifest, book, student)
    if standing is None:
        raise StaffActionRefused(f"{student} has no graded submission of {manifest.id}; grade it first "
                                 f"(grade submit {manifest.id} --student {student} ...)")
    return standing


def refresh_report(assignment: Assignment, book: Gradebook, student: str) -> Path | None:
    """Rewrite the student's report (if one was written at the default place) with the grade as it stands."""
    standing = standing_for(assignment.manifest, book, student)
    if standing is None:
        return None
    course = assignment.course
    path = course.report_path(student, assignment.id)
    if not path.is_file():
        return None
    notes = [f"Course staff changed this grade: {o.task or 'the total'} {o.computed or 0:g} → {o.points:g} "
             f"points ({o.reason})." for o in standing.score.overrides]
    notes += [lowered.student_line() for lowered in standing.lowered]
    if standing.extension:
        notes.append(f"Extension: {standing.extension.describe()} ({standing.extension.reason}); the late "
                     f"policy counts from {standing.score.due_at}.")
    result = replace(standing.record.result, score=standing.score,
                     notes=tuple(standing.record.result.notes) + tuple(notes))
    HtmlReport(path, course.templates_dir).deliver(result, None)
    return path


def after_grading(assignment: Assignment, book: Gradebook, student: str) -> list[str]:
    """Once a new grading of `student` is recorded: one line for staff per override that now lowers what
    it earns (Standing.lowered), with the command that undoes it; with any override active, the student's
    report (at the default place) is written again with the grade as it stands."""
    standing = standing_for(assignment.manifest, book, student)
    if standing is None or not standing.overrides:
        return []
    refresh_report(assignment, book, student)
    return [lowered.staff_line() for lowered in standing.lowered]


@dataclass(frozen=True)
class OverrideRequest:
    """What `grade override` was asked: set `points` on a task (`task_id`) or the total (None), or clear."""

    task_id: str | None
    points: float | None  # None when clearing
    clear: bool = False
    every_task: bool = False  # clearing: every task's override and the total's

    @classmethod
    def from_options(cls, task_id: str | None, points: float | None, total: float | None, clear: bool,
                     every_task: bool) -> OverrideRequest:
        """The request the command's options make, or OptionsConflict saying which do not go together.
        `--points X` without `--task` sets the total (as before `--total` existed)."""
        if clear and (points is not None or total is not None):
            raise OptionsConflict("--clear takes no --points or --total: --clear --task ID ends a task's override, "
                                  "--clear alone the total's")
        if total is not None and (task_id is not None or points is not None):
            raise OptionsConflict("--total X sets the total; a task's points are --task ID --points X")
        if points is not None and task_id is None:
            total, points = points, None
        if task_id is not None and not clear and points is None:
            raise OptionsConflict(f"give the points of task {task_id}: --points X")
        if not clear and points is None and total is None:
            raise OptionsConflict("give --task ID --points X (a task) or --total X (the total) to set an override, "
                                  "or --clear to end one")
        if every_task and not clear:
            raise OptionsConflict("--all-tasks goes with --clear")
        return cls(task_id, total if total is not None else points, clear, every_task)


def apply_override(assignment: Assignment, book: Gradebook, student: str, request: OverrideRequest, reason: str,
                   author: str | None = None) -> list[OverrideRecord]:
    """Carry out `request`: the override set (one record), or those cleared."""
    if request.clear:
        return clear_override(assignment, book, student, reason, task_id=request.task_id,
                              every_task=request.every_task, author=author)
    return [set_override(assignment, book, student, request.points, reason, task_id=request.task_id, author=author)]


def set_override(assignment: Assignment, book: Gradebook, student: str, points: float,
                 reason: str, *, task_id: str | None = None, author: str | None = None) -> OverrideRecord:
    """Set a task's points (`task_id`) or the total (None) for a student's latest grading.

    It replaces an active override of the same task and applies to later gradings too (regrades)."""
    check_student_id(student, "student", fix="pass the student's id")
    manifest = assignment.manifest
    check_override(manifest, task_id, float(points))
    reason = _reason(reason)
    before = _graded(manifest, book, student)
    kept = [o for o in before.overrides if o.task_id != task_id]
    draft = OverrideRecord(0, student, manifest.id, task_id, float(points), reason, author or "", "~", "", 0, 0)
    after = standing_of(manifest, before.record, before.extension, [*kept, draft])
    record = book.add_override(student, manifest.id, task_id, float(points), reason, sha256=before.record.sha256,
                               total_before=before.total, total_after=after.total, author=author)
    refresh_report(assignment, book, student)
    return record


def clear_override(assignment: Assignment, book: Gradebook, student: str, reason: str, *,
                   task_id: str | None = None, every_task: bool = False,
                   author: str | None = None) -> list[OverrideRecord]:
    """Clear the student's active override of `task_id` (None: the total), or all with `every_task`."""
    check_student_id(student, "student", fix="pass the student's id")
    manifest = assignment.manifest
    if task_id is not None and not manifest.has_task(task_id):
        raise StaffActionRefused(f"{manifest.id} has no task {task_id!r} "
                                 f"(tasks: {', '.join(t.id for t in manifest.tasks)})")
    cleared = book.clear_overrides(student, manifest.id, task_id, _reason(reason), author, every_task=every_task)
    if not cleared:
        what = "any task or the total" if every_task else (f"task {task_id!r}" if task_id else "the total")
        raise StaffActionRefused(f"{student} has no active override of {what} in {manifest.id} "
                                 f"(grade overrides {manifest.id} lists them)")
    refresh_report(assignment, book, student)
    return cleared


def extension_length(days: float | None = None, hours: float | None = None) -> timedelta:
    """--days / --hours as one timedelta, within (0, MAX_EXTENSION]."""
    if days is None and hours is None:
        raise StaffActionRefused("give the extension as --days N, --hours N or --until DATE")
    total = timedelta(days=days or 0, hours=hours or 0)
    if not math.isfinite(total.total_seconds()) or not timedelta(0) < total <= MAX_EXTENSION:
        raise StaffActionRefused(f"an extension must be more than 0 and at most {MAX_EXTENSION.days} days")
    return total


@dataclass(frozen=True)
class Granted:
    """An extension just granted, and the one it replaced (the student's own earlier one for this
    assignment, or the roster's for every assignment), which staff are told of with the way back."""

    record: ExtensionRecord
    replaced: ExtensionRecord | None
    due_before: datetime | None  # the due date the replaced extension gave (None: no deadline)
    due_after: datetime | None

    def replacement_line(self, assignment_id: str) -> str | None:
        """One line saying what was replaced and how to undo it; None when nothing was."""
        old = self.replaced
        if old is None:
            return None
        student = self.record.student_id
        if old.assignment_id == EVERY_ASSIGNMENT:
            what = f"the roster's extension for every assignment ({old.describe()}: {old.reason})"
            undo = f"grade extension {assignment_id} {student} --clear --reason \"...\" (the roster's applies again)"
        else:
            what = f"their earlier extension ({old.describe()}: {old.reason}, by {old.author})"
            again = f"--until {old.until}" if old.until is not None else f"--hours {(old.extra_s or 0) / 3600:g}"
            undo = f"grade extension {assignment_id} {student} {again} --reason \"...\""
        shorter = (self.due_before is not None and self.due_after is not None and self.due_after < self.due_before)
        change = (f": {student} now has LESS time ({self.due_after.isoformat()} instead of "
                  f"{self.due_before.isoformat()})" if shorter else "")
        return f"This replaces {what} for {assignment_id}{change}. To undo: {undo}"


def grant_extension(assignment: Assignment, book: Gradebook, student: str, reason: str, *,
                    days: float | None = None, hours: float | None = None, until: datetime | None = None,
                    author: str | None = None) -> Granted:
    """Give a student extra time on one assignment (`days`/`hours` past its deadline) or a deadline of
    their own (`until`, with a time zone). It replaces their earlier one for this assignment and wins
    over the roster's `extension_days`; what it replaced is returned with it (Granted.replaced)."""
    check_student_id(student, "student", fix="pass the student's id")
    manifest = assignment.manifest
    reason = _reason(reason)
    replaced = book.extension_for(student, manifest.id)
    if until is not None:
        if days is not None or hours is not None:
            raise StaffActionRefused("give either --until or --days/--hours, not both")
        if until.tzinfo is None:
            raise StaffActionRefused("--until needs a time zone, e.g. 2026-12-16T23:59:00+00:00")
        record = book.set_extension(student, manifest.id, until=until, reason=reason, author=author)
    else:
        record = book.set_extension(student, manifest.id, extra=extension_length(days, hours), reason=reason,
                                    author=author)
    refresh_report(assignment, book, student)
    due = assignment.due_date
    return Granted(record, replaced, replaced.applied_to(due).due if replaced else due.due,
                   record.applied_to(due).due)


def end_extension(assignment: Assignment, book: Gradebook, student: str, reason: str, *,
                  author: str | None = None) -> None:
    """End the student's extension for this assignment (the roster's, if any, applies again)."""
    check_student_id(student, "student", fix="pass the student's id")
    manifest = assignment.manifest
    if not book.clear_extension(student, manifest.id, _reason(reason), author):
        raise StaffActionRefused(f"{student} has no extension of their own for {manifest.id}"
                                 + (" (theirs comes from the roster's extension_days: change the roster)"
                                    if book.extension_for(student, manifest.id) else ""))
    refresh_report(assignment, book, student)


__all__ = ["EVERY_ASSIGNMENT", "Granted", "after_grading", "clear_override", "end_extension", "extension_length",
           "grant_extension", "refresh_report", "set_override"]
