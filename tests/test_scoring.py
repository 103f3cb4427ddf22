"""Scoring is pure: the same inputs always give the same score."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from grader.core.manifest import LatePolicy, SpeedThreshold, parse_manifest
from grader.core.records import StaticFinding, TestOutcome
from grader.core.scoring import late_days, late_fraction, score, speed_fraction

DEADLINE = datetime.fromisoformat("2026-12-01T12:00:00+00:00")


def manifest(**late):
    return parse_manifest({
        "id": "a", "files": ["a.py"], "deadline": DEADLINE.isoformat(),
        "late_policy": late or {"grace_minutes": 10, "penalty_per_day": 0.25, "max_days_late": 2},
        "tasks": [
            {"id": "t1", "points": 60, "functions": ["f"], "forbidden": ["softmax"]},
            {"id": "t2", "points": 40, "functions": ["g"]},
            {"id": "speed", "kind": "timing", "points": 10, "speed": [[1.5, 1.0], [3, 0.5]],
             "bonus": True},
        ],
    })


def outcome(task, status, fraction=None, kind="", message=""):
    if fraction is None:
        fraction = 1.0 if status == "passed" else 0.0
    return TestOutcome(name=f"{task}-{status}-{fraction}", task=task, status=status, kind=kind,
                       fraction=fraction, message=message)


def test_fraction_of_tests_passed():
    result = score(manifest(), [outcome("t1", "passed"), outcome("t1", "failed"),
                                outcome("t2", "passed")])
    earned = {t.task_id: t.earned for t in result.tasks}
    assert earned == {"t1": 30.0, "t2": 40.0, "speed": 0.0}
    assert result.total == 70.0 and result.max_points == 100.0


def test_static_finding_zeroes_the_task():
    finding = StaticFinding("t1", "f", "softmax", 3, "torch.softmax(x)")
    result = score(manifest(), [outcome("t1", "passed"), outcome("t2", "passed")], [finding])
    t1 = result.tasks[0]
    assert t1.earned == 0 and t1.status == "forbidden" and "softmax" in t1.reason


def test_runtime_forbidden_outcome_zeroes_the_task():
    result = score(manifest(), [outcome("t1", "passed"), outcome("t1", "failed", kind="forbidden")])
    assert result.tasks[0].status == "forbidden" and result.tasks[0].earned == 0


def test_pending_tests_are_neither_passed_nor_failed():
    pending = outcome("speed", "pending", message="not timed: no CUDA device")
    result = score(manifest(), [outcome("t1", "passed"), outcome("t2", "passed"), pending])
    speed = result.tasks[2]
    assert speed.status == "pending" and speed.earned == 0 and speed.pending == 1
    assert result.total == 100.0
    assert result.pending_points == 0  # a bonus task never counts as pending regular points


def test_timing_partial_credit_and_thresholds():
    thresholds = (SpeedThreshold(1.5, 1.0), SpeedThreshold(3.0, 0.5))
    assert speed_fraction(thresholds, 1.2) == 1.0
    assert speed_fraction(thresholds, 2.0) == 0.5
    assert speed_fraction(thresholds, 9.0) == 0.0
    result = score(manifest(), [outcome("speed", "passed", fraction=0.5)])
    assert result.tasks[2].earned == 5.0 and result.bonus_earned == 5.0


@pytest.mark.parametrize("delay, days, fraction", [
    (timedelta(minutes=-5), 0, 0.0),
    (timedelta(minutes=9), 0, 0.0),          # inside the grace period
    (timedelta(minutes=11), 1, 0.25),
    (timedelta(days=1, minutes=11), 2, 0.5),
    (timedelta(days=2, minutes=11), 3, 1.0),  # past max_days_late: nothing
])
def test_late_policy(delay, days, fraction):
    policy = LatePolicy(grace_minutes=10, penalty_per_day=0.25, max_days_late=2)
    assert late_days(policy, DEADLINE, DEADLINE + delay) == days
    assert late_fraction(policy, days) == fraction
    result = score(manifest(), [outcome("t1", "passed"), outcome("t2", "passed")], [],
                   DEADLINE + delay)
    assert result.late_penalty == pytest.approx(100 * fraction)
    assert result.total == pytest.approx(100 * (1 - fraction))


def test_scoring_is_deterministic():
    outcomes = [outcome("t1", "passed"), outcome("t2", "failed")]
    assert score(manifest(), outcomes) == score(manifest(), list(outcomes))


def test_no_tests_for_a_task_is_flagged():
    result = score(manifest(), [outcome("t1", "passed")])
    assert result.tasks[1].status == "no_tests"


@pytest.mark.parametrize("group, words", [
    ("evasion", ["code the grader cannot check", "torch._C", "public functions by their names"]),
    ("course_code", ["the grader's or the course's own code", "remove the import"]),
    ("numpy", ["another array library", "write that part yourself"]),
    ("no_triton_launch", ["f never launches a @triton.jit kernel", "kernel[grid](...) from f", "(§24)"]),
])
def test_findings_of_the_new_groups_zero_the_task_with_a_reason_that_says_what_to_change(group, words):
    flash = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [
        {"id": "t1", "points": 60, "functions": ["f"], "sections": ["§24"], "forbidden": ["numpy"],
         "requires": ["triton_launch"]},
        {"id": "t2", "points": 40, "functions": ["g"]}]})
    finding = StaticFinding("t1", "f", group, 3, "code")
    result = score(flash, [outcome("t1", "passed"), outcome("t2", "passed")], [finding])
    t1, t2 = result.tasks
    assert (t1.earned, t1.status, t2.earned) == (0.0, "forbidden", 40.0)
    for word in words:
        assert word in t1.reason, (word, t1.reason)
    assert not t1.reason.endswith(".")  # the report adds the full stop
