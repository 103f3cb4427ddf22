"""Grades out of the gradebook: a CSV for spreadsheets and LMSs, or one
Gradescope results.json per student.

Each student counts once, with their latest graded submission. The CSV also
lists every known student (roster) who has none, with blank scores, so a
missing submission is visible rather than silently absent.

A spreadsheet runs a cell that starts with `=`, `+`, `-`, `@`, a tab or a
carriage return as a formula, so every text cell (ids, names, emails, times:
anything a roster or a student controls) goes through `spreadsheet_text`,
which strips control characters and puts a single quote before such a
start. Numbers the grader formats itself are written as they are.
"""

from __future__ import annotations

import csv
import io
import os
import secrets
import stat
from pathlib import Path

from grader.core.course import Course
from grader.core.errors import GraderError
from grader.core.manifest import load_manifest
from grader.core.student_ids import check_student_id
from grader.core.text import printable
from grader.render.results import gradescope_results, write_json_atomic
from grader.storage.gradebook import Gradebook

FORMATS = ("csv", "gradescope")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: object) -> str:
    """A text cell a spreadsheet shows as text: printable, and quoted when it would start a formula."""
    text = printable("" if value is None else str(value))
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_rows(course: Course, assignment_id: str, book: Gradebook) -> tuple[list[str], list[list]]:
    """Header and one row per student (roster students without a submission too)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    latest = book.latest(assignment_id)
    known = {s["id"]: s for s in book.students()}
    header = [spreadsheet_text(h) for h in ["student", "name", "email", "total", "max",
                                            *[task.id for task in manifest.tasks],
                                            "late_penalty", "late_days", "submitted_at", "graded_at"]]
    rows = []
    for student in sorted(set(known) | set(latest)):
        info = known.get(student, {})
        record = latest.get(student)
        who = [spreadsheet_text(student), spreadsheet_text(info.get("name")), spreadsheet_text(info.get("email"))]
        if record is None:
            rows.append([*who, "", f"{manifest.max_points:g}", *[""] * len(manifest.tasks), "", "", "", ""])
            continue
        score = record.result.score
        earned = {t.task_id: t.earned for t in score.tasks}
        rows.append([*who, f"{score.total:g}", f"{score.max_points:g}",
                     *[f"{earned[t.id]:g}" if t.id in earned else "" for t in manifest.tasks],
                     f"{score.late_penalty:g}", score.late_days, spreadsheet_text(record.submitted_at),
                     spreadsheet_text(record.graded_at)])
    return header, rows


def export_csv(course: Course, assignment_id: str, book: Gradebook) -> str:
    """The CSV text: a header and one row per student (see csv_rows)."""
    header, rows = csv_rows(course, assignment_id, book)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def write_csv(course: Course, assignment_id: str, book: Gradebook, out: str | Path) -> Path:
    """Write export_csv's text to `out` and return its path.

    Written to a temporary file beside it, then renamed over it: a reader never
    sees half a file, and a failed export leaves the old one as it was."""
    path = Path(out)
    text = export_csv(course, assignment_id, book)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # a file written again keeps its permissions
    except FileNotFoundError:
        mode = None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(text)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def gradescope_folder(course: Course, assignment_id: str, out_dir: str | Path | None = None) -> Path:
    """Where export_gradescope writes: `out_dir`, else <course>/.grade/exports/ASSIGNMENT-gradescope."""
    return Path(out_dir) if out_dir else course.state_dir / "exports" / f"{assignment_id}-gradescope"


def export_gradescope(course: Course, assignment_id: str, book: Gradebook, out_dir: str | Path) -> list[Path]:
    """out_dir/STUDENT/results.json for every graded student (each id checked before anything is written)."""
    course.assignment_dir(assignment_id)  # an unknown assignment is an error, not an empty folder
    latest = sorted(book.latest(assignment_id).items())
    for student, _ in latest:
        check_student_id(student, "gradebook", fix="correct it in the gradebook before exporting")
    written = []
    for student, record in latest:
        path = Path(out_dir) / student / "results.json"
        if not path.resolve().is_relative_to(Path(out_dir).resolve()):
            raise GraderError(f"{path} would be written outside {out_dir} (a link in that folder?); "
                              f"remove the link or export to another folder")
        written.append(write_json_atomic(path, gradescope_results(record.result)))
    return written
