"""`grade replay ASSIGNMENT STUDENT`: a recorded grading graded again exactly as it was (the stored
files, checked by hash, the seed, the dates, the device and the sandbox level), test by test
against the record, through the `grade` command and a real gradebook, on the tiny course.

Exit 0 when the replay is identical, 1 when a test's verdict or points or the total differ; nothing
is written unless `--record` is given; versions other than the recorded ones and a changed hidden
test (the grading fingerprint) are said beside the differences.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.compat import parse_iso
from grader.core.records import FAILED, PASSED, GradeResult, TestOutcome
from grader.intake.submission import Submission
from grader.pipeline.replay import (
    compare_tests,
    recorded_due,
    recorded_switches,
    stored_submission,
    version_changes,
)
from grader.sandbox.isolation import SandboxSwitches
from grader.storage.gradebook import Gradebook
from tests.conftest import FAULTS

# A hidden test added later, which eve's wrong-axis softmax passes (one row: its only axis is the last),
# while it fails every other normalize test: the task earns a quarter of its points in a replay.
NEW_HIDDEN_TEST = '''

@pytest.mark.task("normalize")
def test_one_row(check):
    check.close("normalize", check.randn(7))
'''


def _flat(output: str) -> str:
    return " ".join(output.split())  # rich wraps long lines to the terminal's width


def _counts(gradebook: Path) -> dict[str, int]:
    with sqlite3.connect(gradebook) as db:
        return {table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("submissions", "submission_files", "grading_history", "test_results")}


@pytest.fixture
def graded(mini_course: Path, tmp_path: Path):
    """The tiny course with eve's wrong-axis softmax graded by `grade submit` into a real gradebook;
    `run(*args)` runs the grade command on it."""
    gradebook = tmp_path / "gradebook.sqlite"
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(main, ["--course", str(mini_course), *args, "--gradebook", str(gradebook)],
                             catch_exceptions=False, env={"COLUMNS": "200"})

    submitted = run("submit", "mini", "--workspace", str(FAULTS / "wrong_axis"), "--student", "eve")
    assert submitted.exit_code == 0, submitted.output
    return run, gradebook, mini_course


@pytest.mark.sandbox
def test_replay_of_an_unchanged_grading_is_identical_and_writes_nothing(graded):
    run, gradebook, course = graded
    report = course / ".grade" / "reports" / "eve" / "mini.html"
    before, written = _counts(gradebook), report.stat().st_mtime_ns
    replayed = run("replay", "mini", "eve")
    text = _flat(replayed.output)
    assert replayed.exit_code == 0, replayed.output
    assert "Identical: every test's verdict and points, and the total, are as recorded." in text
    assert "Total: recorded 60, replayed 60 / 100" in text
    assert "version differs" not in text and "changed since" not in text and "Tests that differ" not in text
    assert _counts(gradebook) == before and report.stat().st_mtime_ns == written  # nothing written
    # the same grading recorded as if torch had been another version: said, and still identical
    with Gradebook(gradebook) as book:
        record = book.latest_for("mini", "eve")
        old = replace(record.result, versions={**record.result.versions, "torch": "2.0.0"})
        book.record(old, stored_submission(book, record, ("mini.py",)), replaced_because="test: older torch")
    replayed = run("replay", "mini", "eve")
    text = _flat(replayed.output)
    assert replayed.exit_code == 0, replayed.output
    assert "version differs: torch 2.0.0 then," in text and "Identical" in text


@pytest.mark.sandbox
def test_replay_after_a_hidden_test_changed_shows_each_difference_and_records_only_when_asked(graded):
    run, gradebook, course = graded
    with open(course / "reference" / "mini" / "tests" / "test_normalize.py", "a", encoding="utf-8") as fh:
        fh.write(NEW_HIDDEN_TEST)
    before = _counts(gradebook)
    with Gradebook(gradebook) as book:
        recorded = book.latest_for("mini", "eve").result
    replayed = run("replay", "mini", "eve")
    text = _flat(replayed.output)
    assert replayed.exit_code == 1, replayed.output
    assert _counts(gradebook) == before
    assert "Tests that differ" in text
    assert "│ test_normalize::test_one_row │ not run │ passed │ – │ 10 │" in text
    assert "test_normalize::test_float64" not in text  # still failed, still 0 points: the same
    assert "Total: recorded 60, replayed 70 / 100 (differs)" in text
    assert "what grades this assignment changed since this grading" in text
    assert "Different: 1 test(s) differ, and the total." in text
    # --record: the replay becomes the grading that counts, the earlier one kept in the history
    kept = run("replay", "mini", "eve", "--record")
    assert kept.exit_code == 1, kept.output
    with Gradebook(gradebook) as book:
        latest = book.latest_for("mini", "eve").result
        history = book.history("mini", "eve")
    assert recorded.score.total == 60 and latest.score.total == 70
    assert "test_normalize::test_one_row" in {o.name for o in latest.outcomes}
    assert [(g.current, g.replaced_because) for g in history] == [(False, "replayed (grade replay)"), (True, None)]
    again = run("replay", "mini", "eve")  # the recorded replay, replayed: identical
    assert again.exit_code == 0, again.output


@pytest.mark.sandbox
def test_replay_shows_the_grade_as_it_stands_beside_the_recomputed_one(graded):
    run, gradebook, course = graded
    set_it = run("override", "mini", "eve", "--task", "normalize", "--points", "30", "--reason", "appeal upheld",
                 "--by", "ta-sam")
    assert set_it.exit_code == 0, set_it.output
    replayed = run("replay", "mini", "eve")
    text = _flat(replayed.output)
    assert replayed.exit_code == 0, replayed.output  # the grading itself is as recorded
    assert "Total: recorded 60, replayed 60 / 100" in text
    assert "As it stands (extension and overrides applied): 90 now; the replay would stand at 90" in text
    assert "override of normalize: 30 (computed 0; appeal upheld, ta-sam)" in text


def test_replay_refuses_a_student_never_graded_and_files_that_do_not_match(mini_course: Path, tmp_path: Path):
    gradebook = tmp_path / "gb.sqlite"
    with Gradebook(gradebook) as book:
        files = {"mini.py": b"def double(x):\n    return 2 * x\n"}
        submission = Submission(files=files, source="x", form="folder", student="eve")
        book.record(replace(_result([_outcome("a")]), assignment_id="mini", student="eve",
                            submission_sha256=submission.sha256), submission)
    with sqlite3.connect(gradebook) as db:  # the stored file changed behind the gradebook's back
        db.execute("UPDATE submission_files SET content = ?", (b"def double(x):\n    return x + x\n",))

    def replay(student: str):
        return CliRunner().invoke(main, ["--course", str(mini_course), "replay", "mini", student,
                                         "--gradebook", str(gradebook)])

    never = replay("zoe")
    assert never.exit_code == 2 and "zoe has no graded submission of mini" in never.output
    changed = replay("eve")
    assert changed.exit_code == 2 and "do not hash to what was recorded" in _flat(changed.output), changed.output


# ------------------------------------------------------------------ the pieces, without a sandbox
def _outcome(name: str, status: str = PASSED, kind: str = "", **extra) -> TestOutcome:
    return TestOutcome(name=name, task="t", status=status, kind=kind, fraction=1.0 if status == PASSED else 0.0,
                       **extra)


def _result(outcomes: list[TestOutcome]) -> GradeResult:
    from grader.core.manifest import parse_manifest
    from grader.core.scoring import score

    manifest = parse_manifest({"id": "a", "title": "A", "files": ["a.py"],
                               "tasks": [{"id": "t", "points": 10, "functions": ["f"]}]})
    return GradeResult(assignment_id="a", assignment_title="A", student="s", mode="submit",
                       score=score(manifest, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256="ab" * 32, submission_form="folder", submitted_at=None,
                       graded_at="2026-12-01T13:00:00+00:00", seed=3, isolation="process",
                       isolation_level="process", duration_s=1.0)


def test_compare_tests_names_every_verdict_and_point_that_moved():
    recorded = _result([_outcome("a"), _outcome("b"), _outcome("gone")])
    replayed = _result([_outcome("a"), _outcome("b", FAILED, "timeout"), _outcome("new", FAILED, "wrong")])
    changes = {c.name: c for c in compare_tests(recorded, replayed)}
    assert set(changes) == {"b", "gone", "new"}  # a kept its verdict and its 3.34 points
    assert (changes["b"].recorded, changes["b"].replayed) == ("passed", "failed (timeout)")
    assert (changes["gone"].replayed, changes["new"].recorded) == (None, None)
    assert compare_tests(recorded, recorded) == ()


def test_the_recorded_dates_devices_and_level_are_what_the_replay_is_given():
    due = recorded_due(replace(_result([]).score, due_at="2026-12-03T12:00:00+00:00", extension_s=86400.0))
    assert due.deadline == parse_iso("2026-12-02T12:00:00+00:00") and due.extension == timedelta(days=1)
    assert due.due == parse_iso("2026-12-03T12:00:00+00:00")
    assert recorded_due(_result([]).score).due is None  # undated: never late
    weaker = recorded_switches("process+uid+seccomp+reaper", SandboxSwitches())
    assert weaker.no_bubblewrap and weaker.without == frozenset({"landlock"})
    same = recorded_switches("bubblewrap+uid+landlock+seccomp+reaper", SandboxSwitches(without=frozenset({"uid"})))
    assert not same.no_bubblewrap and same.without == frozenset({"uid"})  # a switch is never turned back on
    assert version_changes({"grader": "0.1.0", "torch": "2.5.0"}, {"grader": "0.1.0", "torch": "2.13.0",
                                                                   "gpu": "H100"}) == {
        "torch": ("2.5.0", "2.13.0"), "gpu": (None, "H100")}
