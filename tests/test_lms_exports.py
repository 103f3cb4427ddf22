"""Canvas and Moodle grade-import CSVs beside the generic one, from a real gradebook, through the CLI.

What each importer needs (read from their own importers): Canvas takes a header whose first
columns are Student, ID, [SIS User ID, SIS Login ID,] Section, then one column per assignment,
and an optional "Points Possible" row; it finds students by ID, SIS ids or name, and a blank
cell changes nothing. Moodle maps one column (email, ID number, username) to its users,
refuses the whole file when a row names nobody, and a blank grade erases one. Every text cell
gets the same formula neutralisation as the generic CSV.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from class_builder import FIXTURE
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.manifest import load_manifest
from grader.core.records import FAILED, PASSED, GradeResult, TestOutcome
from grader.core.scoring import score
from grader.intake.submission import Submission
from grader.storage.gradebook import Gradebook
from tests.conftest import copy_mini_course

MANIFEST = load_manifest(FIXTURE / "assignments" / "mini" / "assignment.toml")


@pytest.fixture
def course(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


def graded(student: str, normalize: bool, submitted_at: str | None = None) -> GradeResult:
    outcomes = [TestOutcome(name="t1", task="double", status=PASSED, fraction=1.0),
                TestOutcome(name="t2", task="normalize", status=PASSED if normalize else FAILED,
                            fraction=1.0 if normalize else 0.0),
                TestOutcome(name="quiz::row_sum", task="quiz", status=PASSED, fraction=1.0)]
    when = datetime.fromisoformat(submitted_at) if submitted_at else None
    return GradeResult(assignment_id="mini", assignment_title=MANIFEST.title, student=student, mode="submit",
                       score=score(MANIFEST, outcomes, (), when), outcomes=tuple(outcomes), findings=(),
                       submission_sha256=(student * 64)[:64], submission_form="folder", submitted_at=submitted_at,
                       graded_at="2026-12-01T13:00:00+00:00", seed=1, isolation="process",
                       isolation_level="process", duration_s=1.0)


@pytest.fixture
def gradebook(tmp_path: Path) -> Path:
    path = tmp_path / "gb.sqlite"
    with Gradebook(path) as book:
        book.import_roster([
            {"id": "ada", "name": "=HYPERLINK(\"http://x\",\"Ada\")", "email": "+ada@example.edu"},
            {"id": "bob", "name": "Bob Jones", "email": "bob@example.edu"},
            {"id": "cy", "name": "@Cy", "email": "-cy@example.edu"},
            {"id": "dee", "name": "Dee Absent", "email": "dee@example.edu"},
        ])
        for student, normalize, late in (("ada", True, None), ("bob", False, "2026-12-02T08:00:00+00:00"),
                                         ("cy", True, None)):
            result = graded(student, normalize, late)
            book.record(result, Submission(files={"mini.py": b"x = 1\n"}, source="x", form="folder",
                                           student=student))
        book.set_extension("bob", "mini", extra=timedelta(days=1), reason="flu", author="ta1")
        book.add_override("cy", "mini", "quiz", 10, "quiz question 2 was ambiguous", sha256="c" * 64,
                          total_before=100, total_after=90, author="ta2")
    return path


def export(course: Path, gradebook: Path, fmt: str, *extra: str) -> list[list[str]]:
    result = CliRunner().invoke(main, ["--course", str(course), "export", "mini", "--format", fmt,
                                       "--gradebook", str(gradebook), *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return list(csv.reader(io.StringIO(result.output)))


def test_canvas_import_layout(course: Path, gradebook: Path):
    rows = export(course, gradebook, "canvas")
    header, points, *students = rows
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Mini assignment"]
    # Canvas's importer: 'Student' in the first column, 'ID' in the second, SIS columns, 'Section' last
    assert "Student" in header[0] and "ID" in header[1] and header[2:4] == ["SIS User ID", "SIS Login ID"]
    assert "Section" in header[4]
    assert points == ["Points Possible", "", "", "", "", "100"]
    assert students == [  # the student id in both SIS columns: Canvas matches on either
        ["'=HYPERLINK(\"http://x\",\"Ada\")", "", "ada", "ada", "", "100"],
        ["Bob Jones", "", "bob", "bob", "", "60"],  # late by 20 h, but a day's extension: no penalty
        ["'@Cy", "", "cy", "cy", "", "90"],  # the quiz override: 20 -> 10
        ["Dee Absent", "", "dee", "dee", "", ""],  # no submission: blank, Canvas keeps what it has
    ]


def test_canvas_column_can_name_an_existing_assignment_and_is_neutralised_too(course: Path, gradebook: Path):
    assert export(course, gradebook, "canvas", "--column", "Attention from scratch (4412)")[0][5] == \
        "Attention from scratch (4412)"
    assert export(course, gradebook, "canvas", "--column", "=cmd|' /C calc'!A0")[0][5] == "'=cmd|' /C calc'!A0"


def test_moodle_import_layout(course: Path, gradebook: Path, tmp_path: Path):
    rows = export(course, gradebook, "moodle")
    assert rows == [
        ["ID number", "Username", "Email address", "Full name", "Mini assignment", "Feedback"],
        ["ada", "ada", "'+ada@example.edu", "'=HYPERLINK(\"http://x\",\"Ada\")", "100",
         "Graded by the course grader: 100 / 100 points."],
        ["bob", "bob", "bob@example.edu", "Bob Jones", "60", "Graded by the course grader: 60 / 100 points."],
        ["cy", "cy", "'-cy@example.edu", "'@Cy", "90",
         "Graded by the course grader: 90 / 100 points. Adjusted by course staff."],
    ]  # dee has no graded submission: left out, since Moodle refuses a row it cannot match and blanks erase
    out = tmp_path / "moodle.csv"
    result = CliRunner().invoke(main, ["--course", str(course), "export", "mini", "--format", "moodle",
                                       "--out", str(out), "--gradebook", str(gradebook)])
    assert result.exit_code == 0 and f"moodle: {out}" in result.output
    assert list(csv.reader(out.read_text(encoding="utf-8").splitlines())) == rows


def test_the_generic_csv_shows_what_staff_changed(course: Path, gradebook: Path):
    header, *rows = export(course, gradebook, "csv")
    table = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert (table["bob"]["total"], table["bob"]["late_days"], table["bob"]["extension"]) == ("60", "0",
                                                                                             "1 day(s) more")
    assert (table["cy"]["total"], table["cy"]["computed_total"], table["cy"]["quiz"]) == ("90", "100", "10")
    assert table["cy"]["overrides"] == "quiz: 20 -> 10 (quiz question 2 was ambiguous, ta2)"
    assert table["dee"]["total"] == table["dee"]["computed_total"] == ""


def test_a_gradescope_export_carries_the_final_score(course: Path, gradebook: Path, tmp_path: Path):
    import json

    result = CliRunner().invoke(main, ["--course", str(course), "export", "mini", "--format", "gradescope",
                                       "--out", str(tmp_path / "gs"), "--gradebook", str(gradebook)])
    assert result.exit_code == 0, result.output
    scores = {p.parent.name: json.loads(p.read_text())["score"] for p in (tmp_path / "gs").glob("*/results.json")}
    assert scores == {"ada": 100.0, "bob": 60.0, "cy": 90.0}


# ------------------------------------------------------------------ who an export lists
def with_strangers(gradebook: Path) -> Path:
    """ada..dee on the roster (dee in a section); zed graded for mini but not on the roster; ola graded for
    another assignment only; 'typo' recorded with a batch error for mini."""
    with Gradebook(gradebook) as book:
        book.import_roster([{"id": "dee", "name": "Dee Absent", "email": "dee@example.edu", "section": "Lab B"}])
        book.record(graded("zed", True), Submission(files={"mini.py": b"z\n"}, source="x", form="folder",
                                                    student="zed"))
        other = graded("ola", True)
        from dataclasses import replace

        book.record(replace(other, assignment_id="other"), Submission(files={"mini.py": b"o\n"}, source="x",
                                                                     form="folder", student="ola"))
        book.record_error("typo", "mini", "0" * 64, "ClassDataError: entry 'S 17' is not a student id")
    return gradebook


def run_export(course: Path, gradebook: Path, fmt: str, *extra: str):
    return CliRunner().invoke(main, ["--course", str(course), "export", "mini", "--format", fmt,
                                    "--gradebook", str(gradebook), *extra], catch_exceptions=False)


@pytest.mark.parametrize("fmt", ["csv", "canvas", "moodle"])
def test_exports_list_the_roster_and_say_whom_they_left_out(course: Path, gradebook: Path, fmt: str):
    with_strangers(gradebook)
    result = run_export(course, gradebook, fmt)
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    listed = {row[0] if fmt != "canvas" else row[3] for row in rows[1:]} - {"", "Points Possible"}
    expected = {"ada", "bob", "cy"} | ({"dee"} if fmt != "moodle" else set())  # moodle: graded students only
    assert listed == expected, rows  # zed (not on the roster) and ola (another assignment) are not listed
    assert ("left out 2 id(s) graded or recorded for mini but not on the roster: typo, zed "
            "(grade export --everyone lists them)") in result.stderr
    everyone = run_export(course, gradebook, fmt, "--everyone")
    rows = list(csv.reader(io.StringIO(everyone.stdout)))
    listed = {row[0] if fmt != "canvas" else row[3] for row in rows[1:]} - {"", "Points Possible"}
    # graded for mini; ola never; typo has no grade to export, but the generic CSV has its row, saying why
    assert listed == expected | {"zed"} | ({"typo"} if fmt == "csv" else set())
    if fmt == "csv":
        typo = next(row for row in rows if row[0] == "typo")
        assert typo[3] == "" and typo[-1] == "not graded (grader error): ClassDataError: entry 'S 17' is not a " \
                                              "student id"
    assert "left out" not in everyone.stderr
    if fmt == "moodle":  # zed has no email to match on: said so, with what to map instead
        assert ("1 row(s) have no email address (zed): in Moodle, map 'ID number' or 'Username' to the user"
                in everyone.stderr)


def test_canvas_rows_carry_the_section_and_both_sis_ids(course: Path, gradebook: Path):
    with_strangers(gradebook)
    rows = list(csv.reader(io.StringIO(run_export(course, gradebook, "canvas").stdout)))
    assert rows[-1] == ["Dee Absent", "", "dee", "dee", "Lab B", ""]


def test_without_a_roster_an_export_lists_the_students_graded_for_the_assignment(course: Path, tmp_path: Path):
    path = tmp_path / "no-roster.sqlite"
    with Gradebook(path) as book:
        for student, assignment in (("ada", "mini"), ("ola", "other")):
            from dataclasses import replace

            book.record(replace(graded(student, True), assignment_id=assignment),
                        Submission(files={"mini.py": student.encode()}, source="x", form="folder", student=student))
    result = run_export(course, path, "csv")
    assert [row[0] for row in csv.reader(io.StringIO(result.stdout))] == ["student", "ada"]
    assert result.stderr == ""
