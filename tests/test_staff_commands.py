"""A TA's week through the real CLI: overrides with a reason (audited, surviving a regrade, shown in
the report and exports), extensions (used by submit and batch as well as by what reads grades),
and the grading history. Every grade here is a real sandboxed grading of the tiny course."""

from __future__ import annotations

import csv
import io
import json
import pickle
import re
import shutil
import sqlite3
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from class_builder import ASSIGNMENT, BY_ID, build_class
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.due import OWN_DATE, DueDate
from grader.pipeline.batch import run_batch
from grader.pipeline.jobs import GradingJob, JobResult, run_job
from grader.storage.gradebook import Gradebook
from tests.conftest import FAULTS, ROOT, assignment_of, copy_mini_course

LATE = "2026-12-02T08:00:00+00:00"  # 20 h after the deadline: one started day, 25 % off


@pytest.fixture
def course(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


@pytest.fixture
def grade(course: Path, monkeypatch):
    monkeypatch.setenv("GRADE_STAFF", "ta-sam")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0):
        result = runner.invoke(main, ["--course", str(course), *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    return invoke


def csv_row(grade, student: str) -> dict:
    return {row["student"]: row for row in csv.DictReader(io.StringIO(grade("export", "mini", "--format", "csv")))}[
        student]


@pytest.mark.sandbox
@pytest.mark.slow
def test_an_override_is_audited_survives_a_regrade_and_shows_everywhere(grade, course: Path):
    wrong_axis = str(FAULTS / "wrong_axis")
    grade("submit", "mini", "--workspace", wrong_axis, "--student", "bob")
    computed = float(csv_row(grade, "bob")["total"])
    assert csv_row(grade, "bob")["normalize"] == "0"
    out = grade("override", "mini", "bob", "--task", "normalize", "--points", "30",
                "--reason", "regrade request: only the axis was wrong")
    assert "normalize" in out and "ta-sam" in out and "active" in out
    with sqlite3.connect(course / ".grade" / "gradebook.sqlite") as db:
        row = db.execute("SELECT task_id, points, reason, author, total_before, total_after, cleared_at "
                         "FROM overrides").fetchone()
    assert row == ("normalize", 30.0, "regrade request: only the axis was wrong", "ta-sam", computed,
                   computed + 30, None)

    grade("submit", "mini", "--workspace", wrong_axis, "--student", "bob")  # a regrade of the same files
    history = grade("history", "mini", "bob")
    assert history.count("bob") == 2 and "graded again" in history and "current" in history
    row = csv_row(grade, "bob")
    assert (float(row["total"]), row["normalize"]) == (computed + 30, "30")  # the override still applies
    assert float(row["computed_total"]) == computed and "only the axis was wrong" in row["overrides"]
    report = course / ".grade" / "reports" / "bob" / "mini.html"
    grade("override", "mini", "bob", "--task", "normalize", "--points", "32", "--reason", "second look",
          "--by", "prof-lee")
    assert "Course staff changed this grade: normalize 0 → 32 points (second look)." in report.read_text()
    assert float(re.search(r'id="total" data-total="([0-9.]+)"', report.read_text()).group(1)) == computed + 32
    page = course / "class.html"
    grade("report", "mini", "--out", str(page))
    html = page.read_text()
    assert 'data-override="bob|normalize" data-active="true"' in html  # the newest
    assert 'data-override="bob|normalize" data-active="false"' in html  # the one it replaced, kept
    assert "prof-lee" in html
    assert float(re.search(r'data-student="bob" data-total="([0-9.]+)"', html).group(1)) == computed + 32
    listed = grade("overrides", "mini", "--all")
    assert "replaced by a newer" in listed and "prof-lee" in listed

    grade("override", "mini", "bob", "--task", "normalize", "--clear", "--reason", "appeal withdrawn")
    assert float(csv_row(grade, "bob")["total"]) == computed
    assert grade("overrides", "mini") == "Score overrides: none\n"


@pytest.mark.parametrize("args, words", [
    (["--points", "41", "--task", "normalize", "--reason", "r"], "task 'normalize' is worth 40 points; 41 is more"),
    (["--points", "5", "--task", "nope", "--reason", "r"], "mini has no task 'nope'"),
    (["--total", "-1", "--reason", "r"], "override points must be a number >= 0"),
    (["--total", "101", "--reason", "r"], "mini is worth at most 100 points"),
    (["--total", "5", "--reason", "  "], "give a reason"),
    (["--clear", "--reason", "r"], "has no active override of the total"),
])
def test_a_wrong_override_is_refused_with_one_line(grade, course: Path, args: list[str], words: str):
    with Gradebook(course / ".grade" / "gradebook.sqlite") as book:
        book.record_error("bob", "mini", "0" * 64, "x")  # a gradebook, but bob was never graded
    output = grade("override", "mini", "bob", *args, code=2)
    assert words in output and output.startswith("Error: ") and output.count("\n") == 1, output


def test_an_override_needs_a_graded_submission_and_both_flags_make_no_sense(grade, course: Path):
    with Gradebook(course / ".grade" / "gradebook.sqlite") as book:
        book.record_error("bob", "mini", "0" * 64, "x")
    assert "bob has no graded submission of mini; grade it first" in \
        grade("override", "mini", "bob", "--total", "5", "--reason", "r", code=2)
    assert "--clear takes no --points or --total" in \
        grade("override", "mini", "bob", "--total", "5", "--clear", "--reason", "r", code=2)
    assert "give --task ID --points X (a task) or --total X (the total)" in \
        grade("override", "mini", "bob", "--reason", "r", code=2)
    assert "--total X sets the total; a task's points are --task ID --points X" in \
        grade("override", "mini", "bob", "--task", "double", "--total", "5", "--reason", "r", code=2)
    assert "give the points of task double: --points X" in \
        grade("override", "mini", "bob", "--task", "double", "--reason", "r", code=2)


@pytest.mark.sandbox
@pytest.mark.slow
def test_an_extension_is_used_by_submit_and_by_what_reads_recorded_grades(grade, course: Path):
    reference = str(course / "reference" / "mini")
    grade("submit", "mini", "--workspace", reference, "--student", "ada", "--submitted-at", LATE)
    assert csv_row(grade, "ada")["late_days"] == "1" and csv_row(grade, "ada")["total"] == "60"  # 80 - 25 %
    out = grade("extension", "mini", "ada", "--days", "1", "--reason", "flu")
    assert "1 day(s) more" in out and "ta-sam" in out
    row = csv_row(grade, "ada")  # the grade recorded before the extension, read today
    assert (row["late_days"], row["total"], row["extension"]) == ("0", "80", "1 day(s) more")
    json_path = course / "results.json"
    grade("submit", "mini", "--workspace", reference, "--student", "ada", "--submitted-at", LATE,
          "--json", str(json_path))
    assert json.loads(json_path.read_text())["score"] == 80  # submit held ada to her own deadline
    with Gradebook(course / ".grade" / "gradebook.sqlite") as book:
        latest = book.latest("mini")["ada"].result.score
    assert (latest.late_days, latest.due_at, latest.extension_s) == (0, "2026-12-02T12:00:00+00:00", 86400)
    grade("extension", "mini", "ada", "--until", "2026-12-01T20:00:00+00:00", "--reason", "shorter after all")
    assert csv_row(grade, "ada")["late_days"] == "1"
    grade("extension", "mini", "ada", "--clear", "--reason", "granted in error")
    assert csv_row(grade, "ada")["extension"] == "" and grade("extensions", "mini") == "Extensions: none\n"
    assert "an extension must be more than 0" in grade("extension", "mini", "ada", "--days", "0", "--reason", "r",
                                                       code=2)
    assert "give the extension as --days N" in grade("extension", "mini", "ada", "--reason", "r", code=2)


class RecordingExecutor:
    """Runs each job for real, in this process, and keeps the jobs it was given."""

    slots = 1

    def __init__(self):
        self.jobs: list[GradingJob] = []

    def restart(self) -> None:
        pass

    def submit(self, job: GradingJob) -> Future:
        self.jobs.append(job)
        future: Future = Future()
        future.set_result(run_job(job))
        return future

    def shutdown(self, cancel: bool = False) -> None:
        pass


@pytest.mark.sandbox
@pytest.mark.slow
def test_batch_jobs_carry_each_students_extension_to_the_late_policy(tmp_path: Path):
    students = [BY_ID["s24"], BY_ID["s20"]]  # s24 is one day late, s20 on time
    course_dir, submissions = build_class(tmp_path, students)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,extension_days\ns24,Late Student,s24@x,1.5\ns20,On Time,s20@x,\n")
    result = CliRunner().invoke(main, ["--course", str(course_dir), "roster", "import", str(roster), "--gradebook",
                                       str(tmp_path / "gb.sqlite")])
    assert result.exit_code == 0 and "1 with an extension on every assignment" in result.output
    executor = RecordingExecutor()
    with Gradebook(tmp_path / "gb.sqlite") as book:
        run_batch(assignment_of(course_dir, ASSIGNMENT), submissions, book, executor=executor, write_reports=False)
        latest = book.latest(ASSIGNMENT)
    jobs = {job.student: job for job in executor.jobs}
    assert jobs["s24"].due.extension == timedelta(days=1.5) and jobs["s24"].due.extension_from == "the roster"
    assert jobs["s24"].due.deadline == assignment_of(course_dir, ASSIGNMENT).manifest.deadline
    assert jobs["s20"].due == assignment_of(course_dir, ASSIGNMENT).due_date  # no extension: the manifest's
    assert latest["s24"].result.score.late_days == 0  # 20 h late, 36 h more: on time
    assert latest["s24"].total == pytest.approx(BY_ID["s24"].expected_total / 0.75, abs=1e-2)
    assert latest["s24"].result.score.extension_s == 1.5 * 86400


def test_a_job_is_graded_by_any_executor_with_its_due_date(tmp_path: Path):
    own = DueDate(datetime.fromisoformat("2026-12-03T12:00:00+00:00"), deadline_from=OWN_DATE)
    job = GradingJob(assignment_of(ROOT, "assignment1"), path="/p", student="s", due=own, seed=3)
    request = job.request()
    assert request.due == own and request.seed == 3 and request.mode == "submit"
    assert DueDate.from_dict(own.to_dict()) == own  # a due date travels as plain data
    assert pickle.loads(pickle.dumps(job)) == job  # a job crosses processes whole
    assert JobResult("s").error is None  # a plain-data result, whatever executor ran it


def record_fake_grade(course: Path, student: str, normalize: bool = True) -> None:
    """A recorded grading of `student` (no sandbox): double and the quiz passed, normalize as given."""
    from grader.core.records import FAILED, PASSED, GradeResult, TestOutcome
    from grader.core.scoring import score
    from grader.intake.submission import Submission

    manifest = assignment_of(course, "mini").manifest
    outcomes = [TestOutcome(name="t1", task="double", status=PASSED, fraction=1.0),
                TestOutcome(name="t2", task="normalize", status=PASSED if normalize else FAILED,
                            fraction=1.0 if normalize else 0.0),
                TestOutcome(name="quiz::row_sum", task="quiz", status=PASSED, fraction=1.0)]
    result = GradeResult(assignment_id="mini", assignment_title=manifest.title, student=student, mode="submit",
                         score=score(manifest, outcomes), outcomes=tuple(outcomes), findings=(),
                         submission_sha256=(student * 64)[:64], submission_form="folder", submitted_at=None,
                         graded_at="2026-12-01T13:00:00+00:00", seed=1, isolation="process",
                         isolation_level="process", duration_s=1.0)
    with Gradebook(course / ".grade" / "gradebook.sqlite") as book:
        book.record(result, Submission(files={"mini.py": b"x\n"}, source="x", form="folder", student=student))


def test_the_total_is_overridden_with_total_and_a_task_with_task_and_points(grade, course: Path):
    record_fake_grade(course, "bob", normalize=False)
    assert csv_row(grade, "bob")["total"] == "60"
    out = grade("override", "mini", "bob", "--total", "75", "--reason", "the README says: the total")
    assert "total" in out and "60 → 75" in out and "active" in out
    assert csv_row(grade, "bob")["total"] == "75"
    grade("override", "mini", "bob", "--task", "normalize", "--points", "20", "--reason", "partly right")
    assert csv_row(grade, "bob")["normalize"] == "20" and csv_row(grade, "bob")["total"] == "75"  # the total wins
    grade("override", "mini", "bob", "--clear", "--reason", "the task's override is enough")  # the total's
    assert csv_row(grade, "bob")["total"] == "80"
    grade("override", "mini", "bob", "--points", "70", "--reason", "an older script")  # --points alone: the total
    assert csv_row(grade, "bob")["total"] == "70"
    listed = grade("overrides", "mini", "bob")
    assert listed.count("\tbob\ttotal\t70\t") == 1 and "\tbob\tnormalize\t20\t" in listed


def test_roster_list_shows_the_class_list_and_with_everyone_who_is_not_on_it(grade, course: Path, tmp_path: Path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,section,extension_days\nada,Ada L,ada@x,Lab A,2\nbob,Bob K,bob@x,,\n")
    grade("roster", "import", str(roster))
    record_fake_grade(course, "ada")
    record_fake_grade(course, "zed")  # graded, not on the roster
    listed = grade("roster", "list")
    lines = listed.splitlines()
    assert lines[0] == "Roster: 2 student(s)"
    assert lines[1] == "id\tname\temail\tsection\textension\tgraded\tnote"
    assert lines[2:] == ["ada\tAda L\tada@x\tLab A\t2 day(s) more\tmini\t", "bob\tBob K\tbob@x\t\t\tnone\t"]
    everyone = grade("roster", "list", "--everyone").splitlines()
    assert everyone[-1] == "zed\t\t\t\t\tmini\tnot on the roster"
    empty = tmp_path / "empty.sqlite"
    with Gradebook(empty):
        pass
    assert grade("roster", "list", "--gradebook", str(empty)) == \
        "Roster: 0 student(s): no roster imported (grade roster import ROSTER.csv)\n"


def test_an_extension_that_replaces_another_says_so_and_how_to_undo_it(grade, course: Path, tmp_path: Path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,extension_days\nada,Ada L,ada@example.org,1\n")
    grade("roster", "import", str(roster))
    out = grade("extension", "mini", "ada", "--hours", "12", "--reason", "asked for a day")
    line = " ".join(out.split())
    assert "This replaces the roster's extension for every assignment (1 day(s) more: roster extension_days)" in line
    assert "ada now has LESS time (2026-12-02T00:00:00+00:00 instead of 2026-12-02T12:00:00+00:00)" in line
    assert 'To undo: grade extension mini ada --clear --reason "..." (the roster\'s applies again)' in line
    out = " ".join(grade("extension", "mini", "ada", "--days", "2", "--reason", "more").split())
    assert "This replaces their earlier extension (12 hour(s) more: asked for a day, by ta-sam) for mini." in out
    assert "LESS" not in out and 'To undo: grade extension mini ada --hours 12 --reason "..."' in out
    fresh = " ".join(grade("extension", "mini", "bob", "--days", "1", "--reason", "flu").split())
    assert "replaces" not in fresh


@pytest.mark.sandbox
@pytest.mark.slow
def test_an_override_below_what_a_new_grading_earns_is_said_wherever_the_grade_shows(grade, course: Path,
                                                                                    tmp_path: Path):
    grade("submit", "mini", "--workspace", str(FAULTS / "wrong_axis"), "--student", "bob")
    grade("override", "mini", "bob", "--task", "normalize", "--points", "30", "--reason", "partial credit")
    reference = course / "reference" / "mini"
    out = " ".join(grade("submit", "mini", "--workspace", str(reference), "--student", "bob").split())
    undo = 'To undo: grade override mini bob --task normalize --clear --reason "..."'
    assert "the override of task normalize (30, set" in out and "is below the 40 the latest grading earns" in out
    assert "so the grade counts 30" in out and undo in out
    assert csv_row(grade, "bob")["normalize"] == "30"
    assert csv_row(grade, "bob")["note"] == ("an override set before the latest grading is below what it earns: "
                                             "task normalize 30 < 40")
    report = (course / ".grade" / "reports" / "bob" / "mini.html").read_text()
    assert "sets task normalize to 30 points, below the 40 this grading earns" in report
    history = " ".join(grade("history", "mini", "bob").split())
    assert history.count("is below the 40") == 1 and undo in history
    page = course / "class.html"
    grade("report", "mini", "--out", str(page))
    assert "override below the latest grading: task normalize 30 &lt; 40 earned" in page.read_text()
    entries = tmp_path / "entries"
    shutil.copytree(reference, entries / "bob", ignore=shutil.ignore_patterns("__pycache__"))
    (entries / "bob" / "mini.py").write_text((reference / "mini.py").read_text() + "\n# handed in again\n")
    batch = " ".join(grade("batch", "mini", str(entries), "--jobs", "1").split())
    assert "is below the 40 the latest grading earns" in batch
    report = (course / ".grade" / "reports" / "bob" / "mini.html").read_text()  # written by the batch's job, then
    assert "sets task normalize to 30 points, below the 40 this grading earns" in report  # with the grade as it stands
    grade("override", "mini", "bob", "--task", "normalize", "--points", "12", "--reason", "copied")  # meant lower
    assert "is below" not in " ".join(grade("history", "mini", "bob").split())
