"""Records and what staff see: student ids, report paths, CSV cells, the
release leak check and terminal output, each attacked with real files on a
temporary copy of a course (the real tree is checked to be unchanged)."""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from class_builder import FIXTURE
from click.testing import CliRunner
from rich.console import Console

from grader.cli.console import print_summary
from grader.cli.main import main
from grader.core.course import Course
from grader.core.errors import ClassDataError, InvalidStudentId
from grader.core.manifest import load_manifest
from grader.core.records import FAILED, GradeResult, TestOutcome
from grader.core.scoring import score
from grader.core.student_ids import check_student_id, is_student_id
from grader.core.text import one_line, printable, printable_data, storable
from grader.intake.submission import Submission
from grader.pipeline.batch import BatchSummary
from grader.render.class_report import class_view_model
from grader.render.exports import export_csv, export_gradescope, spreadsheet_text
from grader.render.report import view_model
from grader.render.results import gradescope_results
from grader.ship.release import find_leaks
from grader.storage.gradebook import Gradebook
from grader.storage.roster import read_roster, read_timestamps
from tests.conftest import FAULTS, ROOT, assignment_of, copy_course, copy_mini_course

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
RULE = ("ids are used as folder names and gradebook keys, so use 1 to 64 letters, digits and . _ - @ +, "
        "starting with a letter or digit")


def tree_digest(*folders: Path) -> str:
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


# ----------------------------------------------------------------- student ids
@pytest.mark.parametrize("value", ["alice", "s01", "ada.lovelace", "jo-ann_2", "ada@example.edu", "u+1", "7",
                                   "A" * 64, "x.", "a..b"])
def test_valid_student_ids(value: str):
    assert is_student_id(value) and check_student_id(value) == value


@pytest.mark.parametrize("value", ["", "../x", "../../x", "a/b", "a\\b", ".hidden", "-rf", "_x", "@x", "+x",
                                   "=HYPERLINK(1)", "bob smith", "émile", "A" * 65, "x\n", "tab\tid", "..", ".",
                                   "x\x1b[2J", "nul\0", None, 5])
def test_invalid_student_ids(value):
    assert not is_student_id(value)
    with pytest.raises(InvalidStudentId) as caught:
        check_student_id(value, "here", fix="do this")
    assert str(caught.value) == f"here: {value!r} is not a usable student id: {RULE}; do this"
    assert isinstance(caught.value, ClassDataError)


@pytest.mark.parametrize("student", ["../../x", "/tmp/x", "a/b", ".hidden", "-rf", "", "bob smith", "=1+1"])
def test_submit_refuses_a_bad_student_id_and_writes_nothing(mini_course: Path, tmp_path: Path, student: str):
    before = files_under(tmp_path)
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace",
                                       str(FAULTS / "wrong_axis"), "--student", student])
    assert result.exit_code == 2
    assert result.output == (f"Error: --student: {student!r} is not a usable student id: {RULE}; "
                             f"pass the student's id\n")
    assert files_under(tmp_path) == before  # no report, no gradebook, nothing outside the course either
    assert not (mini_course / "x").exists() and not Path("/tmp/x").exists()


def test_a_report_path_must_resolve_inside_the_reports_folder(mini_course: Path, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    reports = mini_course / ".grade" / "reports"
    reports.mkdir(parents=True)
    (reports / "alice").symlink_to(elsewhere)
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace",
                                       str(FAULTS / "wrong_axis"), "--student", "alice"])
    assert result.exit_code == 2
    assert result.output == (f"Error: the report for alice would be written outside {reports} (a link in that "
                             f"folder?); remove the link or pass --html PATH\n")
    assert list(elsewhere.iterdir()) == []
    assert Course(mini_course).report_path("bob", "mini") == reports / "bob" / "mini.html"


def test_submit_without_student_needs_a_usable_workspace_name(mini_course: Path, tmp_path: Path):
    work = tmp_path / "my work"
    shutil.copytree(FAULTS / "wrong_axis", work)
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace", str(work)])
    assert result.exit_code == 2
    assert result.output == (f"Error: the workspace name my work: 'my work' is not a usable student id: {RULE}; "
                             f"pass --student ID, or rename the workspace\n")
    assert not (mini_course / ".grade").exists()


def test_roster_and_timestamps_refuse_bad_ids(mini_course: Path, tmp_path: Path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email\nada,Ada,ada@x\n../x,Evil,e@x\n")
    result = CliRunner().invoke(main, ["--course", str(mini_course), "roster", "import", str(roster),
                                       "--gradebook", str(tmp_path / "gb.sqlite")])
    assert result.exit_code == 2
    assert result.output == (f"Error: {roster}, line 3: '../x' is not a usable student id: {RULE}; correct the "
                             f"id in the roster\n")
    with pytest.raises(InvalidStudentId, match="line 3"):
        read_roster(roster)
    stamps = tmp_path / "timestamps.csv"
    stamps.write_text("student,submitted_at\nada,2026-12-01T10:00:00+00:00\n=cmd|x,2026-12-01T10:00:00+00:00\n")
    with pytest.raises(InvalidStudentId) as caught:
        read_timestamps(stamps)
    assert str(caught.value) == (f"{stamps}, line 3: '=cmd|x' is not a usable student id: {RULE}; use the id the "
                                 f"submission is named by")


MANIFEST = load_manifest(FIXTURE / "assignments" / "mini" / "assignment.toml")


def fake_result(student: str, message: str = "", output: str = "") -> GradeResult:
    outcomes = [TestOutcome(name="test_double_matrix", task="double", status=FAILED, kind="raised",
                            message=message, output=output),
                TestOutcome(name="test_normalize_square", task="normalize", status="passed", fraction=1.0)]
    return GradeResult(assignment_id="mini", assignment_title=MANIFEST.title, student=student, mode="submit",
                       score=score(MANIFEST, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256=(student.encode().hex() * 64)[:64], submission_form="folder",
                       submitted_at=None, graded_at="2026-12-01T13:00:00+00:00", seed=7, isolation="process",
                       isolation_level="process", duration_s=1.0, student_output=output)


def test_gradescope_export_checks_every_id_before_writing(mini_course: Path, tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        for student in ("ada", "=cmd"):
            book.record(fake_result(student), Submission(files={}, source="x", form="folder", student=student))
        with pytest.raises(InvalidStudentId) as caught:
            export_gradescope(assignment_of(mini_course, "mini"), book, tmp_path / "gs")
    assert str(caught.value) == (f"gradebook: '=cmd' is not a usable student id: {RULE}; correct it in the "
                                 f"gradebook before exporting")
    assert not (tmp_path / "gs").exists()


# ------------------------------------------------------------------------- CSV
def test_csv_cells_from_text_are_neutralised_and_numbers_stay_numbers(mini_course: Path, tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.import_roster([
            {"id": "=HYPERLINK(\"http://x\",\"y\")", "name": "+1 555", "email": "-2@x"},
            {"id": "@SUM(A1)", "name": "\tTab", "email": "\rcr@x"},
            {"id": "ada", "name": "=1+1", "email": "@ada"},
            {"id": "bob", "name": "Bob \x1b[31mRed\x1b[0m", "email": "bob@x"},
        ])
        book.record(fake_result("ada"), Submission(files={}, source="x", form="folder", student="ada"))
        text = export_csv(assignment_of(mini_course, "mini"), book)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["student", "name", "email", "total", "max", "double", "normalize", "quiz",
                       "late_penalty", "late_days", "submitted_at", "graded_at",
                       "computed_total", "overrides", "extension", "note"]
    assert rows[1:] == [
        ["'=HYPERLINK(\"http://x\",\"y\")", "'+1 555", "'-2@x", "", "100", "", "", "", "", "", "", "",
         "", "", "", ""],
        ["'@SUM(A1)", "'\tTab", "cr@x", "", "100", "", "", "", "", "", "", "", "", "", "", ""],
        ["ada", "'=1+1", "'@ada", "40", "100", "0", "40", "0", "0", "0", "", "2026-12-01T13:00:00+00:00",
         "40", "", "", ""],
        ["bob", "Bob Red", "bob@x", "", "100", "", "", "", "", "", "", "", "", "", "", ""],
    ]
    assert [spreadsheet_text(v) for v in ("=x", "+x", "-x", "@x", "\tx", "\rx", "x=", "", None, "é")] == \
        ["'=x", "'+x", "'-x", "'@x", "'\tx", "x", "x=", "", "", "é"]


# --------------------------------------------------------------------- release
def course_copy(tmp_path: Path, assignment: str) -> Path:
    """assignments/<id>, reference/<id> and course_kernels/ of the real course, copied."""
    return copy_course(tmp_path / "course", (f"assignments/{assignment}", f"reference/{assignment}", "course_kernels"))


def release(course: Path, assignment: str, out: Path):
    return CliRunner().invoke(main, ["--course", str(course), "release", assignment, "--out", str(out)])


@pytest.fixture(scope="module")
def real_tree_digest() -> str:
    return tree_digest(ROOT / "assignments", ROOT / "reference", ROOT / "course_kernels")


@pytest.mark.parametrize("assignment", ["assignment1", "assignment2", "assignment3"])
def test_the_real_bundles_are_clean(tmp_path: Path, assignment: str, real_tree_digest: str):
    """Blank answers.toml, quiz.toml, stubs and given helpers are not leaks."""
    result = release(course_copy(tmp_path, assignment), assignment, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert tree_digest(ROOT / "assignments", ROOT / "reference", ROOT / "course_kernels") == real_tree_digest


def reformat(source: str) -> str:
    """The same module, laid out by ast.unparse (other quotes, wrapping and no comments), re-indented."""
    return "\n".join(line.replace("    ", "  ") for line in ast.unparse(ast.parse(source)).splitlines()) + "\n"


def test_a_reformatted_reference_and_quiz_key_make_release_exit_3(tmp_path: Path, real_tree_digest: str):
    course = course_copy(tmp_path, "assignment1")
    bundle = course / "assignments" / "assignment1"
    reference = course / "reference" / "assignment1"
    (bundle / "attention.py").write_text(reformat((reference / "attention.py").read_text()))
    (bundle / "tests" / "test_softmax_more.py").write_text(reformat((reference / "tests" / "test_softmax.py")
                                                                    .read_text()))
    key = tomllib_load(reference / "quiz_key.toml")["answers"]
    requoted = "\n".join(f'{name} = "{value["value"] if isinstance(value, dict) else value}"'
                         for name, value in sorted(key.items(), reverse=True))
    (bundle / "answers.toml").write_text("# Your answers\n" + requoted + "\n")
    result = release(course, "assignment1", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert result.output.startswith("Error: refusing to release assignment1: ")  # + short functions found as text
    assert (f"answers.toml: carries the answers of reference/assignment1/quiz_key.toml, the quiz key, to {len(key)} of "
            f"{len(key)} question(s)") in result.output
    assert ("attention.py: same code as reference/assignment1/attention.py, the reference solution (compared as "
            "syntax trees)") in result.output
    assert ("tests/test_softmax_more.py: same code as reference/assignment1/tests/test_softmax.py, a hidden test "
            "file (compared as syntax trees)") in result.output
    assert not (tmp_path / "out").exists()
    assert tree_digest(ROOT / "assignments", ROOT / "reference", ROOT / "course_kernels") == real_tree_digest


def tomllib_load(path: Path) -> dict:
    from grader.core.compat import tomllib

    return tomllib.loads(path.read_text())


def mini_course_copy(tmp_path: Path) -> Path:
    target = tmp_path / "mini_course"
    copy_mini_course(target)
    return target


RENAMED_REFERENCE = '''"""My notes."""
import torch


def twice(t):
    return (t *
            2)


def softish(inp: torch.Tensor):
    """Rows sum to one."""
    s = inp - inp.amax(dim = -1,
                       keepdim = True)
    w = s.exp()
    return w / w.sum(dim=-1, keepdim=True)
'''
NESTED_MUTANT = '''def helpers():
    def wrong(v):
        s = v - v.amax(dim=0, keepdim=True)
        return (s.exp()
                / s.exp().sum(dim=0, keepdim=True))

    def wrong_too(v):
        s = v - v.amax(dim=0, keepdim=True)
        w = s.exp()
        return w / w.sum(dim=0, keepdim=True)
    return wrong, wrong_too
'''


@pytest.mark.parametrize("name, content, problems", [
    ("notes.py", RENAMED_REFERENCE, [
        "notes.py: same code as reference/mini/mini.py, the reference solution (compared as syntax trees)"]),
    ("notes.py", RENAMED_REFERENCE + "\nSCALE = 3\n", [
        "notes.py: contains function double from reference/mini/mini.py, the reference solution (renamed twice), "
        "the same code in another layout",
        "notes.py: contains function normalize from reference/mini/mini.py, the reference solution (renamed "
        "softish), the same code in another layout"]),
    ("helpers.py", NESTED_MUTANT, [
        "helpers.py: contains function normalize_wrong_axis from reference/mini/mutants.py, the mistake catalogue "
        "(renamed wrong_too), the same code in another layout"]),
    ("answers.toml", "ratio = '1.43'\nrow_sum = '1'\n", [
        "answers.toml: carries the answers of reference/mini/quiz_key.toml, the quiz key, to 2 of 2 question(s) "
        "(ratio, row_sum)"]),
    ("quiz.toml", (FIXTURE / "assignments/mini/quiz.toml").read_text() + "\n[answers.extra]\nratio = 1.44\n", [
        "quiz.toml: carries the answers of reference/mini/quiz_key.toml, the quiz key, to 1 of 2 question(s) "
        "(ratio)"]),
    ("key.toml", "[explanations]\nrow_sum = \"A softmax row is a probability distribution.\"\nratio = 'x'\n", [
        "key.toml: carries text from reference/mini/quiz_key.toml, the quiz key"]),
    ("copy.toml", "[explanations]\nratio = \"e^0.36 ≈ 1.43.\"\nrow_sum = 'A softmax row is a probability "
                  "distribution.'\n[answers]\nratio = {tolerance = 0.03, value = 1.43}\nrow_sum = 1\n", [
        "copy.toml: same TOML data as reference/mini/quiz_key.toml, the quiz key"]),
])
def test_meaning_level_leaks_in_the_mini_course(tmp_path: Path, name: str, content: str, problems: list[str]):
    course = mini_course_copy(tmp_path)
    (course / "assignments" / "mini" / name).write_text(content)
    result = release(course, "mini", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert result.output == (f"Error: refusing to release mini: {len(problems)} instructor-only item(s) in "
                             f"assignments/mini/: " + "; ".join(problems) + "\n")
    assert not (tmp_path / "out").exists()


def test_stubs_given_helpers_and_blank_templates_are_not_leaks():
    reference = b'import torch\n\n\ndef f(x):\n    """Reference."""\n    return torch.exp(x) * 2\n\n\n' \
                b'def g(x):\n    return x + 1\n'
    instructor = {"reference/x/a.py": reference, "reference/x/quiz_key.toml": b"[answers]\nq = 1\n"}
    bundle = {"a.py": b'def f(y):\n    """Stub."""\n    raise NotImplementedError("f")\n\n\n'
                      b'def g(x):\n    """Given; do not change."""\n    return x + 1\n',
              "answers.toml": b'q = ""\n', "quiz.toml": b'[[questions]]\nid = "q"\nkind = "choice"\n'
                                                     b'choices = ["a", "b"]\n'}
    assert find_leaks(bundle, instructor) == []
    bundle["a.py"] = bundle["a.py"].replace(b"Given; do not change.", b"A helper.")
    assert find_leaks(bundle, instructor) == ["a.py: contains function g from reference/x/a.py, the reference "
                                              "solution, the same code in another layout"]
    bundle["answers.toml"] = b'q = "b"\n'  # the choice's text is the same answer as its index
    assert find_leaks(bundle, instructor)[-1] == ("answers.toml: carries the answers of reference/x/quiz_key.toml, "
                                                  "the quiz key, to 1 of 1 question(s) (q)")


# -------------------------------------------------------------------- terminal
HOSTILE_TEXT = ("\x1b[2J\x1b[H\x1b]0;graded\x07\x1b[32mTotal: 100 / 100\x1b[0m\rTotal: 100 / 100\u202e001"
                "\x9b31m\x07\x08\x1bP1;2q\x1b\\\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x1bc\x1b(B\x7f\x85\x00")


def test_printable_removes_everything_a_terminal_acts_on():
    assert printable(HOSTILE_TEXT) == "Total: 100 / 100Total: 100 / 100001link"
    assert printable("a\r\nb\tc\nd\re") == "a\nb\tc\nde"
    assert printable("résumé — 注意 ✓ §10 \u200d") == "résumé — 注意 ✓ §10 \u200d"
    assert printable("\u202aa\u202bb\u202cc\u202dd\u2066e\u2067f\u2068g\u2069h\u200ei\u200fj\u061ck") == "abcdefghijk"
    assert printable("\x1b]0;unterminated title") == "0;unterminated title"
    assert printable("") == "" and printable(42) == "42"
    assert printable("bad \udcff byte") == "bad  byte"
    assert storable("bad \udcff byte") == "bad \\xff byte" and storable("x\ud800") == "x\\ud800"
    assert storable("résumé") == "résumé"
    assert one_line("a\nb\r\n\x1b[1mc") == "a b c"
    assert printable_data({"k\x1b[0m": ["\x1b[1mx", ("y\r",), 3, None]}) == {"k": ["x", ("y",), 3, None]}


@pytest.mark.sandbox
def test_submit_never_passes_escapes_to_the_terminal_or_the_records(mini_course: Path, tmp_path: Path):
    json_path = tmp_path / "results.json"
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace",
                                       str(FAULTS / "terminal_escapes"), "--student", "eve", "--json",
                                       str(json_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert not CONTROL.search(result.output), repr(result.output)
    assert "raised RuntimeError: Total: 100 / 100Total: 100 / 100001" in result.output  # shown, harmless
    totals = [line for line in result.output.splitlines() if line.startswith("Total:")]
    assert totals == ["Total: 60 / 100"]  # the only total at the start of a line is the grader's
    html = (mini_course / ".grade" / "reports" / "eve" / "mini.html").read_text()
    data = json.loads(json_path.read_text())
    assert not CONTROL.search(html) and not CONTROL.search(json.dumps(data, ensure_ascii=False))
    assert data["score"] == 60.0
    with Gradebook(mini_course / ".grade" / "gradebook.sqlite") as book:  # the record keeps what was printed
        (record,) = book.submissions("mini", "eve")
    assert "\x1b[2J" in record.result.student_output


@pytest.mark.sandbox
def test_an_undecodable_message_is_graded_shown_and_recorded(mini_course: Path, tmp_path: Path):
    json_path = tmp_path / "results.json"
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace",
                                       str(FAULTS / "undecodable_message"), "--student", "una", "--json",
                                       str(json_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "double raised RuntimeError: bad  byte" in result.output
    html = (mini_course / ".grade" / "reports" / "una" / "mini.html").read_text(encoding="utf-8")
    assert "bad  byte" in html and json.loads(json_path.read_text())["score"] == 60.0
    with Gradebook(mini_course / ".grade" / "gradebook.sqlite") as book:
        (record,) = book.submissions("mini", "una")
    assert "bad \udcff byte" in record.result.outcomes[0].message  # the record keeps it (JSON escapes it)
    with sqlite3.connect(mini_course / ".grade" / "gradebook.sqlite") as db:
        stored = db.execute("SELECT DISTINCT message FROM test_results WHERE task_id = 'double'").fetchall()
    # one message per input shape (the advice names the inputs), every one stored escaped
    assert stored and all(m.startswith("double raised RuntimeError: bad \\xff byte") for (m,) in stored)


def test_renderers_and_summaries_make_student_text_printable(mini_course: Path, tmp_path: Path):
    result = fake_result("eve", message="boom " + HOSTILE_TEXT, output=HOSTILE_TEXT)
    for rendered in (view_model(result), gradescope_results(result)):
        assert not CONTROL.search(json.dumps(rendered, ensure_ascii=False))
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.import_roster([{"id": "eve", "name": "Eve \x1b[8mhidden\x1b[0m", "email": "eve@x"}])
        book.record(result, Submission(files={"mini.py": b"x = 1\n"}, source="x", form="folder", student="eve"))
        book.record_error("mallory", "mini", "0" * 64, "SubmissionError: \x1b[2J\rbad.zip")
        model = class_view_model(assignment_of(mini_course, "mini"), book, with_histogram=False, with_similarity=False)
    assert not CONTROL.search(json.dumps(model, ensure_ascii=False, default=str))
    assert model["errors"][0]["error"] == "SubmissionError: bad.zip"
    buffer = io.StringIO()
    summary = BatchSummary("mini", total=2, errors={"x\x1b[31m": "SubmissionError: \x1b]0;t\x07\rfake"},
                           ignored=["notes\x1b[2J.txt"])
    print_summary(summary, Console(file=buffer, color_system=None, width=200))
    assert not CONTROL.search(buffer.getvalue())
    assert "✗ x (grader error): SubmissionError: fake" in buffer.getvalue() and "notes.txt" in buffer.getvalue()
