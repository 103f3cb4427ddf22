"""Grades out of the gradebook: a CSV for spreadsheets, the grade-import CSVs of
Canvas and Moodle, or one Gradescope results.json per student.

Each student counts once, with their latest graded submission, as it stands
(render/standing.py: the late policy with their current extension, then staff
overrides). The generic CSV also lists every known student (roster) who has
none, with blank scores, so a missing submission is visible rather than
silently absent; its last columns say what staff changed (the total the
grader computed, the overrides, the extension).

The LMS files follow each importer's own rules:
- Canvas (Grades → Import): a header `Student, ID, SIS User ID, SIS Login ID,
  Section, <assignment>`, then a `Points Possible` row. Canvas finds each
  student by ID, else SIS User ID, else SIS Login ID (our student id goes
  there), else name; a blank grade leaves Canvas's as it is, so students
  without a submission are listed blank. The assignment column is the
  manifest's title (a new assignment in Canvas) unless `column` names an
  existing one, as Canvas writes it: `Title (12345)`.
- Moodle (Grades → Import → CSV file): one row per graded student with
  `ID number` (our student id), `Email address`, `Full name`, the grade and a
  `Feedback` text; map "Email address" or "ID number" to the user when
  importing. Moodle refuses the whole file when one row names nobody it
  knows, and a blank grade would erase one, so students without a graded
  submission are left out.

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
from dataclasses import replace
from pathlib import Path

from grader.core.course import Course
from grader.core.errors import GraderError
from grader.core.manifest import load_manifest
from grader.core.student_ids import check_student_id
from grader.core.text import printable
from grader.render.results import gradescope_results, score_sentences, write_json_atomic
from grader.render.standing import Standing, standings
from grader.storage.gradebook import Gradebook

FORMATS = ("csv", "canvas", "moodle", "gradescope")
TABLE_FORMATS = ("csv", "canvas", "moodle")  # one CSV file (export_table); gradescope is a folder
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_IDENTITY = ("ID number", "Email address", "Full name")
STAFF_COLUMNS = ("computed_total", "overrides", "extension")


def spreadsheet_text(value: object) -> str:
    """A text cell a spreadsheet shows as text: printable, and quoted when it would start a formula."""
    text = printable("" if value is None else str(value))
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _overrides_text(standing: Standing) -> str:
    return "; ".join(f"{o.task or 'total'}: {o.computed if o.computed is not None else 0:g} -> {o.points:g} "
                     f"({o.reason}, {o.author})" for o in standing.score.overrides)


def csv_rows(course: Course, assignment_id: str, book: Gradebook) -> tuple[list[str], list[list]]:
    """Header and one row per student (roster students without a submission too)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    latest = standings(manifest, book)
    known = {s["id"]: s for s in book.students()}
    header = [spreadsheet_text(h) for h in ["student", "name", "email", "total", "max",
                                            *[task.id for task in manifest.tasks],
                                            "late_penalty", "late_days", "submitted_at", "graded_at",
                                            *STAFF_COLUMNS]]
    rows = []
    for student in sorted(set(known) | set(latest)):
        info = known.get(student, {})
        standing = latest.get(student)
        who = [spreadsheet_text(student), spreadsheet_text(info.get("name")), spreadsheet_text(info.get("email"))]
        if standing is None:
            rows.append([*who, "", f"{manifest.max_points:g}", *[""] * len(manifest.tasks), "", "", "", "",
                         *[""] * len(STAFF_COLUMNS)])
            continue
        score, record = standing.score, standing.record
        earned = {t.task_id: t.earned for t in score.tasks}
        computed = score.computed_total if score.computed_total is not None else score.total
        rows.append([*who, f"{score.total:g}", f"{score.max_points:g}",
                     *[f"{earned[t.id]:g}" if t.id in earned else "" for t in manifest.tasks],
                     f"{score.late_penalty:g}", score.late_days, spreadsheet_text(record.submitted_at),
                     spreadsheet_text(record.graded_at), f"{computed:g}", spreadsheet_text(_overrides_text(standing)),
                     spreadsheet_text(standing.extension.describe() if standing.extension else "")])
    return header, rows


def canvas_rows(course: Course, assignment_id: str, book: Gradebook,
                column: str | None = None) -> tuple[list[str], list[list]]:
    """Canvas's grade-import layout: identity columns, one assignment column, a Points Possible row,
    then every known student (blank when they have no graded submission: Canvas leaves those as they are)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    latest = standings(manifest, book)
    known = {s["id"]: s for s in book.students()}
    header = [spreadsheet_text(h) for h in (*CANVAS_IDENTITY, column or manifest.title)]
    rows: list[list] = [[CANVAS_POINTS_ROW, "", "", "", "", f"{manifest.max_points:g}"]]
    for student in sorted(set(known) | set(latest)):
        name = (known.get(student) or {}).get("name") or student
        standing = latest.get(student)
        rows.append([spreadsheet_text(name), "", "", spreadsheet_text(student), "",
                     f"{standing.total:g}" if standing else ""])
    return header, rows


def _moodle_feedback(standing: Standing) -> str:
    score = standing.score
    parts = score_sentences(score, "Graded by the course grader")
    if score.overrides:
        parts.append("Adjusted by course staff.")
    return " ".join(parts)


def moodle_rows(course: Course, assignment_id: str, book: Gradebook,
                column: str | None = None) -> tuple[list[str], list[list]]:
    """Moodle's CSV grade import: one row per graded student (see the module docstring)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    latest = standings(manifest, book)
    known = {s["id"]: s for s in book.students()}
    header = [spreadsheet_text(h) for h in (*MOODLE_IDENTITY, column or manifest.title, "Feedback")]
    rows = []
    for student, standing in sorted(latest.items()):
        info = known.get(student) or {}
        rows.append([spreadsheet_text(student), spreadsheet_text(info.get("email")),
                     spreadsheet_text(info.get("name")), f"{standing.total:g}",
                     spreadsheet_text(_moodle_feedback(standing))])
    return header, rows


def export_table(course: Course, assignment_id: str, book: Gradebook, fmt: str = "csv",
                 column: str | None = None) -> str:
    """The CSV text of `fmt` (csv, canvas or moodle); `column` names the LMS's grade column."""
    if fmt not in TABLE_FORMATS:
        raise GraderError(f"unknown export format {fmt!r} (one CSV file: {', '.join(TABLE_FORMATS)})")
    if fmt == "csv":
        header, rows = csv_rows(course, assignment_id, book)
    else:
        header, rows = (canvas_rows if fmt == "canvas" else moodle_rows)(course, assignment_id, book, column)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def export_csv(course: Course, assignment_id: str, book: Gradebook) -> str:
    """The generic CSV text: a header and one row per student (see csv_rows)."""
    return export_table(course, assignment_id, book, "csv")


def write_csv(course: Course, assignment_id: str, book: Gradebook, out: str | Path, fmt: str = "csv",
              column: str | None = None) -> Path:
    """Write export_table's text to `out` and return its path.

    Written to a temporary file beside it, then renamed over it: a reader never
    sees half a file, and a failed export leaves the old one as it was."""
    path = Path(out)
    text = export_table(course, assignment_id, book, fmt, column)
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
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")  # unknown: an error
    latest = sorted(standings(manifest, book).items())
    for student, _ in latest:
        check_student_id(student, "gradebook", fix="correct it in the gradebook before exporting")
    written = []
    for student, standing in latest:
        path = Path(out_dir) / student / "results.json"
        if not path.resolve().is_relative_to(Path(out_dir).resolve()):
            raise GraderError(f"{path} would be written outside {out_dir} (a link in that folder?); "
                              f"remove the link or export to another folder")
        result = replace(standing.record.result, score=standing.score)  # as it stands: extension, overrides
        written.append(write_json_atomic(path, gradescope_results(result)))
    return written
