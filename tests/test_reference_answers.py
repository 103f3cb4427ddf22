"""Each reference workspace carries the quiz key's answers, so it is a complete
submission (`grade submit ASSIGNMENT --workspace reference/ASSIGNMENT` earns full marks)."""

from __future__ import annotations

import pytest

from grader.core.compat import tomllib
from grader.core.course import Course
from grader.core.quiz import grade_quiz, load_key, load_questions
from tests.conftest import ROOT

COURSE = Course(ROOT)


@pytest.mark.parametrize("assignment_id", COURSE.assignment_ids())
def test_reference_answers_match_the_key(assignment_id):
    reference = COURSE.reference_for(assignment_id)
    questions = load_questions(COURSE.assignment_dir(assignment_id) / "quiz.toml")
    outcomes = grade_quiz(questions, load_key(reference / "quiz_key.toml"),
                          (reference / "answers.toml").read_text())
    assert outcomes and all(o.status == "passed" for o in outcomes), [o.name for o in outcomes
                                                                      if o.status != "passed"]


@pytest.mark.parametrize("assignment_id", COURSE.assignment_ids())
def test_student_answers_template_is_blank(assignment_id):
    answers = tomllib.loads((COURSE.assignment_dir(assignment_id) / "answers.toml").read_text())
    assert all(value in ("", None) for value in answers.get("answers", answers).values())
