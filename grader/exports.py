"""Grades out of the gradebook: a CSV for spreadsheets and LMSs, or one
Gradescope results.json per student.

Each student counts once, with their latest graded submission. The CSV also
lists every known student (roster) who has none, with blank scores, so a
missing submission is visible rather than silently absent.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.course import Course
from grader.errors import ClassDataError
from grader.gradebook import Gradebook
from grader.manifest import load_manifest
from grader.results import gradescope_results, write_json_atomic

FORMATS = ("csv", "gradescope")


def csv_rows(course: Course, assignment_id: str, book: Gradebook) -> tuple[list[str], list[list]]:
    """Header and one row per student (roster students without a submission too)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    latest = book.latest(assignment_id)
    known = {s["id"]: s for s in book.students()}
    header = ["student", "name", "email", "total", "max",
              *[task.id for task in manifest.tasks],
              "late_penalty", "late_days", "submitted_at", "graded_at"]
    rows = []
    for student in sorted(set(known) | set(latest)):
        info = known.get(student, {})
        record = latest.get(student)
        if record is None:
            rows.append([student, info.get("name") or "", info.get("email") or "", "",
                         f"{manifest.max_points:g}", *[""] * len(manifest.tasks), "", "", "", ""])
            continue
        score = record.result.score
        earned = {t.task_id: t.earned for t in score.tasks}
        rows.append([student, info.get("name") or "", info.get("email") or "", f"{score.total:g}",
                     f"{score.max_points:g}",
                     *[f"{earned[t.id]:g}" if t.id in earned else "" for t in manifest.tasks],
                     f"{score.late_penalty:g}", score.late_days, record.submitted_at or "",
                     record.graded_at])
    return header, rows


def export_csv(course: Course, assignment_id: str, book: Gradebook) -> str:
    header, rows = csv_rows(course, assignment_id, book)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def export_gradescope(course: Course, assignment_id: str, book: Gradebook, out_dir: str | Path) -> list[Path]:
    """out_dir/STUDENT/results.json for every graded student."""
    course.assignment_dir(assignment_id)  # an unknown assignment is an error, not an empty folder
    written = []
    for student, record in sorted(book.latest(assignment_id).items()):
        if Path(student).name != student or student in (".", ".."):
            raise ClassDataError(f"student id {student!r} cannot be used as a folder name")
        written.append(write_json_atomic(Path(out_dir) / student / "results.json",
                                         gradescope_results(record.result)))
    return written
