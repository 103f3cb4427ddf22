"""Every assignment of the course, and the grader's own test course, passes `grade validate`'s consistency
checks (grader/authoring/consistency.py): stubs, reference, tests, quiz, handout, lecture sections and the
catalogue agree. One generic test, run on each assignment, instead of one hand-written copy of these
checks per assignment."""

from __future__ import annotations

import pytest

from grader.authoring.consistency import consistency_checks
from grader.core.course import Course
from grader.harness.reference import load_reference
from tests.conftest import MINI_COURSE, ROOT, assignment_of

COURSE = Course(ROOT)
ASSIGNMENTS = [(ROOT, name) for name in COURSE.assignment_ids()] + [(MINI_COURSE, "mini")]


@pytest.mark.parametrize(("root", "assignment_id"), ASSIGNMENTS, ids=[name for _, name in ASSIGNMENTS])
def test_every_consistency_check_holds(root, assignment_id):
    assignment = assignment_of(root, assignment_id)
    _, mutants = load_reference(assignment)
    checks = consistency_checks(assignment, mutants)
    assert {c.name for c in checks} >= {"signatures", "test calls", "hidden tests", "public tests", "tests and tasks",
                                        "sections", "reference calls", "mutants"}
    failing = {c.name: c.problems for c in checks if not c.ok}
    assert not failing, failing


def test_the_course_declares_the_lecture_sections_it_cites():
    assignment = assignment_of(ROOT, "assignment1")
    assert assignment.settings.lecture.sections == "lecture/sections.toml"
    _, mutants = load_reference(assignment)
    sections = next(c for c in consistency_checks(assignment, mutants) if c.name == "sections")
    assert sections.ok and "§1–§32" in sections.passed
