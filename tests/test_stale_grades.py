"""`grade batch` notices stale grades: entries graded before the manifest, the hidden tests, the
reference or the catalogue changed are graded again (the earlier grading kept in the history).

Before fingerprints, a batch run after a task was added skipped every entry ("11/11 skipped"),
so nobody got the new task. These tests grade a small class for real, change the course, and
run the batch again through the CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from class_builder import ASSIGNMENT, BY_ID, build_class
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.course import Course
from grader.storage.gradebook import Gradebook
from tests.conftest import assignment_of

CLASS = [BY_ID[s] for s in ("s01", "s08", "s16")]  # correct, wrong axis, syntax error
NEW_TASK = '''
[[tasks]]
id = "scale"
title = "Scale by two (added later)"
points = 10
functions = []
uses = ["double"]
'''


def batch(course: Path, submissions: Path, gradebook: Path) -> str:
    result = CliRunner().invoke(main, ["--course", str(course), "batch", ASSIGNMENT, str(submissions), "--jobs", "2",
                                       "--no-reports", "--gradebook", str(gradebook)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def count(output: str, row: str) -> int:
    found = re.search(rf"{re.escape(row)}\s*│\s*(\d+)", output)
    assert found, output
    return int(found.group(1))


def test_the_fingerprint_follows_what_grades_and_nothing_else(tmp_path: Path):
    course_dir, _ = build_class(tmp_path, CLASS)
    course = Course(course_dir)
    first = assignment_of(course, ASSIGNMENT).fingerprint
    reference = course_dir / "reference" / ASSIGNMENT
    (reference / "__pycache__").mkdir(exist_ok=True)
    (reference / "__pycache__" / "mini.cpython-311.pyc").write_bytes(b"cache")
    (reference / "similarity_sources").mkdir()
    (reference / "similarity_sources" / "tutorial.py").write_text("x = 1\n")
    (course_dir / ".grade").mkdir(exist_ok=True)
    assert assignment_of(course, ASSIGNMENT).fingerprint == first  # caches and staff-only sources decide no points
    for path, change in [(reference / "mutants.py", "\n# a new misconception\n"),
                         (reference / "tests" / "test_double.py", "\n# one more hidden test\n"),
                         (reference / "quiz_key.toml", "\n# a corrected key\n"),
                         (course_dir / "assignments" / ASSIGNMENT / "assignment.toml", NEW_TASK)]:
        before = assignment_of(course, ASSIGNMENT).fingerprint
        path.write_text(path.read_text() + change)
        assert assignment_of(course, ASSIGNMENT).fingerprint != before, path


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_batch_after_a_task_is_added_regrades_everyone_and_keeps_the_earlier_grades(tmp_path: Path):
    course, submissions = build_class(tmp_path, CLASS)
    gradebook = tmp_path / "gradebook.sqlite"
    first = batch(course, submissions, gradebook)
    assert count(first, "graded") == 3
    again = batch(course, submissions, gradebook)
    assert (count(again, "graded"), count(again, "skipped (already graded)"),
            count(again, "regraded (stale: the grading changed)")) == (0, 3, 0)
    with Gradebook(gradebook) as book:
        before = {s: r.total for s, r in book.latest(ASSIGNMENT).items()}
        fingerprints = {r.fingerprint for r in book.latest(ASSIGNMENT).values()}
    assert fingerprints == {assignment_of(course, ASSIGNMENT).fingerprint}

    manifest = course / "assignments" / ASSIGNMENT / "assignment.toml"
    manifest.write_text(manifest.read_text() + NEW_TASK)  # a task added after the class was graded
    (course / "reference" / ASSIGNMENT / "tests" / "test_scale.py").write_text(
        'import pytest\n\n\n@pytest.mark.task("scale")\ndef test_scale(check):\n'
        '    x = check.randn(3, 4)\n    check.close("double", x)\n')
    stale = batch(course, submissions, gradebook)
    assert (count(stale, "graded"), count(stale, "skipped (already graded)"),
            count(stale, "regraded (stale: the grading changed)")) == (3, 0, 3)
    rows = [line.split("\t") for line in stale.splitlines() if "\tregraded: the grading changed: " in line]
    assert len(rows) == 3  # the table per student says what changed, and the totals before and after
    for student, total, _, changed in rows:
        expected = 10.0 if BY_ID[student].kind != "syntax" else 0.0
        assert changed == (f"regraded: the grading changed: {before[student]:g} → {before[student] + expected:g}"
                           + ("; changed: scale 0 → 10" if expected else "; no task's points changed"))
        assert total == f"{before[student] + expected:g} / 110"
    with Gradebook(gradebook) as book:
        latest = book.latest(ASSIGNMENT)
        assert book.count("submissions") == 3 and book.count("grading_history") == 3
        for student, record in latest.items():
            scale = {t.task_id: t for t in record.result.score.tasks}["scale"]
            expected = 10.0 if BY_ID[student].kind != "syntax" else 0.0
            assert scale.earned == expected, student  # everyone has the new task now
            assert record.total == pytest.approx(before[student] + expected)
            assert record.fingerprint == assignment_of(course, ASSIGNMENT).fingerprint
            (earlier,) = [g for g in book.history(ASSIGNMENT, student) if not g.current]
            assert earlier.total == before[student]
            assert earlier.replaced_because == ("regraded: the manifest, hidden tests, reference, catalogue or "
                                                "grader changed")
    settled = batch(course, submissions, gradebook)  # graded by what is there now: nothing left to do
    assert (count(settled, "graded"), count(settled, "skipped (already graded)")) == (0, 3)


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_regrade_after_a_quiz_key_edit_says_only_the_quiz_changed(tmp_path: Path):
    course, submissions = build_class(tmp_path, CLASS)
    gradebook = tmp_path / "gradebook.sqlite"
    batch(course, submissions, gradebook)
    key = course / "reference" / ASSIGNMENT / "quiz_key.toml"
    key.write_text(key.read_text().replace("ratio = { value = 1.43, tolerance = 0.03 }",
                                           "ratio = { value = 1.5, tolerance = 0.03 }"))  # a key corrected, wrongly
    stale = batch(course, submissions, gradebook)
    rows = {line.split("\t")[0]: line.split("\t")[3] for line in stale.splitlines()
            if "\tregraded: the grading changed: " in line}
    assert rows == {"s01": "regraded: the grading changed: 100 → 90; only the quiz changed: quiz 20 → 10",
                    "s08": "regraded: the grading changed: 60 → 50; only the quiz changed: quiz 20 → 10",
                    "s16": "regraded: the grading changed: 20 → 10; only the quiz changed: quiz 20 → 10"}, stale
