"""`grade validate` proves the catalogue, and notices a mutant that nothing catches."""

from __future__ import annotations

from grader.core.course import Course
from grader.pipeline.validate import reference_answers, validate


def test_validate_mini_course_and_a_mutant_nobody_catches(mini_course):
    with open(mini_course / "reference/mini/mutants.py", "a") as fh:
        fh.write('''

@mutant(function="double", id="double_by_addition", title="adds x to itself",
        section="§6", explanation="Same value, written differently: tests cannot tell.")
def double_by_addition(x):
    return x + x
''')
    verdicts = {v.subject: v for v in validate(Course(mini_course), "mini", jobs=2)}
    assert verdicts["reference"].ok and verdicts["reference"].score == 100
    assert verdicts["stubs"].ok and verdicts["stubs"].score == 0
    assert verdicts["normalize_wrong_axis"].ok and verdicts["normalize_wrong_axis"].task == "normalize"
    assert verdicts["double_square"].ok
    assert not verdicts["double_by_addition"].ok
    assert "not caught" in verdicts["double_by_addition"].detail


def test_reference_answers_come_from_the_key(mini_course):
    text = reference_answers(Course(mini_course), "mini")
    assert "row_sum = 1" in text and "ratio = 1.43" in text
