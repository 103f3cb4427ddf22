"""What a student reads first: the required tasks before the bonus ones, a bonus task not attempted
shown as such (neutral, after the required tasks) in the terminal, the HTML report and results.json,
and points not judged in a run saying which they are and who judges them, where and when.

Results are scored (not graded) from outcomes like the ones real gradings record: the hidden tests
of a bonus task are collected before the required ones (test_flash_backward.py sorts before
test_flash_forward.py), and a kernel not written yet fails as `not_implemented`.
"""

from __future__ import annotations

import re

from rich.console import Console

from grader.cli.console import print_terminal
from grader.core.manifest import parse_manifest
from grader.core.quiz import answered_outcome, load_questions
from grader.core.records import FAILED, PASSED, PENDING, GradeResult, TestOutcome
from grader.core.scoring import score
from grader.render.presentation import not_attempted_ids, task_order, unjudged
from grader.render.report import render_html, view_model
from grader.render.results import gradescope_results
from tests.conftest import MINI_COURSE, ROOT

KERNELS = parse_manifest({
    "id": "kernels", "title": "Kernels", "files": ["flash.py"],
    "tasks": [
        {"id": "forward", "title": "Forward kernel", "points": 30, "functions": ["forward"]},
        {"id": "speed", "title": "Forward speed", "kind": "timing", "points": 10, "uses": ["forward"],
         "speed": [[1.5, 1.0]]},
        {"id": "quiz", "title": "Quiz", "kind": "quiz", "points": 10},
        {"id": "backward", "title": "Bonus: backward kernels", "points": 10, "functions": ["backward"],
         "bonus": True},
    ]})
NOT_WRITTEN = ("backward is not implemented yet: not implemented yet. Write it with exactly that signature, since "
               "the grader launches your kernel itself (contract.py shows how) (§24).")


def outcome(task: str, name: str, status: str = PASSED, kind: str = "", message: str = "", **extra) -> TestOutcome:
    return TestOutcome(name=name, task=task, status=status, kind=kind, message=message,
                       fraction=1.0 if status == PASSED else 0.0, **extra)


def result(outcomes: list[TestOutcome], mode: str = "submit", manifest=KERNELS) -> GradeResult:
    return GradeResult(assignment_id=manifest.id, assignment_title=manifest.title, student="s", mode=mode,
                       score=score(manifest, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256="ab" * 32, submission_form="folder", submitted_at=None,
                       graded_at="2026-12-01T13:00:00+00:00", seed=7, isolation="process",
                       isolation_level="process+uid+landlock+seccomp+reaper", duration_s=1.0)


def skipped_bonus(backward_kind: str = "not_implemented", backward_message: str = NOT_WRITTEN) -> GradeResult:
    """The required kernel half right, the speed pending (no GPU), the quiz marked, and the bonus
    backward kernels' tests first in the outcomes, every one failed as `backward_kind`."""
    return result([
        outcome("backward", "test_flash_backward::test_gradients[0]", FAILED, backward_kind, backward_message),
        outcome("backward", "test_flash_backward::test_gradients[1]", FAILED, backward_kind, backward_message),
        outcome("forward", "test_flash_forward::test_small"),
        outcome("forward", "test_flash_forward::test_tail", FAILED, "wrong", "rows past the end hold garbage (§24)"),
        outcome("speed", "test_flash_speed::test_large", PENDING, "not_run", "not timed: no CUDA device"),
        outcome("quiz", "quiz::q1"),
    ])


def terminal(graded: GradeResult) -> tuple[str, str]:
    """(plain text, text with its ANSI colours) of the grade table and what follows it."""
    console = Console(record=True, width=200, force_terminal=True, color_system="standard")
    print_terminal(graded, console)
    return console.export_text(clear=False), console.export_text(styles=True)


def test_a_bonus_task_not_attempted_is_neutral_and_after_the_required_tasks_in_the_terminal():
    graded = skipped_bonus()
    assert not_attempted_ids(graded) == {"backward"}
    assert [t.task_id for t in task_order(graded.score.tasks)] == ["forward", "speed", "quiz", "backward"]
    text, coloured = terminal(graded)
    rows = [line for line in text.splitlines() if "│" in line and "/" in line]
    assert [row.split("│")[1].strip() for row in rows] == [
        "Forward kernel", "Forward speed", "Quiz", "Bonus: backward kernels (bonus)"]
    assert rows[-1].split("│")[4].strip() == "not attempted"
    bonus_line = next(line for line in coloured.splitlines() if "Bonus: backward kernels (bonus)" in line)
    assert "\x1b[31m" not in bonus_line and "\x1b[91m" not in bonus_line  # no red
    assert "✗ backward" not in text and "not implemented yet" not in text  # no failure block, no contract words
    assert "✗ forward" in text  # the required task's failure is still a failure
    assert "Bonus task not attempted (optional): Bonus: backward kernels (10 points)" in text
    assert text.index("✗ forward") < text.index("Bonus task not attempted")


def test_a_bonus_task_attempted_and_wrong_is_still_a_failure_after_the_required_ones():
    graded = skipped_bonus("wrong", "dk differs: max abs error 0.3 at [0, 1] (§24)")
    assert not_attempted_ids(graded) == set()
    text, _ = terminal(graded)
    assert "not attempted" not in text
    assert "✗ backward" in text and text.index("✗ forward") < text.index("✗ backward")  # after, though first run


def test_the_html_report_shows_a_bonus_not_attempted_last_and_neutral():
    html = render_html(skipped_bonus(), ROOT / "templates")
    order = re.findall(r'<tr>\s*<td><a href="#task-(\w+)"', html)
    assert order == ["forward", "speed", "quiz", "backward"]
    row = html[html.index('href="#task-backward"'):]
    row = row[:row.index("</tr>")]
    assert '<span class="badge neutral">not attempted</span>' in row and "failed" not in row
    section = html[html.index('<section id="task-backward">'):]
    section = section[:section.index("</section>")]
    assert 'data-not-attempted="backward"' in section and 'class="cause"' not in section
    assert "not implemented yet" not in section
    assert "test_flash_backward::test_gradients[0]" in section  # its tests are still named
    model = view_model(skipped_bonus())
    assert model["counts"] == {"passed": 2, "failed": 1, "pending": 1, "not_attempted": 2}


def test_results_json_lists_the_bonus_tests_after_the_required_ones_and_says_not_attempted():
    data = gradescope_results(skipped_bonus(), KERNELS)
    assert [(t["number"], t["tags"][0]) for t in data["tests"]] == [
        ("1.1", "forward"), ("1.2", "forward"), ("2.1", "speed"), ("3.1", "quiz"), ("4.1", "backward"),
        ("4.2", "backward")]
    bonus = data["tests"][4]
    assert bonus["output"].startswith("**Bonus task not attempted** (optional; nothing of it is written yet).")
    assert bonus["score"] == 0 and bonus["max_score"] == 5
    assert "not attempted" not in data["tests"][1]["output"]


def test_pending_speed_points_say_who_times_them_where_and_when():
    graded = skipped_bonus()
    [speed] = unjudged(graded)
    assert (speed.task_id, speed.what) == ("speed", "speed")
    assert speed.who == ("timed on a GPU by the course staff's grade submit when they grade your submission "
                         "(there is no GPU here)")
    text, _ = terminal(graded)
    flat = " ".join(text.split())
    assert "Total: 25 / 50 (10 points pending: speed, judged elsewhere; see below)" in flat
    assert ("… Forward speed (10 points): timed on a GPU by the course staff's grade submit when they grade "
            "your submission (there is no GPU here)") in flat
    html = render_html(graded, ROOT / "templates")
    assert "Not graded here (10 points pending):" in html and "timed on a GPU by the course staff" in html
    data = gradescope_results(graded, KERNELS)
    assert "10 points pending (not judged here):\n\nForward speed (10 points): timed on a GPU" in data["output"]
    pending = data["tests"][2]
    assert pending["output"].startswith("**Pending** (worth 10 points, not judged here): not timed: no CUDA device "
                                        "Timed on a GPU by the course staff")


def test_grade_check_says_the_quiz_is_marked_only_by_grade_submit_and_the_speed_on_a_gpu():
    questions = load_questions(MINI_COURSE / "assignments/mini/quiz.toml")
    checked = result([outcome("forward", "test_public::test_small"),
                      answered_outcome(questions, 'row_sum = 1\n', "quiz")], mode="check")
    found = {item.task_id: item for item in unjudged(checked)}
    assert list(found) == ["speed", "quiz", "backward"]  # no public test for speed or backward; no key for the quiz
    assert found["quiz"].who.startswith("only grade submit marks it, with the instructors' key")
    assert found["speed"].who.startswith("timed on a GPU by the course staff's grade submit")
    assert found["speed"].who.endswith("(grade check times nothing)")
    text, _ = terminal(checked)
    flat = " ".join(text.split())
    assert "(20 points pending: speed and quiz, judged elsewhere; see below)" in flat
    assert "… Quiz (10 points): only grade submit marks it" in flat
    assert ("… Bonus: backward kernels (10 bonus points): judged only by the hidden tests of grade submit (it has "
            "no public test)") in flat
    html = render_html(checked, ROOT / "templates")
    speed_row = html[html.index('href="#task-speed"'):]
    assert '<span class="badge pending">no public test</span>' in speed_row[:speed_row.index("</tr>")]
