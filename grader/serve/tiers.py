"""The two tiers: every upload gets its CPU grade; a grading whose kernel tasks all pass, with its speed
points pending, is timed on a GPU when the server has a GPU worker. And the class leaderboard of what was
timed: aliases (never a student's id, except the reader's own row), ties shown as ties.

Pure: these read a manifest and recorded results, and decide; the gradebook and the runners act.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from grader.core.manifest import Manifest
from grader.core.records import GradeResult

ALIAS_WORDS = ("otter", "heron", "lynx", "ibis", "orca", "wren", "yak", "koala", "gecko", "marten", "puffin", "tapir")


def timing_tasks(manifest: Manifest) -> tuple[str, ...]:
    """The tasks whose points a GPU timing decides."""
    return tuple(task.id for task in manifest.tasks if task.kind == "timing")


def kernel_tasks(manifest: Manifest) -> tuple[str, ...]:
    """The required code tasks that launch the kernels the timing tasks time (a contract launcher among their
    functions or the functions they use that a timing task uses too)."""
    if manifest.contract is None:
        return ()
    timed = {name for task in manifest.tasks if task.kind == "timing" for name in (*task.functions, *task.uses)}
    launchers = set(manifest.contract.launcher_names) & timed
    return tuple(task.id for task in manifest.tasks if task.kind == "code" and not task.bonus
                 and launchers & (set(task.functions) | set(task.uses)))


def wants_timing(manifest: Manifest, result: GradeResult) -> bool:
    """Whether a CPU grading goes on to the GPU tier: the assignment has timing tasks, this grading left
    their points pending, and every kernel task earned its full points."""
    timed = set(timing_tasks(manifest))
    if not timed:
        return False
    tasks = {task.task_id: task for task in result.score.tasks}
    if not any(tasks[t].status == "pending" for t in timed if t in tasks):
        return False
    kernels = kernel_tasks(manifest)
    return bool(kernels) and all(t in tasks and tasks[t].points > 0 and tasks[t].earned >= tasks[t].points
                                 for t in kernels)


def alias(key: bytes, student: str) -> str:
    """A student's stable alias on the leaderboard: a word and four hex digits, from a keyed hash."""
    digest = hmac.new(key, student.encode(), hashlib.sha256).digest()
    return f"{ALIAS_WORDS[digest[0] % len(ALIAS_WORDS)]}-{digest[1:3].hex()}"


@dataclass(frozen=True)
class BoardRow:
    """One timed student: their rank (equal for equal speed-ups), alias, speed-up over the reference
    (reference time / student time, the geometric mean over their timing tests) and whether it is the
    reader's own row."""

    rank: int
    alias: str
    speedup: float
    tests: int
    own: bool


def speedups(result: GradeResult) -> list[float]:
    """The student's speed-up over the reference in each timing test of `result` that was timed on a GPU."""
    found = []
    for outcome in result.outcomes:
        timing = (outcome.detail or {}).get("timing")
        if not timing or timing.get("cpu_timed") or not timing.get("ratio"):
            continue
        ratio = float(timing["ratio"])  # the student's time over the reference's
        if ratio > 0:
            found.append(1.0 / ratio)
    return found


def leaderboard(results: dict[str, GradeResult], key: bytes, reader: str | None = None,
                digits: int = 2) -> list[BoardRow]:
    """The class leaderboard from each student's latest result (student → result): fastest first; speed-ups
    equal when rounded to `digits` share a rank (competition ranking: 1, 1, 3)."""
    entries = []
    for student, result in results.items():
        found = speedups(result)
        if not found:
            continue
        product = 1.0
        for value in found:
            product *= value
        entries.append((round(product ** (1 / len(found)), digits), student, len(found)))
    entries.sort(key=lambda e: (-e[0], alias(key, e[1])))
    rows, rank = [], 0
    for place, (speed, student, tests) in enumerate(entries, start=1):
        if place == 1 or speed != entries[place - 2][0]:
            rank = place
        rows.append(BoardRow(rank, alias(key, student), speed, tests, student == reader))
    return rows
