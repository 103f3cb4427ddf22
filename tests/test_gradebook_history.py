"""The gradebook keeps every grading, audits staff decisions, and opens the files older graders wrote.

tests/fixtures/gradebook_v0.sqlite was written by the grader before schema versions existed
(two real grades of the mini course, a batch error and a roster of three), so its migration
is tested on a real old file, copied first: the fixture itself is never opened.
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from class_builder import FIXTURE

from grader.core.due import OWN_DATE, DueDate
from grader.core.errors import ClassDataError, GradebookError
from grader.core.manifest import load_manifest
from grader.core.records import GradeResult, TestOutcome
from grader.core.scoring import score
from grader.intake.submission import Submission
from grader.storage.gradebook import EVERY_ASSIGNMENT, LATER_SUBMISSION, SCHEMA_VERSION, Gradebook
from grader.storage.roster import read_roster

OLD_GRADEBOOK = Path(__file__).parent / "fixtures" / "gradebook_v0.sqlite"
MANIFEST = load_manifest(FIXTURE / "assignments" / "mini" / "assignment.toml")


@pytest.fixture
def old_copy(tmp_path: Path) -> Path:
    target = tmp_path / "old.sqlite"
    shutil.copy(OLD_GRADEBOOK, target)
    return target


def result_for(student: str, *, double: bool, graded_at: str, fingerprint: str = "f" * 64,
               sha: str | None = None) -> GradeResult:
    outcomes = [TestOutcome(name="test_double_matrix", task="double", status="passed" if double else "failed",
                            fraction=1.0 if double else 0.0)]
    return GradeResult(assignment_id="mini", assignment_title=MANIFEST.title, student=student, mode="submit",
                       score=score(MANIFEST, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256=sha or (student * 64)[:64], submission_form="folder", submitted_at=None,
                       graded_at=graded_at, seed=3, isolation="process", isolation_level="process",
                       duration_s=1.0, fingerprint=fingerprint)


def files_of(student: str) -> Submission:
    return Submission(files={"mini.py": f"# {student}\n".encode()}, source="x", form="folder", student=student)


def test_an_old_gradebook_opens_migrated_with_all_its_data(old_copy: Path):
    with sqlite3.connect(old_copy) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (0,)
        before = {table: db.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                  for table in ("students", "submission_files", "task_scores", "test_results", "batch_errors")}
        student_columns = ", ".join(row[1] for row in db.execute("PRAGMA table_info(students)"))
        error_columns = ", ".join(row[1] for row in db.execute("PRAGMA table_info(batch_errors)"))
        old_rows = db.execute("SELECT id, student_id, sha256, total, result_json FROM submissions").fetchall()
    with Gradebook(old_copy) as book:
        assert book.version == SCHEMA_VERSION
        latest = book.latest("mini")
        assert {s: r.total for s, r in latest.items()} == {"ada": 100.0, "bob": 45.0}
        assert latest["bob"].result.score.late_days == 1 and latest["ada"].result.outcomes
        assert latest["ada"].fingerprint is None  # graded before fingerprints were kept
        assert book.graded_fingerprint("ada", "mini", latest["ada"].sha256) == ""  # known, but stale
        assert book.files(latest["ada"].id)["mini.py"].startswith(b'"""Mini assignment."""')
        assert [(e["student"], e["kind"]) for e in book.errors("mini")] == [("cy", "grader")]  # kinds came later
        assert [(g.student_id, g.current) for g in book.history("mini")] == [("ada", True), ("bob", True)]
        assert book.overrides("mini") == [] and book.extensions("mini") == {}
        # the roster before membership was kept: students with a name or an email count as on it
        assert [(e.id, e.name, e.section) for e in book.roster()] == [("ada", "Ada L", None), ("bob", "Bob K", None),
                                                                       ("cy", "Cy N", None)]
    with sqlite3.connect(old_copy) as db:  # nothing was lost or rewritten
        for table, rows in before.items():
            columns = {"students": student_columns, "batch_errors": error_columns}.get(table, "*")
            assert db.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2").fetchall() == rows, table
        assert db.execute("SELECT id, student_id, sha256, total, result_json FROM submissions").fetchall() == old_rows
        assert db.execute("SELECT COUNT(*) FROM submissions WHERE received_at = graded_at").fetchone() == (2,)
    with Gradebook(old_copy) as book:  # opening again migrates nothing twice
        assert book.version == SCHEMA_VERSION and book.count("submissions") == 2


def test_a_regrade_of_an_old_record_keeps_the_old_result_in_the_history(old_copy: Path):
    with Gradebook(old_copy) as book:
        old = book.latest("mini")["ada"]
        again = result_for("ada", double=False, graded_at="2027-01-05T10:00:00+00:00", sha=old.sha256)
        book.record(again, files_of("ada"), replaced_because="regraded: the manifest changed")
        assert book.count("submissions") == 2 and book.count("grading_history") == 1
        assert book.latest("mini")["ada"].result.graded_at == "2027-01-05T10:00:00+00:00"
        (earlier,) = book.earlier_results("mini", "ada")
        assert earlier == old.result  # the whole earlier result, as it was recorded
        history = book.history("mini", "ada")
        assert [(g.total, g.current, g.replaced_because) for g in history] == [
            (100.0, False, "regraded: the manifest changed"), (0.0, True, None)]


def test_grading_the_same_files_again_keeps_every_grading_and_the_latest_counts(tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        for number, passed in enumerate((False, True, False)):
            book.record(result_for("eve", double=passed, graded_at=f"2026-12-0{number + 1}T10:00:00+00:00"),
                        files_of("eve"))
        assert book.count("submissions") == 1 and book.count("grading_history") == 2
        assert book.latest("mini")["eve"].total == 0.0 and book.latest("mini")["eve"].fingerprint == "f" * 64
        assert [g.total for g in book.history("mini", "eve")] == [0.0, 40.0, 0.0]
        assert [g.current for g in book.history("mini", "eve")] == [False, False, True]
        # a different submission of the same student is a submission of its own, not a regrade
        book.record(result_for("eve", double=True, graded_at="2026-12-04T10:00:00+00:00", sha="e" * 64),
                    files_of("eve"))
        assert book.count("submissions") == 2 and book.latest("mini")["eve"].sha256 == "e" * 64


def test_a_regraded_older_submission_does_not_overtake_a_newer_one(tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.record(result_for("eve", double=True, graded_at="2026-12-01T10:00:00+00:00", sha="a" * 64),
                    files_of("eve"))
        book.record(result_for("eve", double=False, graded_at="2026-12-02T10:00:00+00:00", sha="b" * 64),
                    files_of("eve"))
        book.record(result_for("eve", double=True, graded_at="2026-12-09T10:00:00+00:00", sha="a" * 64),
                    files_of("eve"))  # the older files graded again: they were still handed in first
        assert book.latest("mini")["eve"].sha256 == "b" * 64
        history = book.history("mini", "eve")  # one row counts: the later submission's, not the regraded older one
        assert [(g.sha256[0], g.current, g.replaced_because) for g in history] == [
            ("a", False, "graded again"), ("b", True, None), ("a", False, LATER_SUBMISSION)]


def test_a_gradebook_from_a_newer_grader_is_refused(tmp_path: Path):
    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(GradebookError, match="written by a newer grader"):
        Gradebook(path)


def test_overrides_are_audited_and_never_deleted(tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        first = book.add_override("eve", "mini", "double", 30, "partial credit", sha256="a" * 64, total_before=0,
                                  total_after=30, author="ta1")
        assert (first.author, first.points, first.active, first.total_before, first.total_after) == \
            ("ta1", 30, True, 0, 30)
        datetime.fromisoformat(first.created_at)
        second = book.add_override("eve", "mini", "double", 35, "second look", sha256="a" * 64, total_before=30,
                                   total_after=35, author="ta2")
        total = book.add_override("eve", "mini", None, 90, "oral exam", sha256="a" * 64, total_before=35,
                                  total_after=90, author="prof")
        assert [o.id for o in book.overrides("mini")] == [second.id, total.id]
        audit = book.overrides("mini", include_cleared=True)
        assert [(o.id, o.active, o.cleared_by, o.cleared_reason) for o in audit] == [
            (first.id, False, "ta2", "replaced by a newer override"), (second.id, True, None, None),
            (total.id, True, None, None)]
        cleared = book.clear_overrides("eve", "mini", None, "exam annulled", author="prof")
        assert [o.id for o in cleared] == [total.id] and cleared[0].cleared_reason == "exam annulled"
        assert [o.id for o in book.overrides("mini")] == [second.id] and book.count("overrides") == 3
        assert book.clear_overrides("eve", "mini", None, "again", author="prof") == []
        assert len(book.clear_overrides("eve", "mini", None, "all", author="prof", every_task=True)) == 1
        assert book.overrides("mini") == []


def test_extensions_per_assignment_win_over_the_rosters(tmp_path: Path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,extension_days\nada,Ada,ada@x,2\nbob,Bob,bob@x,\ncy,Cy,cy@x,0.5\n")
    rows = read_roster(roster)
    assert [r["extension_days"] for r in rows] == [2.0, None, 0.5]
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.import_roster(rows, author="registrar")
        assert {s: e.describe() for s, e in book.extensions("mini").items()} == {"ada": "2 day(s) more",
                                                                                 "cy": "12 hour(s) more"}
        assert book.extension_for("ada", "other").assignment_id == EVERY_ASSIGNMENT  # every assignment
        until = datetime.fromisoformat("2026-12-09T23:59:00+01:00")
        own = book.set_extension("ada", "mini", until=until, reason="surgery", author="ta1")
        assert book.extension_for("ada", "mini") == own and own.describe() == f"until {until.isoformat()}"
        deadline = datetime.fromisoformat("2026-12-01T12:00:00+00:00")
        assert own.applied_to(DueDate(deadline)) == DueDate(until, deadline_from=OWN_DATE,
                                                            extension_from="an extension")
        assert book.extensions("mini")["ada"] == own and book.extension_for("ada", "other").extra_s == 2 * 86400
        assert book.extension_for("cy", "mini").applied_to(DueDate(deadline)) == DueDate(
            deadline, timedelta(hours=12), extension_from="the roster")
        assert book.clear_extension("ada", "mini", "recovered", author="ta1") == 1
        assert book.extensions("mini")["ada"].assignment_id == EVERY_ASSIGNMENT  # the roster's again
        # importing the roster again without ada's extension ends it; without the column, leaves them be
        roster.write_text("id,name,email,extension_days\nada,Ada,ada@x,\n")
        book.import_roster(read_roster(roster))
        roster.write_text("id,name,email\ncy,Cy,cy@x\n")
        book.import_roster(read_roster(roster))
        assert sorted(book.extensions("mini")) == ["cy"]
        assert book.count("extensions") == 3  # ada's two ended, cy's kept: nothing deleted
        assert book.students()[0] == {"id": "ada", "name": "Ada", "email": "ada@x"}


@pytest.mark.parametrize("value", ["-1", "two", "400", "nan"])
def test_a_bad_extension_in_the_roster_stops_the_import(tmp_path: Path, value: str):
    roster = tmp_path / "roster.csv"
    roster.write_text(f"id,name,email,extension_days\nada,Ada,ada@x,{value}\n")
    with pytest.raises(ClassDataError, match=r"line 2: extension_days must be a number of days from 0 to 365"):
        read_roster(roster)
