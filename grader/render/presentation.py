"""What a student reads first, decided once for the terminal, the HTML report and results.json.

* Task order: the required tasks, then the bonus tasks, each group in the manifest's order
  (`task_order`). A failure is listed under its task in that order too (`by_task_order`).
* A bonus task not attempted (every test it ran failed because the function or kernel is
  not written yet, or not there at all) is shown as "not attempted", neutral: a bonus is
  optional, so leaving it out breaks no rule (`not_attempted`).
* Points not judged in this run (`unjudged`) say which they are and who judges them, where
  and when: the quiz only by `grade submit` (the key is the instructors'), the speed points
  on a GPU by the course staff's `grade submit`. Under `grade check`, a task with no public
  test is listed the same way (its points come from the hidden tests alone).

Nothing here decides a point: the scores come from grader.core.scoring; these are views of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from grader.core.records import FAILED, PASSED, GradeResult, Kind, TaskScore, TestOutcome

# A test that failed this way found nothing of the student's to run: the function or kernel is not
# written yet (the stub's NotImplementedError) or not in the files at all.
NOTHING_WRITTEN = frozenset({Kind.NOT_IMPLEMENTED, Kind.MISSING})
NOT_ATTEMPTED = "not attempted"


def task_order(tasks: Iterable[TaskScore]) -> list[TaskScore]:
    """The required tasks first, then the bonus tasks; each group keeps the manifest's order."""
    tasks = list(tasks)
    return [t for t in tasks if not t.bonus] + [t for t in tasks if t.bonus]


def nothing_written(outcome: TestOutcome) -> bool:
    """Whether a failed test found nothing of the student's to run: the function or kernel is not written
    (NotImplementedError) or not there, or the kernels the grader launched stored nothing at all (every
    element of the output is still the NaN the launcher filled it with) or are still the handout's stubs
    (recorded as data by the test: problem["nothing_stored"])."""
    if outcome.status != FAILED:
        return False
    return outcome.kind in NOTHING_WRITTEN or (
        outcome.kind == Kind.DEGENERATE and bool((outcome.problem or {}).get("nothing_stored")))


def not_attempted(task: TaskScore, outcomes: Sequence[TestOutcome]) -> bool:
    """Whether `task` is a bonus task the student did not attempt: graded, nothing earned, and every
    test of it that was judged failed because there was nothing written to run."""
    if not task.bonus or task.status != "graded" or task.earned > 0:
        return False
    judged = [o for o in outcomes if o.task == task.task_id and o.status in (PASSED, FAILED)]
    return bool(judged) and all(nothing_written(o) for o in judged)


STATUS_WORDS = {"graded": "graded", "pending": "pending", "forbidden": "forbidden API",
                "no_tests": "no tests here"}


def status_words(status: str, mode: str) -> str:
    """A task's status (TaskScore.status) in words: under grade check a task without a public test is
    "no public test" (the hidden tests of grade submit judge it)."""
    if status == "no_tests" and mode == "check":
        return "no public test"
    return STATUS_WORDS.get(status, status.replace("_", " "))


def not_attempted_ids(result: GradeResult) -> set[str]:
    """The ids of the bonus tasks of `result` that were not attempted."""
    return {t.task_id for t in result.score.tasks if not_attempted(t, result.outcomes)}


def by_task_order(items: Iterable, task_of, tasks: Iterable[TaskScore]) -> list:
    """`items` sorted by the position of their task (`task_of(item)`) in `task_order`, stable, with
    items of no known task last."""
    position = {t.task_id: i for i, t in enumerate(task_order(tasks))}
    return sorted(items, key=lambda item: position.get(task_of(item), len(position)))


# ----------------------------------------------------------------- points not judged here
@dataclass(frozen=True)
class Unjudged:
    """A task whose points this run did not judge: what they are ("quiz", "speed" or "tests"), and who
    judges them, where and when (`who`, a clause without its subject)."""

    task_id: str
    title: str
    points: float
    bonus: bool
    what: str
    who: str

    def line(self) -> str:
        """'Quiz (20 points): only grade submit marks it, ...'"""
        return f"{self.title} ({self.points:g} {'bonus ' if self.bonus else ''}points): {self.who}"


def _who(task: TaskScore, mode: str) -> tuple[str, str]:
    """(what the points are, who judges them, where and when) for a task this run did not judge."""
    if task.kind == "quiz":
        if mode == "check":
            return "quiz", ("only grade submit marks it, with the instructors' key, when your submission is "
                            "graded; grade check only counts your answers")
        return "quiz", "marked by the course staff's grade submit where the quiz key is (it is not here)"
    if task.kind == "timing":
        here = "grade check times nothing" if mode == "check" else "there is no GPU here"
        return "speed", f"timed on a GPU by the course staff's grade submit when they grade your submission ({here})"
    if mode == "check":
        return "tests", "judged only by the hidden tests of grade submit (it has no public test)"
    return "tests", f"not judged here: {task.reason}" if task.reason else "not judged here"


def unjudged(result: GradeResult) -> list[Unjudged]:
    """The tasks whose points this run did not judge, in `task_order`: pending tasks, and under
    grade check the tasks with no public test."""
    found = []
    for task in task_order(result.score.tasks):
        if task.status == "pending" or (result.mode == "check" and task.status == "no_tests"):
            what, who = _who(task, result.mode)
            found.append(Unjudged(task.task_id, task.title, task.points, task.bonus, what, who))
    return found


def unjudged_points(items: Iterable[Unjudged]) -> float:
    """The points of the required tasks among `items` (a bonus adds to the total, it is never owed)."""
    return sum(item.points for item in items if not item.bonus)
