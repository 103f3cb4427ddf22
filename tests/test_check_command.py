"""`grade check`: the public tests in the sandbox, on the tiny course, through the real CLI.

What it must say: the total of the tasks it checked only (`--task X` totals X alone),
whether the quiz is fully answered (counted without the key), which points are pending
and who judges them, and what check can and cannot tell compared with `grade submit`.
Exit 0 iff every selected public test ran and passed.
"""

from __future__ import annotations

import re
import shutil

import pytest
from click.testing import CliRunner

from grader.cli.console import CHECK_CANNOT, CHECK_TELLS
from grader.cli.main import main
from grader.core.quiz import answered_outcome, load_questions, unanswered


@pytest.fixture
def run(mini_course):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, ["--course", str(mini_course), *args], catch_exceptions=False)

    return invoke


def _flat(output: str) -> str:
    return " ".join(output.split())  # rich wraps long lines to the terminal's width


@pytest.mark.sandbox
def test_check_with_task_totals_that_task_alone(run, mini_course):
    result = run("check", "mini", "--workspace", str(mini_course / "reference/mini"), "--task", "double")
    text = _flat(result.output)
    assert result.exit_code == 0, result.output
    assert "Total: 40 / 40" in text  # double is worth 40; normalize and the quiz are not counted
    assert "Public tests of task double: 1 of 1 passed." in text
    assert "Normalise rows" not in text and "Quiz:" not in text


@pytest.mark.sandbox
def test_check_of_everything_counts_every_public_test_and_says_what_it_tells(run, mini_course, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(mini_course / "reference/mini", work)
    (work / "answers.toml").write_text('row_sum = 1\nratio = ""\n')
    result = run("check", "mini", "--workspace", str(work))
    text = _flat(result.output)
    assert result.exit_code == 0, result.output
    assert "Public tests of mini: 2 of 2 passed." in text
    assert "Quiz: 1 of 2 answered; blank: ratio (check does not mark answers)." in text
    assert re.search(r"Total: 80 / 100 \(20 points pending: quiz, judged elsewhere", text), text  # not marked here
    assert ("… Quiz (20 points): only grade submit marks it, with the instructors' key, when your submission is "
            "graded; grade check only counts your answers") in text  # which points, who marks them and when
    assert _flat(CHECK_TELLS) in text and _flat(CHECK_CANNOT) in text
    assert "grade submit runs the hidden tests" in text


@pytest.mark.sandbox
def test_check_of_the_stubs_fails_and_a_quiz_only_check_runs_no_public_test(run, mini_course):
    stubs = run("check", "mini")
    assert stubs.exit_code == 1 and "Public tests of mini: 0 of 2 passed." in _flat(stubs.output)
    assert "Quiz: 0 of 2 answered; blank: row_sum, ratio" in _flat(stubs.output)
    quiz_only = run("check", "mini", "--workspace", str(mini_course / "reference/mini"), "--task", "quiz")
    text = _flat(quiz_only.output)
    assert quiz_only.exit_code == 1, text  # no public test was selected, so none passed
    assert "Public tests of task quiz: 0 of 0 passed." in text and "Total: 0 / 20" in text


def test_unanswered_questions_are_counted_without_the_key(mini_course):
    questions = load_questions(mini_course / "assignments/mini/quiz.toml")
    assert unanswered(questions, 'row_sum = 1\nratio = 1.43\n') == []
    assert unanswered(questions, 'row_sum = ""\n') == ["row_sum", "ratio"]
    assert unanswered(questions, "[answers]\nratio = 0\n") == ["row_sum"]  # 0 is an answer
    assert unanswered(questions, None) == ["row_sum", "ratio"]
    broken = answered_outcome(questions, "row_sum = [")
    assert broken.status == "pending" and "0 of 2 questions answered (answers.toml is not valid TOML" in broken.message
    assert "grade check does not mark the quiz" in broken.message
