"""A course week, scripted end to end through the real `grade` command on the tiny course: a student
tries four wrong submissions; the TA imports the roster and grades a class of ten (a nested folder, a
zip of a folder, a broken zip, a folder without the assignment's files, a late student); the batch
ends with a table per student; a second run changes nothing; the exports keep to the roster; an
override of the total shows everywhere; the class report names whom it left out; and Ctrl-C during
`grade validate` stops it and leaves no process behind. (Installing is not repeatable in a test:
tests/test_install_commands.py runs the README's commands against stubs.)"""

from __future__ import annotations

import csv
import io
import signal
import zipfile
from pathlib import Path

import pytest
from class_builder import (
    ANSWERS_HALF,
    ANSWERS_RIGHT,
    CORRECT_A,
    CORRECT_C,
    FORBIDDEN,
    NO_SHIFT,
    ONE_DAY_LATE,
    SQUARES,
    WRONG_AXIS,
)
from click.testing import CliRunner
from process_tree import TreeRun, environment, grade_command, stop_and_check

from grader.cli.main import main
from grader.storage.gradebook import Gradebook
from tests.conftest import copy_mini_course

ON_TIME = "2026-12-01T11:00:00+00:00"


def write_folder(folder: Path, code: str, answers: str | None = ANSWERS_RIGHT) -> None:
    folder.mkdir(parents=True)
    (folder / "mini.py").write_text(code)
    if answers is not None:
        (folder / "answers.toml").write_text(answers)


def the_class(root: Path) -> Path:
    """Ten entries as a TA downloads them: s01..s10."""
    submissions = root / "submissions"
    submissions.mkdir()
    write_folder(submissions / "s01", CORRECT_A)
    write_folder(submissions / "s02" / "my_solution", CORRECT_C)  # one folder down, as students zip things
    with zipfile.ZipFile(submissions / "s03.zip", "w") as archive:  # a zip of a folder
        archive.writestr("s03-hw/mini.py", CORRECT_A)
        archive.writestr("s03-hw/answers.toml", ANSWERS_HALF)
    (submissions / "s04.zip").write_bytes(b"PK\x03\x04 cut short by a flaky upload")  # a broken zip
    write_folder(submissions / "s05", CORRECT_C)  # late: one day
    write_folder(submissions / "s06", WRONG_AXIS)
    write_folder(submissions / "s07", SQUARES, answers=None)
    write_folder(submissions / "s08", NO_SHIFT)
    write_folder(submissions / "s09", FORBIDDEN)
    (submissions / "s10").mkdir()  # the files never made it: only a note
    (submissions / "s10" / "notes.txt").write_text("I will upload tonight\n")
    stamps = ["student,submitted_at"] + [f"s{n:02d},{ON_TIME}" for n in range(1, 11) if n != 5]
    (submissions / "timestamps.csv").write_text("\n".join([*stamps, f"s05,{ONE_DAY_LATE}"]) + "\n")
    return submissions


def tsv(output: str, title: str) -> dict[str, dict[str, str]]:
    """The rows of the tab-separated table `title` in a command's output, by their first column."""
    lines = output[output.index(title):].splitlines()[1:]
    header = lines[0].split("\t")
    rows = {}
    for line in lines[1:]:
        cells = line.split("\t")
        if len(cells) != len(header):
            break
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_course_week(tmp_path: Path, monkeypatch):

    course = tmp_path / "course"
    copy_mini_course(course)
    gradebook = tmp_path / "gradebook.sqlite"
    monkeypatch.setenv("GRADE_STAFF", "ta-sam")
    runner = CliRunner()

    def grade(*args: str, code: int = 0):
        result = runner.invoke(main, ["--course", str(course), *args, "--gradebook", str(gradebook)],
                               catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    # A student tries four wrong submissions under their own id (not on the roster yet: "try1").
    tries = tmp_path / "tries"
    for number, code in enumerate((SQUARES, WRONG_AXIS, NO_SHIFT, FORBIDDEN), start=1):
        write_folder(tries / f"try{number}", code)
        out = grade("submit", "mini", "--workspace", str(tries / f"try{number}"), "--student", "try1",
                    "--allow-weak-sandbox").output
        assert "Total:" in out
    with Gradebook(gradebook) as book:
        assert len(book.history("mini", "try1")) == 4 and book.latest("mini")["try1"].total < 100

    # The roster, then the class of ten.
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,section\n" + "".join(f"s{n:02d},Student {n},s{n:02d}@example.edu,Lab A\n"
                                                          for n in range(1, 11)) + "z99,Absent Z,z99@example.edu,\n")
    grade("roster", "import", str(roster))
    listed = tsv(grade("roster", "list").output, "Roster: 11 student(s)")
    assert sorted(listed) == [f"s{n:02d}" for n in range(1, 11)] + ["z99"]
    submissions = the_class(tmp_path)
    out = grade("batch", "mini", str(submissions), "--jobs", "2", "--allow-weak-sandbox").output
    table = tsv(out, "Students of this run (mini)")
    assert sorted(table) == [f"s{n:02d}" for n in range(1, 11)]
    assert table["s01"]["total"] == "100 / 100" and table["s01"]["changed"] == "first grading"
    assert table["s02"]["total"] == "100 / 100"
    assert table["s02"]["changed"] == "first grading; its files were in the folder my_solution/ inside the entry"
    assert table["s03"]["total"] == "90 / 100" and "s03-hw/" in table["s03"]["changed"]
    assert table["s04"]["total"] == "-" and table["s04"]["changed"].startswith(
        "hand-in could not be read: SubmissionError: s04.zip is not a valid zip file")
    assert table["s05"]["total"] == "75 / 100" and table["s05"]["late"] == "1 day(s): -25"
    assert table["s10"]["changed"] == ("hand-in could not be read: SubmissionError: s10 holds none of the "
                                       "assignment's files (mini.py, answers.toml), at its top or up to 3 folders "
                                       "down; it holds: notes.txt; hand in a folder, .zip or .ipynb with mini.py, "
                                       "answers.toml")
    with Gradebook(gradebook) as book:
        assert "s10" not in book.latest("mini")  # a recorded intake problem, not an official 0
        assert {e["student"] for e in book.errors("mini")} == {"s04", "s10"}
        report = book.latest("mini")["s02"].result
        assert "the assignment's files were in the folder my_solution/ inside s02" in report.notes[0]

    # Run again: nothing changed, nothing is graded twice; the two problems are tried again.
    again = tsv(grade("batch", "mini", str(submissions), "--jobs", "2", "--allow-weak-sandbox").output,
                "Students of this run (mini)")
    assert again["s01"]["changed"] == "unchanged: same files, same grading"
    assert again["s10"]["changed"].startswith("hand-in could not be read:")

    # Exports keep to the roster (try1 is left out, and the TA is told); Canvas gets both SIS ids.
    exported = grade("export", "mini", "--format", "csv")
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(exported.stdout))}
    assert sorted(rows) == [f"s{n:02d}" for n in range(1, 11)] + ["z99"]
    assert rows["z99"]["total"] == "" and rows["s04"]["total"] == ""
    assert "left out 1 id(s) graded or recorded for mini but not on the roster: try1" in exported.stderr
    canvas = list(csv.reader(io.StringIO(grade("export", "mini", "--format", "canvas").stdout)))
    assert canvas[2] == ["Student 1", "", "s01", "s01", "Lab A", "100"]
    everyone = grade("export", "mini", "--format", "csv", "--everyone").stdout
    assert "try1" in {row["student"] for row in csv.DictReader(io.StringIO(everyone))}

    # An override of the total, as the README words it, shows in the exports and the report.
    grade("override", "mini", "s06", "--total", "70", "--reason", "regrade request: the axis only")
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(grade("export", "mini", "--format",
                                                                            "csv").stdout))}
    assert rows["s06"]["total"] == "70" and "regrade request" in rows["s06"]["overrides"]
    page = tmp_path / "class.html"
    reported = grade("report", "mini", "--out", str(page))
    html = page.read_text()
    assert 'data-override="s06|total" data-active="true"' in html and 'data-off-roster="try1"' in html
    assert "left out 1 id(s)" in reported.stderr

    # Ctrl-C during validate: it stops, says so, and leaves no process behind.
    tree = TreeRun(grade_command(course, "validate", "mini", "--jobs", "2"), env=environment(),
                   cwd=str(tmp_path), folder=str(tmp_path))
    try:
        said = stop_and_check(tree, signal.SIGINT, group=True)
    finally:
        tree.close()
    assert "stopped by SIGINT (Ctrl-C)" in said
