"""`grade validate` proves the catalogue, and notices a mutant that nothing catches."""

from __future__ import annotations

import pytest

from grader.authoring.validate import PUBLIC_SUFFIX, reference_answers, validate
from grader.core.course import Course
from tests.conftest import assignment_of, grade_workspace


@pytest.mark.sandbox
def test_validate_mini_course_and_a_mutant_nobody_catches(mini_course):
    with open(mini_course / "reference/mini/mutants.py", "a") as fh:
        fh.write('''

@mutant(function="double", id="double_by_addition", title="adds x to itself",
        section="§6", explanation="Same value, written differently: tests cannot tell.")
def double_by_addition(x):
    return x + x
''')
    verdicts = {v.subject: v for v in validate(assignment_of(mini_course, "mini"), jobs=2)}
    assert verdicts["reference"].ok and verdicts["reference"].score == 100
    assert verdicts["stubs"].ok and verdicts["stubs"].score == 0
    assert verdicts["normalize_wrong_axis"].ok and verdicts["normalize_wrong_axis"].task == "normalize"
    assert verdicts["double_square"].ok
    assert not verdicts["double_by_addition"].ok
    assert "not caught" in verdicts["double_by_addition"].detail
    # The same workspaces graded by the public tests, as `grade check` grades them.
    public = {v.subject.removesuffix(PUBLIC_SUFFIX): v for v in verdicts.values() if v.suite == "public"}
    assert public["reference"].ok and "cover every code task" in public["reference"].detail
    assert public["stubs"].ok and public["stubs"].score == 0
    assert public["normalize_wrong_axis"].ok and public["double_square"].ok, public
    unseen = public["double_by_addition"]
    assert not unseen.ok and "passes the public tests of double" in unseen.detail
    assert verdicts["hidden tests"].ok and verdicts["public tests"].ok


def test_reference_answers_come_from_the_key(mini_course):
    text = reference_answers(assignment_of(mini_course, "mini"))
    assert "row_sum = 1" in text and "ratio = 1.43" in text


NO_MARKER = '''

def test_normalize_rows_without_a_task(check):
    check.close("normalize", check.randn(4, 4))


@pytest.mark.task("normalise")
def test_normalize_of_a_misspelt_task(check):
    check.close("normalize", check.randn(2, 4))
'''

NO_MAX_SHIFT = '''

@mutant(function="normalize", id="normalize_no_max_shift", title="exp() without subtracting the maximum",
        section="§10", explanation="Subtract each row's maximum before exp().")
def normalize_no_max_shift(x):
    weights = x.exp()
    return weights / weights.sum(dim=-1, keepdim=True)
'''


@pytest.mark.sandbox
def test_a_test_without_a_known_task_is_a_collection_error_and_a_public_gap_fails_validate(mini_course):
    with open(mini_course / "reference/mini/tests/test_normalize.py", "a") as fh:
        fh.write(NO_MARKER)
    with open(mini_course / "reference/mini/mutants.py", "a") as fh:
        fh.write(NO_MAX_SHIFT)  # the hidden tests catch it (huge inputs); the public ones do not
    course = Course(mini_course)
    reference = mini_course / "reference/mini"
    result = grade_workspace(course, "mini", reference, student="ref", allow_weak_sandbox=True)
    names = {o.name for o in result.outcomes}
    assert not names & {"test_normalize::test_normalize_rows_without_a_task",
                        "test_normalize::test_normalize_of_a_misspelt_task"}  # not run: no task to count for
    problems = [n for n in result.notes if n.startswith("test collection problem")]
    assert len(problems) == 2, result.notes
    assert "test_normalize_rows_without_a_task: has no @pytest.mark.task" in problems[0]
    assert "'normalise', which mini does not have (tasks: double, normalize, quiz)" in problems[1]
    assert sum(t.max_score for t in result.score.tests if t.task == "normalize") == 40

    verdicts = {v.subject: v for v in validate(assignment_of(course, "mini"), jobs=2)}
    hidden = verdicts["hidden tests"]
    assert not hidden.ok and "test_normalize_rows_without_a_task" in hidden.detail and "normalise" in hidden.detail
    assert verdicts["public tests"].ok
    assert verdicts["normalize_no_max_shift"].ok, verdicts["normalize_no_max_shift"]
    gap = verdicts["normalize_no_max_shift" + PUBLIC_SUFFIX]
    assert not gap.ok and gap.task == "normalize" and "add a public test" in gap.detail
