"""`grade batch` on a class of 32 mixed submissions, and everything built on it.

The class (tests/class_builder.py) is graded once, for real, with two pool
workers (~30 sandboxed grades); every test in the `graded_class` group reads
that one gradebook. Resumability, regrades and worker failures are checked
with small fake executors that replay stored results, so they cost no grading.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import zipfile
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest
from class_builder import ASSIGNMENT, BY_ID, FIXTURE, ROSTER_ONLY, STUDENTS, build_class, grade_or_exit, write_roster
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.course import Course
from grader.core.errors import ClassDataError, GraderError
from grader.intake.submission import load_submission
from grader.pipeline.batch import run_batch
from grader.pipeline.discovery import discover
from grader.pipeline.executor import ExecutorBroken
from grader.pipeline.jobs import GradingJob, JobResult
from grader.pipeline.local_pool import LocalProcessExecutor
from grader.render.class_report import class_view_model
from grader.storage.gradebook import Gradebook
from tests.conftest import assignment_of

GRADED = [s for s in STUDENTS if not s.error]
ERRORS = [s for s in STUDENTS if s.error]


@dataclass
class GradedClass:
    course: Path
    submissions: Path
    gradebook: Path
    output: str


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory) -> GradedClass:
    root = tmp_path_factory.mktemp("class")
    course, submissions = build_class(root)
    gradebook = root / "gradebook.sqlite"
    roster = write_roster(root / "roster.csv")
    common = ["--course", str(course)]
    result = invoke(*common, "roster", "import", str(roster), "--gradebook", str(gradebook))
    assert result.exit_code == 0, result.output
    assert f"{len(STUDENTS) + len(ROSTER_ONLY)} student(s) imported" in result.output
    result = invoke(*common, "batch", ASSIGNMENT, str(submissions), "--jobs", "2", "--gradebook", str(gradebook))
    assert result.exit_code == 0, result.output
    return GradedClass(course, submissions, gradebook, result.output)


def rows(gradebook: Path, query: str) -> list[tuple]:
    with sqlite3.connect(gradebook) as db:
        return db.execute(query).fetchall()


# ----------------------------------------------------------------- the real batch
@pytest.mark.slow
@pytest.mark.sandbox  # the first of them to run grades the class (graded_class)
def test_every_submission_is_recorded_as_expected(graded_class: GradedClass):
    assert re.search(r"graded\s*│\s*30\b", graded_class.output)
    # a broken notebook and a truncated zip: the hand-ins' problems, not the grader's
    assert re.search(r"hand-in problems \(not readable as a submission\)\s*│\s*2\b", graded_class.output)
    assert re.search(r"grader errors\s*│\s*0\b", graded_class.output)
    assert "ignored (not a folder, .zip or .ipynb): notes.txt" in graded_class.output
    table = graded_class.output[graded_class.output.index("Students of this run (mini)"):].splitlines()
    assert table[1] == "student\ttotal\tlate\tchanged"
    assert sum("\tfirst grading" in line for line in table) == len(GRADED)  # one row per student
    zips = [s.id for s in GRADED if s.form == "zip"]  # zipped with a top folder: unwrapped, and said so
    said = "\n".join(table)
    assert all(f"its files were in the folder {student}-work/ inside the entry" in said for student in zips)
    assert sum("\thand-in could not be read: " in line for line in table) == len(ERRORS)
    with Gradebook(graded_class.gradebook) as book:
        latest = book.latest(ASSIGNMENT)
        assert sorted(latest) == sorted(s.id for s in GRADED)
        for student in GRADED:
            record = latest[student.id]
            result = record.result
            assert record.total == pytest.approx(student.expected_total, abs=1e-3), student
            assert result.score.late_days == student.late_days, student.id
            assert result.mode == "submit" and result.student == student.id
            assert result.submission_form == student.form, student.id
            assert record.submitted_at == student.submitted_at
            diagnosed = {o.diagnosis["id"] for o in result.outcomes if o.diagnosis}
            assert diagnosed == set(student.diagnoses), student.id
            # the parent recorded exactly the files it hashed, and the worker wrote the report
            assert record.sha256 == load_submission(next(graded_class.submissions.glob(f"{student.id}*")),
                                                    ("mini.py",)).sha256
            report = graded_class.course / ".grade" / "reports" / student.id / f"{ASSIGNMENT}.html"
            assert report.is_file() and student.id in report.read_text()
        errors = {e["student"]: e["error"] for e in book.errors(ASSIGNMENT)}
        assert set(errors) == {s.id for s in ERRORS}
        assert "not a readable Jupyter notebook" in errors["s28"]
        assert "not a valid zip file" in errors["s29"]
        assert book.count("submissions") == len(GRADED)
        assert book.count("batch_errors") == len(ERRORS)
        assert book.count("students") == len(STUDENTS) + len(ROSTER_ONLY)
    forbidden = rows(graded_class.gradebook, "SELECT status FROM task_scores JOIN submissions ON id = "
                                             "submission_id WHERE student_id = 's14' AND task_id = 'normalize'")
    assert forbidden == [("forbidden",)]


@pytest.mark.slow
@pytest.mark.sandbox  # the first of them to run grades the class (graded_class)
def test_a_second_run_skips_everything_and_duplicates_nothing(graded_class: GradedClass):
    before = rows(graded_class.gradebook, "SELECT id, student_id, sha256, graded_at FROM submissions ORDER BY id")
    result = invoke("--course", str(graded_class.course), "batch", ASSIGNMENT, str(graded_class.submissions),
                    "--jobs", "2", "--gradebook", str(graded_class.gradebook))
    assert result.exit_code == 0, result.output
    assert re.search(r"graded\s*│\s*0\b", result.output)
    assert re.search(r"skipped \(already graded\)\s*│\s*30\b", result.output)
    assert re.search(r"hand-in problems \(not readable as a submission\)\s*│\s*2\b", result.output)  # tried again
    assert re.search(r"grader errors\s*│\s*0\b", result.output)
    assert rows(graded_class.gradebook, "SELECT id, student_id, sha256, graded_at FROM submissions "
                                        "ORDER BY id") == before
    assert rows(graded_class.gradebook, "SELECT COUNT(*) FROM batch_errors") == [(2,)]


@pytest.mark.slow
@pytest.mark.sandbox  # the first of them to run grades the class (graded_class)
def test_csv_export_has_every_student(graded_class: GradedClass, tmp_path: Path):
    out = tmp_path / "grades.csv"
    result = invoke("--course", str(graded_class.course), "export", ASSIGNMENT, "--format", "csv",
                    "--out", str(out), "--gradebook", str(graded_class.gradebook))
    assert result.exit_code == 0, result.output
    table = list(csv.DictReader(out.read_text().splitlines()))
    assert list(table[0]) == ["student", "name", "email", "total", "max", "double", "normalize", "quiz",
                              "late_penalty", "late_days", "submitted_at", "graded_at",
                              "computed_total", "overrides", "extension", "note"]
    by_student = {row["student"]: row for row in table}
    assert set(by_student) == {s.id for s in STUDENTS} | set(ROSTER_ONLY)
    for student in GRADED:
        row = by_student[student.id]
        assert float(row["total"]) == pytest.approx(student.expected_total, abs=1e-3)
        assert row["max"] == "100" and row["name"] == f"Student {student.id[1:]}"
        assert int(row["late_days"]) == student.late_days
        assert row["submitted_at"] == (student.submitted_at or "")
        raw = float(row["double"]) + float(row["normalize"]) + float(row["quiz"])
        assert raw - float(row["late_penalty"]) == pytest.approx(float(row["total"]), abs=1e-3)
    for missing in [*ROSTER_ONLY, "s28", "s29"]:
        row = by_student[missing]
        assert row["total"] == row["double"] == row["graded_at"] == "" and row["email"]
        assert row["note"].startswith("hand-in could not be read: SubmissionError: ") == (missing in ("s28", "s29"))
    # stdout by default, the same text
    result = invoke("--course", str(graded_class.course), "export", ASSIGNMENT, "--format", "csv",
                    "--gradebook", str(graded_class.gradebook))
    assert list(csv.DictReader(io.StringIO(result.output))) == table


@pytest.mark.slow
@pytest.mark.sandbox  # the first of them to run grades the class (graded_class)
def test_gradescope_export_one_results_json_per_student(graded_class: GradedClass, tmp_path: Path):
    result = invoke("--course", str(graded_class.course), "export", ASSIGNMENT, "--format", "gradescope",
                    "--out", str(tmp_path / "gs"), "--gradebook", str(graded_class.gradebook))
    assert result.exit_code == 0, result.output
    files = sorted((tmp_path / "gs").glob("*/results.json"))
    assert [f.parent.name for f in files] == sorted(s.id for s in GRADED)
    for path in files:
        data = json.loads(path.read_text())
        student = BY_ID[path.parent.name]
        assert data["score"] == pytest.approx(student.expected_total, abs=1e-3)
        assert {"score", "execution_time", "output", "tests"} <= set(data)
        assert all({"name", "score", "max_score", "output", "visibility"} <= set(t) for t in data["tests"])


@pytest.mark.slow
@pytest.mark.sandbox  # the first of them to run grades the class (graded_class)
def test_class_report_numbers(graded_class: GradedClass, tmp_path: Path):
    course = Course(graded_class.course)
    with Gradebook(graded_class.gradebook) as book:
        model = class_view_model(assignment_of(course, ASSIGNMENT), book)
    totals = [s.expected_total for s in GRADED]
    assert model["counts"] == {"roster": 34, "graded": 30, "missing": 4, "late": 3, "errors": 0, "handin": 2,
                               "off_roster": 0, "submissions": 30}  # a broken notebook and zip: the hand-in's
    assert model["stats"]["mean"] == pytest.approx(sum(totals) / len(totals), abs=0.01)
    assert sum(b["count"] for b in model["histogram_bins"]) == 30
    assert model["histogram_bins"][-1]["count"] == sum(t >= 90 for t in totals)
    assert model["histogram"].startswith("data:image/png;base64,")
    tasks = {t["id"]: t for t in model["tasks"]}
    double_full = sum(BY_ID[s.id].kind not in ("squares", "raises", "syntax", "stub") for s in GRADED)
    assert tasks["double"]["full_marks"] == double_full
    assert tasks["double"]["pass_rate"] == pytest.approx(round(100 * double_full / 30, 1))
    wrong_axis = sorted(s.id for s in GRADED if "normalize_wrong_axis" in s.diagnoses)
    assert tasks["normalize"]["misconceptions"][0] == {
        "id": "normalize_wrong_axis", "title": "normalised over the wrong axis", "section": "§10",
        "count": len(wrong_axis), "students": wrong_axis}
    assert [m["id"] for m in tasks["double"]["misconceptions"]] == ["double_square"]
    assert tasks["double"]["misconceptions"][0]["count"] == 3
    assert {row["student"]: row["late_days"] for row in model["late"]} == {"s24": 1, "s25": 1, "s26": 4}
    assert [m["student"] for m in model["missing"]] == ["s28", "s29", "z98", "z99"]
    assert [e["student"] for e in model["handin"]] == ["s28", "s29"] and model["errors"] == []
    assert [(m["student"], m["error"]) for m in model["missing"]] == [("s28", "hand-in"), ("s29", "hand-in"),
                                                                      ("z98", ""), ("z99", "")]
    assert model["leaderboard"] == []  # no timing task in this course
    # identical files: what load_submission hashes the same
    shas: dict[str, list[str]] = {}
    for student in GRADED:
        path = next(graded_class.submissions.glob(f"{student.id}*"))
        shas.setdefault(load_submission(path, ("mini.py",)).sha256, []).append(student.id)
    assert sorted(g["students"] for g in model["identical"]) == sorted(sorted(g) for g in shas.values()
                                                                         if len(g) > 1)
    # similarity: the disguised copy joins its source's group; the verbatim reference is flagged
    clusters = [set(c["students"]) for c in model["similarity"]["clusters"]]
    assert {"s01", "s02", "s22"} in clusters
    assert not any({"s01", "s05"} <= c or {"s03", "s05"} <= c for c in clusters)  # different code
    sources = {(m["a"], m["b"]) for m in model["similarity"]["sources"]}
    assert sources == {("s27", "reference/mini/mini.py")}
    # the rendered page carries the same numbers
    out = tmp_path / "class.html"
    result = invoke("--course", str(graded_class.course), "report", ASSIGNMENT, "--out", str(out),
                    "--gradebook", str(graded_class.gradebook))
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert re.search(r'id="graded" data-value="30"', html)
    assert re.search(r'id="missing" data-value="4"', html)
    assert f'id="mean" data-value="{model["stats"]["mean"]}"' in html
    assert 'data-misconception="normalize_wrong_axis" data-count="5"' in html
    assert 'data-cluster="s01,s02,s22"' in html and 'data-source="s27|reference/mini/mini.py"' in html
    assert "<script" not in html and "http://" not in html and "https://" not in html  # self-contained


# --------------------------------------------------------- resumability (no grading)
class ReplayExecutor:
    """Returns stored results instead of grading: counts what a batch asks for."""

    slots = 1

    def __init__(self, results: dict[str, dict], fail: dict[str, object] | None = None):
        self.results = results
        self.fail = fail or {}
        self.submitted: list[str] = []

    def restart(self) -> None:
        pass

    def submit(self, job: GradingJob) -> Future:
        self.submitted.append(job.student)
        future: Future = Future()
        problem = self.fail.get(job.student)
        if isinstance(problem, BaseException):
            future.set_exception(problem)
        elif isinstance(problem, str):
            future.set_result(JobResult(job.student, error=problem))
        else:
            future.set_result(JobResult(job.student, result=self.results[job.student]))
        return future

    def shutdown(self, cancel: bool = False) -> None:
        pass


def stored_results(gradebook: Path) -> dict[str, dict]:
    with Gradebook(gradebook) as book:
        return {s: r.result.to_dict() for s, r in book.latest(ASSIGNMENT).items()}


@pytest.mark.slow
@pytest.mark.sandbox  # the first of them to run grades the class (graded_class)
def test_killed_batch_resumes_with_the_rest_only(graded_class: GradedClass, tmp_path: Path):
    results = stored_results(graded_class.gradebook)
    course = Course(graded_class.course)
    half = sorted(results)[: len(results) // 2]
    fresh = tmp_path / "resumed.sqlite"
    with Gradebook(graded_class.gradebook) as old, Gradebook(fresh) as book:
        latest = old.latest(ASSIGNMENT)
        for student in half:  # what a batch killed half-way had recorded
            record = latest[student]
            book.record(record.result, load_submission(
                next(graded_class.submissions.glob(f"{student}*")), ("mini.py",), student=student))
        executor = ReplayExecutor(results)
        summary = run_batch(assignment_of(course, ASSIGNMENT), graded_class.submissions, book, executor=executor,
                            write_reports=False)
        assert sorted(executor.submitted) == sorted(set(results) - set(half))
        assert sorted(summary.skipped) == half and sorted(summary.graded) == sorted(executor.submitted)
        assert book.count("submissions") == len(results)
        # --force regrades everything, replacing rows instead of adding them
        again = ReplayExecutor(results)
        summary = run_batch(assignment_of(course, ASSIGNMENT), graded_class.submissions, book, executor=again,
                            force=True, write_reports=False)
        assert sorted(again.submitted) == sorted(results) and not summary.skipped
        assert book.count("submissions") == len(results)
        assert rows(fresh, "SELECT COUNT(*) FROM (SELECT DISTINCT student_id, sha256 FROM submissions)") == \
            [(len(results),)]


# ----------------------------------------------------- grader failures (no grading)
def test_grader_failures_are_recorded_and_the_batch_goes_on(tmp_path: Path, mini_result_dict):
    students = [s for s in STUDENTS if s.id in ("s01", "s03", "s05", "s08")]
    course_dir, submissions = build_class(tmp_path, students)
    course = Course(course_dir)
    results = {s.id: {**mini_result_dict, "student": s.id,
                      "submission_sha256": load_submission(next(submissions.glob(f"{s.id}*")),
                                                           ("mini.py",)).sha256} for s in students}
    executor = ReplayExecutor(results, fail={"s03": "grader error: ValueError: boom (at suite.py:12)",
                                             "s05": RuntimeError("executor lost the job")})
    with Gradebook(tmp_path / "gb.sqlite") as book:
        summary = run_batch(assignment_of(course, ASSIGNMENT), submissions, book, executor=executor,
                            write_reports=False)
        assert sorted(summary.graded) == ["s01", "s08"]
        assert summary.errors["s03"].startswith("grader error: ValueError: boom")
        assert "RuntimeError: executor lost the job" in summary.errors["s05"]
        assert {e["student"] for e in book.errors(ASSIGNMENT)} == {"s03", "s05"}
        # the next run retries only the errors; a success clears the error row
        retry = ReplayExecutor(results)
        summary = run_batch(assignment_of(course, ASSIGNMENT), submissions, book, executor=retry, write_reports=False)
        assert sorted(retry.submitted) == ["s03", "s05"] and sorted(summary.skipped) == ["s01", "s08"]
        assert book.errors(ASSIGNMENT) == [] and book.count("submissions") == 4


def test_a_dying_worker_is_retried_then_recorded(tmp_path: Path, mini_result_dict):
    students = [s for s in STUDENTS if s.id in ("s01", "s03")]
    course_dir, submissions = build_class(tmp_path, students)
    results = {s.id: {**mini_result_dict, "student": s.id,
                      "submission_sha256": load_submission(next(submissions.glob(f"{s.id}*")),
                                                           ("mini.py",)).sha256} for s in students}

    class Crashy(ReplayExecutor):
        restarts = 0

        def restart(self) -> None:
            self.restarts += 1

    executor = Crashy(results, fail={"s03": ExecutorBroken("worker died")})
    with Gradebook(tmp_path / "gb.sqlite") as book:
        summary = run_batch(assignment_of(course_dir, ASSIGNMENT), submissions, book, executor=executor,
                            write_reports=False)
    assert summary.graded == ["s01"] and "died 2 times" in summary.errors["s03"]
    assert executor.submitted.count("s03") == 2 and executor.restarts == 2  # a broken pool is always replaced


def test_a_job_refused_by_a_broken_pool_is_not_charged(tmp_path: Path, mini_result_dict):
    """A pool that broke between two waits refuses the next job at once: that job never ran."""
    students = [s for s in STUDENTS if s.id in ("s01", "s03")]
    course_dir, submissions = build_class(tmp_path, students)
    results = {s.id: {**mini_result_dict, "student": s.id,
                      "submission_sha256": load_submission(next(submissions.glob(f"{s.id}*")),
                                                           ("mini.py",)).sha256} for s in students}

    class Refusing(ReplayExecutor):
        restarts = 0
        refusals = 1

        def submit(self, job: GradingJob) -> Future:
            if job.student == "s03" and self.refusals:
                self.refusals -= 1
                raise ExecutorBroken("A child process terminated abruptly")
            return super().submit(job)

        def restart(self) -> None:
            self.restarts += 1

    executor = Refusing(results)
    with Gradebook(tmp_path / "gb.sqlite") as book:
        summary = run_batch(assignment_of(course_dir, ASSIGNMENT), submissions, book, jobs=1, executor=executor,
                            write_reports=False)
        assert sorted(summary.graded) == ["s01", "s03"] and summary.errors == {}
        assert book.errors(ASSIGNMENT) == [] and executor.restarts == 1
    # an executor that still refuses after its restart is the grader's problem, not a student's
    executor = Refusing(results)
    executor.refusals = 2
    with Gradebook(tmp_path / "gb2.sqlite") as book, pytest.raises(GraderError, match="restarting did not"):
        run_batch(assignment_of(course_dir, ASSIGNMENT), submissions, book, jobs=1, executor=executor,
                  write_reports=False)


class KillingPool(LocalProcessExecutor):
    """The real process pool, whose job for one student makes its pool worker exit."""

    def __init__(self, jobs: int, killer: str, started: Path):
        super().__init__(jobs)
        self.killer, self.started = killer, str(started)
        self.submitted: list[str] = []
        self.restarts = 0

    def run(self, pool, job: GradingJob) -> Future:
        self.submitted.append(job.student)
        return pool.submit(grade_or_exit, job, killer=self.killer, started=self.started)

    def restart(self) -> None:
        self.restarts += 1
        super().restart()


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_worker_killed_by_one_job_costs_only_that_student(tmp_path: Path):
    students = [s for s in STUDENTS if s.id in ("s01", "s03", "s05")]
    course_dir, submissions = build_class(tmp_path, students)
    started = tmp_path / "started"
    started.mkdir()
    executor = KillingPool(2, "s03", started)
    try:
        with Gradebook(tmp_path / "gb.sqlite") as book:
            summary = run_batch(assignment_of(course_dir, ASSIGNMENT), submissions, book, jobs=2, executor=executor)
            errors = {e["student"]: e["error"] for e in book.errors(ASSIGNMENT)}
            latest = book.latest(ASSIGNMENT)
    finally:
        executor.shutdown(cancel=True)
    assert set(errors) == {"s03"} and "died 2 times" in errors["s03"]
    assert sorted(summary.graded) == sorted(latest) == ["s01", "s05"]
    for student in ("s01", "s05"):
        assert latest[student].total == pytest.approx(BY_ID[student].expected_total, abs=1e-3)
        assert (course_dir / ".grade" / "reports" / student / f"{ASSIGNMENT}.html").is_file()
    # all three were in flight when s03 first killed its worker; each then ran alone, and only
    # s03's own deaths were charged (twice, then recorded); a fresh pool after every death
    assert sorted(executor.submitted[:3]) == ["s01", "s03", "s05"]
    assert executor.submitted[3:] == ["s01", "s03", "s03", "s05"]
    assert executor.restarts == 3


def test_discover_names_students_by_stem_and_refuses_duplicates(tmp_path: Path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "bob.zip").write_bytes(b"")
    (tmp_path / "carol.ipynb").write_text("{}")
    (tmp_path / ".DS_Store").write_text("")
    (tmp_path / "timestamps.csv").write_text("student,submitted_at\n")
    (tmp_path / "readme.txt").write_text("")
    entries, ignored = discover(tmp_path)
    assert [e.student for e in entries] == ["alice", "bob", "carol"] and ignored == ["readme.txt"]
    (tmp_path / "alice.zip").write_bytes(b"")
    with pytest.raises(ClassDataError, match="alice"):
        discover(tmp_path)


@pytest.fixture(scope="module")
def mini_result_dict() -> dict:
    """A stored-shape GradeResult of the mini course (scored, not graded: instant)."""
    from grader.core.manifest import load_manifest
    from grader.core.records import GradeResult, TestOutcome
    from grader.core.scoring import score

    manifest = load_manifest(FIXTURE / "assignments" / ASSIGNMENT / "assignment.toml")
    outcomes = [TestOutcome(name="test_double_matrix", task="double", status="passed", fraction=1.0)]
    return GradeResult(assignment_id=ASSIGNMENT, assignment_title=manifest.title, student="x", mode="submit",
                       score=score(manifest, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256="", submission_form="folder", submitted_at=None,
                       graded_at="2026-12-01T00:00:00+00:00", seed=1, isolation="process",
                       isolation_level="process", duration_s=1.0).to_dict()


def test_an_empty_folder_and_a_truncated_zip_are_hand_in_problems_with_a_row_in_the_export(mini_course: Path,
                                                                                          tmp_path: Path):
    entries = tmp_path / "entries"
    (entries / "ada").mkdir(parents=True)  # an empty folder
    whole = io.BytesIO()
    with zipfile.ZipFile(whole, "w") as archive:
        archive.writestr("mini.py", (mini_course / "reference" / "mini" / "mini.py").read_text())
    (entries / "bob.zip").write_bytes(whole.getvalue()[:40])  # cut short
    gradebook = tmp_path / "gb.sqlite"
    result = invoke("--course", str(mini_course), "batch", ASSIGNMENT, str(entries), "--gradebook", str(gradebook))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "hand-in problems (not readable as a submission) │ 2" in said and "grader errors │ 0" in said, said
    assert "✗ bob (hand-in problem): SubmissionError: bob.zip is not a valid zip file" in said
    with Gradebook(gradebook) as book:
        assert [(e["student"], e["kind"]) for e in book.errors(ASSIGNMENT)] == [("ada", "hand-in"), ("bob", "hand-in")]
        model = class_view_model(assignment_of(mini_course, ASSIGNMENT), book, with_histogram=False,
                                 with_similarity=False)
    assert (model["counts"]["errors"], model["counts"]["handin"]) == (0, 2)
    exported = invoke("--course", str(mini_course), "export", ASSIGNMENT, "--format", "csv", "--gradebook",
                      str(gradebook))
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(exported.stdout))}
    assert sorted(rows) == ["ada", "bob"] and rows["ada"]["total"] == rows["bob"]["total"] == ""
    assert rows["ada"]["note"].startswith("hand-in could not be read: SubmissionError: ada holds none of")
    assert rows["bob"]["note"].startswith("hand-in could not be read: SubmissionError: bob.zip is not a valid zip")
