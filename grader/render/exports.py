"""Grades out of the gradebook: a CSV for spreadsheets, the grade-import CSVs of
Canvas and Moodle, or one Gradescope results.json per student.

Each student counts once, with their latest graded submission, as it stands
(render/standing.py: the late policy with their current extension, then staff
overrides). Who is listed is the class list (render/standing.class_list): the
roster's students, those without a submission too (blank scores, so a missing
submission is visible rather than silently absent); ids graded for the
assignment but not on the roster only with `everyone` (the CLI says how many
it left out); ids recorded for other assignments never. Without a roster, the
students graded for the assignment. The generic CSV's last columns say what
staff changed (the total the grader computed, the overrides, the extension) and,
in `note`, why a row's task columns do not add up to its total (a total set by
staff) or why it has no grade (a hand-in that could not be read, a grader error).

The LMS files carry the fields each importer matches students on:
- Canvas (Grades → Import): a header `Student, ID, SIS User ID, SIS Login ID,
  Section, <assignment>`, then a `Points Possible` row. Canvas finds each
  student by ID (Canvas's own number, which the grader does not know: blank),
  else SIS User ID, else SIS Login ID, else the name. The student id goes in
  both SIS columns (courses use it as either), the roster's name in
  `Student` and its section in `Section`. A blank grade leaves Canvas's as it
  is, so listed students without a submission are blank. The assignment
  column is the manifest's title (a new assignment in Canvas) unless `column`
  names an existing one, as Canvas writes it: `Title (12345)`.
- Moodle (Grades → Import → CSV file): one row per listed graded student with
  `ID number` and `Username` (the student id), `Email address` (the
  roster's), `Full name`, the grade and a `Feedback` text; map any of the
  three to the user when importing. Moodle refuses the whole file when one
  row names nobody it knows, and a blank grade would erase one, so students
  without a graded submission are left out (and `rows_without_email` names
  the rows an email mapping could not match).

A spreadsheet runs a cell that starts with `=`, `+`, `-`, `@`, a tab or a
carriage return as a formula, so every text cell (ids, names, emails, times:
anything a roster or a student controls) goes through `spreadsheet_text`,
which strips control characters and puts a single quote before such a
start. Numbers the grader formats itself are written as they are.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.errors import GraderError
from grader.core.files import write_atomic
from grader.core.records import HANDIN_PROBLEM
from grader.core.student_ids import check_student_id
from grader.core.text import printable
from grader.render.results import gradescope_results, results_text, score_sentences
from grader.render.standing import ClassList, Standing, class_list, standings
from grader.storage.gradebook import Gradebook

FORMATS = ("csv", "canvas", "moodle", "gradescope")
TABLE_FORMATS = ("csv", "canvas", "moodle")  # one CSV file (export_table); gradescope is a folder
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_IDENTITY = ("ID number", "Username", "Email address", "Full name")
STAFF_COLUMNS = ("computed_total", "overrides", "extension", "note")  # note: why a row is blank or does not add up


def spreadsheet_text(value: object) -> str:
    """A text cell a spreadsheet shows as text: printable, and quoted when it would start a formula."""
    text = printable("" if value is None else str(value))
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _overrides_text(standing: Standing) -> str:
    return "; ".join(f"{o.task or 'total'}: {o.computed if o.computed is not None else 0:g} -> {o.points:g} "
                     f"({o.reason}, {o.author})" for o in standing.score.overrides)


def _not_graded_text(error: dict) -> str:
    what = "hand-in could not be read" if error["kind"] == HANDIN_PROBLEM else "not graded (grader error)"
    return f"{what}: {error['error']}"


def _note(standing: Standing | None, error: dict | None) -> str:
    """Why a row's task columns do not add up to its total (a total set by staff), or why it has no
    grade (a hand-in that could not be read, a grader error); '' when it needs no word."""
    if standing is None:
        return _not_graded_text(error) if error else ""
    notes = []
    score = standing.score
    tasks = round(sum(t.earned for t in score.tasks), 2)
    if abs(tasks - score.late_penalty - score.total) > 0.005:
        total = next((o for o in score.overrides if o.task is None), None)
        why = f"the total is set by staff ({total.reason})" if total else "the total is not the tasks' sum"
        late = f" less {score.late_penalty:g} late" if score.late_penalty else ""
        notes.append(f"{why}: the tasks add up to {tasks:g}{late}")
    notes += [f"an override set before the latest grading is below what it earns: {lowered.what} "
              f"{lowered.override.points:g} < {lowered.earned:g}" for lowered in standing.lowered]
    if error and error["sha256"] != standing.record.sha256:
        notes.append(f"another hand-in was not graded ({_not_graded_text(error)}); this grade is of the files "
                     f"graded {standing.record.graded_at}")
    return "; ".join(notes)


def listed(assignment: Assignment, book: Gradebook, everyone: bool = False) -> tuple[dict[str, Standing], ClassList]:
    """The standings of the assignment and the class list an export covers (see the module docstring)."""
    latest = standings(assignment.manifest, book)
    return latest, class_list(book, assignment.id, set(latest), everyone=everyone)


def csv_rows(assignment: Assignment, book: Gradebook, everyone: bool = False) -> tuple[list[str], list[list]]:
    """Header and one row per listed student (roster students without a submission too; without a roster or
    with `everyone`, every id whose hand-in was recorded as not graded too, its note saying why)."""
    manifest = assignment.manifest
    latest, students = listed(assignment, book, everyone)
    known = students.info
    header = [spreadsheet_text(h) for h in ["student", "name", "email", "total", "max",
                                            *[task.id for task in manifest.tasks],
                                            "late_penalty", "late_days", "submitted_at", "graded_at",
                                            *STAFF_COLUMNS]]
    rows = []
    errors = {e["student"]: e for e in book.errors(assignment.id)}
    extra = set(errors) if students.everyone or not students.has_roster else set()  # not graded: a row says why
    for student in sorted(set(students.students) | extra):
        info = known.get(student, {})
        standing = latest.get(student)
        note = spreadsheet_text(_note(standing, errors.get(student)))
        who = [spreadsheet_text(student), spreadsheet_text(info.get("name")), spreadsheet_text(info.get("email"))]
        if standing is None:
            rows.append([*who, "", f"{manifest.max_points:g}", *[""] * len(manifest.tasks), "", "", "", "",
                         *[""] * (len(STAFF_COLUMNS) - 1), note])
            continue
        score, record = standing.score, standing.record
        earned = {t.task_id: t.earned for t in score.tasks}
        computed = score.computed_total if score.computed_total is not None else score.total
        rows.append([*who, f"{score.total:g}", f"{score.max_points:g}",
                     *[f"{earned[t.id]:g}" if t.id in earned else "" for t in manifest.tasks],
                     f"{score.late_penalty:g}", score.late_days, spreadsheet_text(record.submitted_at),
                     spreadsheet_text(record.graded_at), f"{computed:g}", spreadsheet_text(_overrides_text(standing)),
                     spreadsheet_text(standing.extension.describe() if standing.extension else ""), note])
    return header, rows


def canvas_rows(assignment: Assignment, book: Gradebook, column: str | None = None,
                everyone: bool = False) -> tuple[list[str], list[list]]:
    """Canvas's grade-import layout: identity columns, one assignment column, a Points Possible row,
    then every listed student (blank when they have no graded submission: Canvas leaves those as they are)."""
    manifest = assignment.manifest
    latest, students = listed(assignment, book, everyone)
    header = [spreadsheet_text(h) for h in (*CANVAS_IDENTITY, column or manifest.title)]
    rows: list[list] = [[CANVAS_POINTS_ROW, "", "", "", "", f"{manifest.max_points:g}"]]
    for student in students.students:
        info = students.info.get(student) or {}
        standing = latest.get(student)
        rows.append([spreadsheet_text(info.get("name") or student), "", spreadsheet_text(student),
                     spreadsheet_text(student), spreadsheet_text(info.get("section")),
                     f"{standing.total:g}" if standing else ""])
    return header, rows


def _moodle_feedback(standing: Standing) -> str:
    score = standing.score
    parts = score_sentences(score, "Graded by the course grader")
    if score.overrides:
        parts.append("Adjusted by course staff.")
    return " ".join(parts)


def moodle_rows(assignment: Assignment, book: Gradebook, column: str | None = None,
                everyone: bool = False) -> tuple[list[str], list[list]]:
    """Moodle's CSV grade import: one row per listed graded student (see the module docstring)."""
    manifest = assignment.manifest
    latest, students = listed(assignment, book, everyone)
    header = [spreadsheet_text(h) for h in (*MOODLE_IDENTITY, column or manifest.title, "Feedback")]
    rows = []
    for student in students.students:
        standing = latest.get(student)
        if standing is None:
            continue
        info = students.info.get(student) or {}
        rows.append([spreadsheet_text(student), spreadsheet_text(student), spreadsheet_text(info.get("email")),
                     spreadsheet_text(info.get("name")), f"{standing.total:g}",
                     spreadsheet_text(_moodle_feedback(standing))])
    return header, rows


def rows_without_email(assignment: Assignment, book: Gradebook, everyone: bool = False) -> list[str]:
    """The students a Moodle export lists without an email address (mapping "Email address" would not
    match them: map "ID number" or "Username", or import a roster with their emails)."""
    latest, students = listed(assignment, book, everyone)
    return [s for s in students.students if s in latest and not (students.info.get(s) or {}).get("email")]


def left_out(assignment: Assignment, book: Gradebook, everyone: bool = False) -> tuple[str, ...]:
    """The ids graded (or recorded with an error) for the assignment that an export without `everyone`
    leaves out, not being on the roster."""
    return listed(assignment, book, everyone)[1].left_out()


def export_table(assignment: Assignment, book: Gradebook, fmt: str = "csv",
                 column: str | None = None, everyone: bool = False) -> str:
    """The CSV text of `fmt` (csv, canvas or moodle); `column` names the LMS's grade column;
    `everyone`: students graded but not on the roster too."""
    if fmt not in TABLE_FORMATS:
        raise GraderError(f"unknown export format {fmt!r} (one CSV file: {', '.join(TABLE_FORMATS)})")
    if fmt == "csv":
        header, rows = csv_rows(assignment, book, everyone)
    else:
        header, rows = (canvas_rows if fmt == "canvas" else moodle_rows)(assignment, book, column, everyone)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def export_csv(assignment: Assignment, book: Gradebook) -> str:
    """The generic CSV text: a header and one row per student (see csv_rows)."""
    return export_table(assignment, book, "csv")


def write_csv(assignment: Assignment, book: Gradebook, out: str | Path, fmt: str = "csv",
              column: str | None = None, everyone: bool = False) -> Path:
    """Write export_table's text to `out` and return its path.

    Written whole or not at all (grader.core.files.write_atomic): a reader never sees half a
    file, and a failed export leaves the old one as it was."""
    return write_atomic(out, export_table(assignment, book, fmt, column, everyone))


def gradescope_folder(assignment: Assignment, out_dir: str | Path | None = None) -> Path:
    """Where export_gradescope writes: `out_dir`, else <course>/.grade/exports/ASSIGNMENT-gradescope."""
    return Path(out_dir) if out_dir else assignment.course.state_dir / "exports" / f"{assignment.id}-gradescope"


def export_gradescope(assignment: Assignment, book: Gradebook, out_dir: str | Path,
                      everyone: bool = False) -> list[Path]:
    """out_dir/STUDENT/results.json for every listed graded student (each id checked before anything
    is written)."""
    graded, students = listed(assignment, book, everyone)
    latest = [(student, graded[student]) for student in students.students if student in graded]
    for student, _ in latest:
        check_student_id(student, "gradebook", fix="correct it in the gradebook before exporting")
    written = []
    for student, standing in latest:
        path = Path(out_dir) / student / "results.json"
        if not path.resolve().is_relative_to(Path(out_dir).resolve()):
            raise GraderError(f"{path} would be written outside {out_dir} (a link in that folder?); "
                              f"remove the link or export to another folder")
        result = replace(standing.record.result, score=standing.score)  # as it stands: extension, overrides
        written.append(write_atomic(path, results_text(gradescope_results(result))))
    return written


@dataclass(frozen=True)
class ExportDone:
    """What one export did, as data for the command to say."""

    fmt: str
    written: tuple[Path, ...]  # the files written: one table, or a results.json per student
    folder: Path | None  # where the Gradescope files went (None for a table)
    table: str | None  # the table's text, when it was not written to a file
    left_out: tuple[str, ...]  # ids graded but not on the roster, left out without `everyone`
    without_email: tuple[str, ...]  # Moodle rows without an email address


def export_grades(assignment: Assignment, book: Gradebook, fmt: str, out: str | Path | None = None,
                  column: str | None = None, everyone: bool = False) -> ExportDone:
    """`grade export`: Gradescope results.json files under `out` (or gradescope_folder's default), else
    the table of `fmt` written to `out`, or returned as text when `out` is None."""
    folder, table, written = None, None, []
    if fmt == "gradescope":
        folder = gradescope_folder(assignment, out)
        written = export_gradescope(assignment, book, folder, everyone)
    elif out is None:
        table = export_table(assignment, book, fmt, column, everyone)
    else:
        written = [write_csv(assignment, book, out, fmt, column, everyone)]
    without_email = rows_without_email(assignment, book, everyone) if fmt == "moodle" else []
    return ExportDone(fmt, tuple(written), folder, table, left_out(assignment, book, everyone), tuple(without_email))
