"""Scoring is a pure function: manifest + outcomes + findings + time → Score.

No I/O, no clock, no randomness: the same inputs always give the same score,
which is what makes a regrade trustworthy.

The late policy: `score(..., submitted_at, due)` holds a submission to its
DueDate (grader.core.due: the manifest's deadline unless a hosted grader or the
student's own date replaces it, plus the student's extension); after the due
date's closing time it earns nothing. `final_score` turns a recorded Score into
the one that counts today: the late policy applied again with the student's
current due date, then staff overrides.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta
from fractions import Fraction

from grader.core.due import DueDate
from grader.core.errors import StaffActionRefused
from grader.core.manifest import LatePolicy, Manifest, SpeedThreshold, Task
from grader.core.records import (
    FAILED,
    PASSED,
    PENDING,
    Override,
    Score,
    StaticFinding,
    TaskScore,
    TestOutcome,
    TestScore,
)
from grader.sandbox.forbidden import finding_reason


def late_days(policy: LatePolicy, deadline: datetime | None, submitted_at: datetime | None) -> int:
    """Started days late after the grace period (0 when on time or undated).

    `deadline` is the one that applies to this student (DueDate.due)."""
    if deadline is None or submitted_at is None:
        return 0
    overdue = submitted_at - deadline - timedelta(minutes=policy.grace_minutes)
    if overdue <= timedelta(0):
        return 0
    return math.ceil(overdue / timedelta(days=1))


def late_fraction(policy: LatePolicy, days: int) -> float:
    """Share of the score taken off for `days` days late (a manifest keeps it within [0, 1])."""
    if days <= 0:
        return 0.0
    if policy.max_days_late is not None and days > policy.max_days_late:
        return 1.0
    return min(1.0, max(0.0, days * policy.penalty_per_day))


def _late(manifest: Manifest, raw: float, submitted_at: datetime | None,
          due: DueDate | None) -> tuple[int, float, datetime | None]:
    """(days late, points taken off, the deadline applied) for `raw` points.

    After the due date's closing time (moved by the extension too) a submission earns nothing."""
    due = manifest.due_date if due is None else due
    days = late_days(manifest.late_policy, due.due, submitted_at)
    fraction = late_fraction(manifest.late_policy, days)
    closed = due.closes
    if closed is not None and submitted_at is not None and submitted_at > closed:
        fraction = 1.0
    return days, _points(_units(raw * fraction)), due.due  # whole hundredths, as every point shown


def speed_fraction(thresholds: tuple[SpeedThreshold, ...], ratio: float) -> float:
    """Credit for a student/reference time ratio: the first threshold it meets."""
    for threshold in thresholds:
        if ratio <= threshold.ratio:
            return threshold.fraction
    return 0.0


def credit(task: Task | None, outcome: TestOutcome) -> float:
    """The share of a test's points it earned: its fraction, and for a timing test the
    manifest's speed fraction of the ratio the trusted clock measured (0 if its outputs
    did not check out)."""
    if outcome.status != PASSED:
        return 0.0
    timing = outcome.detail.get("timing")
    if task is not None and task.kind == "timing" and isinstance(timing, dict) and "ratio" in timing:
        ratio = float(timing.get("scored_ratio", timing["ratio"]))  # a tie with the reference: its speed
        return speed_fraction(task.speed, ratio) if timing.get("verified", True) else 0.0
    return outcome.fraction


POINT_DECIMALS = 2  # every allocated point is a whole number of hundredths
_UNITS_PER_POINT = 10 ** POINT_DECIMALS


def _units(points: float) -> int:
    """`points` as a whole number of 10**-POINT_DECIMALS units."""
    return round(Fraction(points) * _UNITS_PER_POINT)


def _points(units: int) -> float:
    return round(units / _UNITS_PER_POINT, POINT_DECIMALS)


def largest_remainder(total_units: int, weights: list[float]) -> list[int]:
    """`total_units` split in proportion to `weights`, in whole units that add up to it exactly.

    Each part is first its quota rounded down; the units left over go one each to the
    parts with the largest remainders, earlier parts first on a tie (Hamilton's rule)."""
    exact = [Fraction(w) for w in weights]
    whole = sum(exact)
    if not exact:
        return []
    if whole <= 0:  # no weights: equal parts
        exact, whole = [Fraction(1)] * len(weights), Fraction(len(weights))
    quotas = [total_units * w / whole for w in exact]
    parts = [math.floor(q) for q in quotas]
    left = total_units - sum(parts)
    by_remainder = sorted(range(len(quotas)), key=lambda i: (-(quotas[i] - parts[i]), i))
    for i in by_remainder[:left]:
        parts[i] += 1
    return parts


def _allocate(task: Task | None, status: str, points: float,
              outcomes: list[TestOutcome]) -> list[tuple[int, int]]:
    """(share, earned) in units for each of one task's outcomes.

    The tests that were judged share the task's points by weight (largest remainder);
    when none was judged (a pending task) all of them share it. A test earns its share
    times its credit, rounded to a unit; a forbidden task's tests earn 0."""
    judged = [o.status != PENDING for o in outcomes]
    sharing = judged if any(judged) else [True] * len(outcomes)
    weights = [o.detail.get("weight", 1.0) for o, shares in zip(outcomes, sharing, strict=True) if shares]
    parts = iter(largest_remainder(_units(points), weights))
    allocated = []
    for outcome, shares in zip(outcomes, sharing, strict=True):
        share = next(parts) if shares else 0
        earned = 0 if status == "forbidden" else round(share * Fraction(credit(task, outcome)))
        allocated.append((share, earned))
    return allocated


def test_scores(tasks: tuple[TaskScore, ...], outcomes: list[TestOutcome] | tuple[TestOutcome, ...],
                manifest_tasks: dict[str, Task] | None = None) -> tuple[TestScore, ...]:
    """Each test's share of its task's points and what it earned, in outcome order: the one
    place per-test points are computed (rule: `_allocate`, at POINT_DECIMALS decimals).

    A task's shares add up to its points exactly and its tests' earned points to its
    earned points; a test of no known task has no share."""
    by_id = {t.task_id: t for t in tasks}
    allocated: dict[int, tuple[int, int]] = {}
    for task in tasks:
        mine = [i for i, o in enumerate(outcomes) if o.task == task.task_id]
        parts = _allocate((manifest_tasks or {}).get(task.task_id), task.status, task.points,
                          [outcomes[i] for i in mine])
        allocated.update(zip(mine, parts, strict=True))
    scores = []
    for i, outcome in enumerate(outcomes):
        share, earned = allocated.get(i, (0, 0)) if outcome.task in by_id else (0, 0)
        scores.append(TestScore(outcome.name, outcome.task, _points(share), _points(earned)))
    return tuple(scores)


def _task_score(task: Task, outcomes: list[TestOutcome], findings: list[StaticFinding]) -> TaskScore:
    judged = [o for o in outcomes if o.status != PENDING]
    passed = sum(o.status == PASSED for o in judged)
    failed = sum(o.status == FAILED for o in judged)
    pending = len(outcomes) - len(judged)
    common = dict(task_id=task.id, title=task.title, kind=task.kind, points=task.points,
                  passed=passed, failed=failed, pending=pending, bonus=task.bonus,
                  sections=task.sections)
    forbidden = sorted({f.group for f in findings if f.task == task.id} |
                       {"run time" for o in judged if o.kind == "forbidden"})
    if forbidden:
        groups = [g for g in forbidden if g != "run time"]
        through = tuple(sorted({f.where for f in findings if f.task == task.id and f.where and f.group in groups
                                and f.where not in task.functions}))
        why = (finding_reason(groups, task.functions + task.uses, task.section_text, through) if groups
               else "called a forbidden API while running; this task asks you to write that part yourself")
        return TaskScore(earned=0.0, status="forbidden", reason=why, **common)
    if not outcomes:
        return TaskScore(earned=0.0, status="no_tests", reason="no tests ran for this task",
                         **common)
    if not judged:
        return TaskScore(earned=0.0, status="pending",
                         reason=outcomes[0].message or "not judged on this machine", **common)
    earned = sum(units for _, units in _allocate(task, "graded", task.points, outcomes))
    return TaskScore(earned=_points(earned), **common)


def score(manifest: Manifest, outcomes: list[TestOutcome], findings: list[StaticFinding] = (),
          submitted_at: datetime | None = None, due: DueDate | None = None) -> Score:
    """The grade of one submission, held to `due` (default: the manifest's deadline, no extension)."""
    tasks = tuple(_task_score(task, [o for o in outcomes if o.task == task.id], list(findings))
                  for task in manifest.tasks)
    raw = sum(t.earned for t in tasks)
    days, penalty, due_at = _late(manifest, raw, submitted_at, due)
    extension = due.extension if due else None
    pending_points = sum(t.points for t in tasks if t.status == "pending" and not t.bonus)
    return Score(tasks=tasks, raw=round(raw, 4), late_days=days, late_penalty=penalty,
                 total=round(raw - penalty, 4), max_points=manifest.max_points,
                 pending_points=pending_points,
                 bonus_earned=round(sum(t.earned for t in tasks if t.bonus), 4),
                 tests=test_scores(tasks, outcomes, {t.id: t for t in manifest.tasks}),
                 due_at=due_at.isoformat() if due_at else None,
                 extension_s=extension.total_seconds() if extension else 0.0)


def check_override(manifest: Manifest, task_id: str | None, points: float) -> None:
    """Refuse an override the assignment cannot hold: an unknown task, or points outside [0, its points]."""
    if not math.isfinite(points) or points < 0:
        raise StaffActionRefused(f"override points must be a number >= 0, not {points!r}")
    if task_id is None:
        ceiling = manifest.max_points + manifest.bonus_points
        if points > ceiling:
            raise StaffActionRefused(f"{manifest.id} is worth at most {ceiling:g} points (bonus included); "
                                     f"{points:g} is more")
        return
    if not manifest.has_task(task_id):
        raise StaffActionRefused(f"{manifest.id} has no task {task_id!r} "
                                 f"(tasks: {', '.join(t.id for t in manifest.tasks)})")
    task = manifest.task(task_id)
    if points > task.points:
        raise StaffActionRefused(f"task {task_id!r} is worth {task.points:g} points; {points:g} is more")


def final_score(manifest: Manifest, computed: Score, submitted_at: datetime | None, *,
                due: DueDate | None = None, overrides: tuple[Override, ...] | list[Override] = ()) -> Score:
    """A recorded score as it stands today: the late policy applied again with the student's
    current due date, then staff overrides (the newest per task, and for the total).

    A task override replaces that task's points before the late penalty; a total override
    replaces the total after it. The per-test points stay as graded."""
    newest: dict[str | None, Override] = {}
    for override in sorted(overrides, key=lambda o: o.created_at):
        newest[override.task] = override
    applied = []
    tasks = []
    for task in computed.tasks:
        override = newest.get(task.task_id)
        if override is None or not any(t.id == task.task_id for t in manifest.tasks):
            tasks.append(task)
            continue
        applied.append(replace(override, computed=task.earned))
        tasks.append(replace(task, earned=_points(_units(override.points))))
    raw = round(sum(t.earned for t in tasks), 4)
    days, penalty, due_at = _late(manifest, raw, submitted_at, due)
    extension = due.extension if due else None
    total = round(raw - penalty, 4)
    before = total if not applied else round(computed.raw - _late(manifest, computed.raw, submitted_at, due)[1], 4)
    if None in newest:
        applied.append(replace(newest[None], computed=total))
        total = _points(_units(newest[None].points))
    return replace(computed, tasks=tuple(tasks), raw=raw, late_days=days, late_penalty=penalty, total=total,
                   bonus_earned=round(sum(t.earned for t in tasks if t.bonus), 4),
                   due_at=due_at.isoformat() if due_at else None,
                   extension_s=extension.total_seconds() if extension else 0.0,
                   overrides=tuple(applied), computed_total=before if applied else None)
