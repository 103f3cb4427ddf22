"""Scoring is a pure function: manifest + outcomes + findings + time → Score.

No I/O, no clock, no randomness: the same inputs always give the same score,
which is what makes a regrade trustworthy.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from grader.core.manifest import LatePolicy, Manifest, SpeedThreshold, Task
from grader.core.records import FAILED, PASSED, PENDING, Score, StaticFinding, TaskScore, TestOutcome, TestScore
from grader.sandbox.forbidden import finding_reason


def late_days(policy: LatePolicy, deadline: datetime | None, submitted_at: datetime | None) -> int:
    """Started days late after the grace period (0 when on time or undated)."""
    if deadline is None or submitted_at is None:
        return 0
    overdue = submitted_at - deadline - timedelta(minutes=policy.grace_minutes)
    if overdue <= timedelta(0):
        return 0
    return math.ceil(overdue / timedelta(days=1))


def late_fraction(policy: LatePolicy, days: int) -> float:
    """Share of the score taken off for `days` days late."""
    if days <= 0:
        return 0.0
    if policy.max_days_late is not None and days > policy.max_days_late:
        return 1.0
    return min(1.0, days * policy.penalty_per_day)


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
        return speed_fraction(task.speed, float(timing["ratio"])) if timing.get("verified", True) else 0.0
    return outcome.fraction


def test_scores(tasks: tuple[TaskScore, ...], outcomes: list[TestOutcome] | tuple[TestOutcome, ...],
                manifest_tasks: dict[str, Task] | None = None) -> tuple[TestScore, ...]:
    """Each test's share of its task's points (equal shares, quiz questions by weight) and what it
    earned, in outcome order. A forbidden task's tests earn 0; a pending test earns 0 of its share."""
    by_id = {t.task_id: t for t in tasks}
    scores = []
    for outcome in outcomes:
        task = by_id.get(outcome.task)
        if task is None:
            scores.append(TestScore(outcome.name, outcome.task, 0.0, 0.0))
            continue
        siblings = [o for o in outcomes if o.task == outcome.task]
        total = sum(o.detail.get("weight", 1.0) for o in siblings) or 1.0
        share = round(task.points * outcome.detail.get("weight", 1.0) / total, 4)
        manifest_task = (manifest_tasks or {}).get(outcome.task)
        earned = 0.0 if task.status == "forbidden" else round(share * credit(manifest_task, outcome), 4)
        scores.append(TestScore(outcome.name, outcome.task, share, earned))
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
        why = (finding_reason(groups, task.functions + task.uses, task.section_text) if groups
               else "called a forbidden API while running; this task asks you to write that part yourself")
        return TaskScore(earned=0.0, status="forbidden", reason=why, **common)
    if not outcomes:
        return TaskScore(earned=0.0, status="no_tests", reason="no tests ran for this task",
                         **common)
    if not judged:
        return TaskScore(earned=0.0, status="pending",
                         reason=outcomes[0].message or "not judged on this machine", **common)
    weights = [o.detail.get("weight", 1.0) for o in judged]
    share = sum(w * credit(task, o) for w, o in zip(weights, judged, strict=True)) / sum(weights)
    return TaskScore(earned=round(task.points * share, 4), **common)


def score(manifest: Manifest, outcomes: list[TestOutcome], findings: list[StaticFinding] = (),
          submitted_at: datetime | None = None) -> Score:
    """The grade of one submission."""
    tasks = tuple(_task_score(task, [o for o in outcomes if o.task == task.id], list(findings))
                  for task in manifest.tasks)
    raw = sum(t.earned for t in tasks)
    days = late_days(manifest.late_policy, manifest.deadline, submitted_at)
    penalty = round(raw * late_fraction(manifest.late_policy, days), 4)
    pending_points = sum(t.points for t in tasks if t.status == "pending" and not t.bonus)
    return Score(tasks=tasks, raw=round(raw, 4), late_days=days, late_penalty=penalty,
                 total=round(raw - penalty, 4), max_points=manifest.max_points,
                 pending_points=pending_points,
                 bonus_earned=round(sum(t.earned for t in tasks if t.bonus), 4),
                 tests=test_scores(tasks, outcomes, {t.id: t for t in manifest.tasks}))
