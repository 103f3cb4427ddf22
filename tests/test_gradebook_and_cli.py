"""The CLI contract (docs/CLI.md) and gradebook round-trips, on the tiny course."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.core.records import GradeResult
from grader.pipeline.grading import GradeRequest, grade, open_submission
from grader.storage.gradebook import Gradebook
from tests.conftest import FAULTS


@pytest.fixture
def run(mini_course):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, ["--course", str(mini_course), *args], catch_exceptions=False)

    return invoke


def test_list(run):
    result = run("list")
    assert result.exit_code == 0
    assert "mini" in result.output and "normalize" in result.output and "2026-12-01" in result.output


@pytest.mark.sandbox
def test_check_exit_codes(run, mini_course):
    stubs = run("check", "mini")
    assert stubs.exit_code == 1 and "not implemented" in stubs.output
    good = run("check", "mini", "--workspace", str(mini_course / "reference/mini"))
    assert good.exit_code == 0
    one_task = run("check", "mini", "--workspace", str(mini_course / "reference/mini"), "--task", "double")
    assert one_task.exit_code == 0 and "normalize" not in one_task.output.split("Total")[0].split("double")[-1]
    assert not (mini_course / ".grade" / "gradebook.sqlite").exists()  # check never records


@pytest.mark.sandbox
def test_submit_writes_json_html_and_gradebook(run, mini_course, tmp_path):
    json_path = tmp_path / "results.json"
    result = run("submit", "mini", "--workspace", str(mini_course / "reference/mini"),
                 "--student", "ada", "--json", str(json_path),
                 "--submitted-at", "2026-12-02T12:00:00+00:00")
    assert result.exit_code == 0, result.output
    data = json.loads(json_path.read_text())
    assert set(data) >= {"score", "execution_time", "output", "tests"}
    for test in data["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
    # one day late after the grace period: -25 %; the reference has no answers.toml, so no quiz
    assert data["score"] == pytest.approx(80 * 0.75)
    html = mini_course / ".grade/reports/ada/mini.html"
    assert html.is_file() and "ada" in html.read_text()
    with Gradebook(mini_course / ".grade/gradebook.sqlite") as book:
        records = book.submissions("mini")
        assert len(records) == 1 and records[0].student_id == "ada"
        assert records[0].total == data["score"]


@pytest.mark.sandbox
def test_regrading_the_same_files_replaces(run, mini_course):
    for _ in range(2):
        assert run("submit", "mini", "--workspace", str(FAULTS / "wrong_axis"),
                   "--student", "bob").exit_code == 0
    db = sqlite3.connect(mini_course / ".grade/gradebook.sqlite")
    assert db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM test_results").fetchone()[0] == 7
    diagnosis = db.execute("SELECT DISTINCT diagnosis_id FROM test_results WHERE task_id = 'normalize'")
    assert diagnosis.fetchall() == [("normalize_wrong_axis",)]


@pytest.mark.sandbox
def test_no_record(run, mini_course):
    assert run("submit", "mini", "--no-record").exit_code == 0
    assert not (mini_course / ".grade/gradebook.sqlite").exists()


@pytest.mark.parametrize("args, words", [
    (["submit", "nope"], "unknown assignment 'nope'"),
    (["submit", "mini", "--submitted-at", "yesterday"], "not an ISO 8601"),
    (["check", "mini", "--task", "nope"], "has no task 'nope'"),
])
def test_errors_are_one_line(mini_course, args, words):
    result = CliRunner().invoke(main, ["--course", str(mini_course), *args])
    assert result.exit_code == 2
    assert words in result.output
    assert "Traceback" not in result.output


def test_bad_workspace_is_an_error_not_a_crash(mini_course, tmp_path):
    bad = tmp_path / "s.zip"
    bad.write_bytes(b"garbage")
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini",
                                       "--workspace", str(bad)])
    assert result.exit_code == 2 and "not a valid zip" in result.output


@pytest.mark.sandbox
def test_gradebook_round_trip_keeps_files_and_results(mini_course, tmp_path):
    course = Course(mini_course)
    assignment = Assignment.load(course, "mini")
    submission = open_submission(assignment, FAULTS / "nan_output", student="cy")
    result = grade(assignment, submission, GradeRequest(seed=1234))
    with Gradebook(tmp_path / "book.sqlite") as book:
        book.record(result, submission)
        (record,) = book.submissions("mini", "cy")
        assert book.files(record.id) == submission.files
        assert record.result == GradeResult.from_dict(json.loads(json.dumps(result.to_dict())))
        assert record.result.seed == 1234
        assert book.has("cy", "mini", submission.sha256)
        book.record_error("dee", "mini", "0" * 64, "not a notebook")
        assert book.errors("mini")[0]["student"] == "dee"
        assert book.count("students") == 2
