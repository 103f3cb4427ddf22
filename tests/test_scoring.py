"""Scoring is pure: the same inputs always give the same score."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from grader.core.manifest import LatePolicy, SpeedThreshold, parse_manifest
from grader.core.records import StaticFinding, TestOutcome
from grader.core.scoring import POINT_DECIMALS, largest_remainder, late_days, late_fraction, score, speed_fraction

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


# ------------------------------------------------------------- per-test points


def _exact_sum(values) -> Decimal:
    """What a reader adding up the shown numbers gets: each float as the decimal it prints as."""
    return sum((Decimal(repr(v)) for v in values), Decimal(0))


def test_largest_remainder_splits_exactly_and_favours_the_largest_remainders():
    assert largest_remainder(2000, [1.0] * 13) == [154] * 11 + [153] * 2  # 20 points over 13 tests
    assert largest_remainder(100, [1.0, 1.0, 1.0]) == [34, 33, 33]  # ties: earlier parts first
    assert largest_remainder(1000, [3.0, 1.0]) == [750, 250]
    assert largest_remainder(500, [0.0, 0.0]) == [250, 250]  # no weights: equal parts
    assert largest_remainder(700, []) == []
    for n in range(1, 40):
        parts = largest_remainder(1500, [1.0 + (i % 3) for i in range(n)])
        assert sum(parts) == 1500 and max(parts) - min(parts) <= 3 * 1500 // n + 1


@pytest.mark.parametrize("n_tests, points", [(13, 20), (7, 5), (25, 35), (16, 40), (9, 10), (6, 15), (3, 1)])
def test_each_task_s_tests_share_its_points_exactly(n_tests, points):
    one = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [
        {"id": "t", "points": points, "functions": ["f"]}, {"id": "u", "points": 100 - points, "functions": ["g"]}]})
    outcomes = [TestOutcome(name=f"t{i}", task="t", status="passed", fraction=1.0) for i in range(n_tests)]
    outcomes += [TestOutcome(name="u0", task="u", status="passed", fraction=1.0)]
    result = score(one, outcomes)
    shares = [t.max_score for t in result.tests if t.task == "t"]
    assert _exact_sum(shares) == points and math.fsum(shares) == points
    assert all(round(s, POINT_DECIMALS) == s for s in shares)
    assert _exact_sum(t.max_score for t in result.tests) == 100 == result.total


def test_earned_points_of_the_tests_add_up_to_the_task_s_earned_points():
    task = {"id": "t", "points": 20, "functions": ["f"]}
    one = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [task]})
    for failing in range(13):
        outcomes = [TestOutcome(name=f"t{i}", task="t", status="failed" if i == failing else "passed",
                                fraction=0.0 if i == failing else 1.0) for i in range(13)]
        result = score(one, outcomes)
        earned = [t.score for t in result.tests]
        assert _exact_sum(earned) == Decimal(repr(result.tasks[0].earned)) == Decimal(repr(result.total))
        assert result.tasks[0].earned in (18.46, 18.47)  # 20 less the failed test's share
        lost = result.tests[failing]
        assert lost.score == 0 and result.tasks[0].earned == round(20 - lost.max_score, 2)


def test_quiz_weights_and_partial_credit_are_allocated_in_whole_hundredths():
    one = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [
        {"id": "quiz", "kind": "quiz", "points": 15},
        {"id": "speed", "kind": "timing", "points": 10, "speed": [[1.5, 1.0], [3, 0.6]]}]})
    weights = [1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 2.0]  # 15 points over a weight of 11
    quiz = [TestOutcome(name=f"q{i}", task="quiz", status="passed" if i % 2 else "failed",
                        fraction=1.0 if i % 2 else 0.0, detail={"weight": w * 7 / sum(weights)})
            for i, w in enumerate(weights)]
    timed = [TestOutcome(name=f"s{i}", task="speed", status="passed", fraction=1.0,
                         detail={"timing": {"ratio": ratio, "verified": True}})
             for i, ratio in enumerate((1.2, 2.5, 9.0))]
    result = score(one, quiz + timed)
    by_task = {t.task_id: t for t in result.tasks}
    for task_id, points in (("quiz", 15), ("speed", 10)):
        mine = [t for t in result.tests if t.task == task_id]
        assert _exact_sum(t.max_score for t in mine) == points
        assert _exact_sum(t.score for t in mine) == Decimal(repr(by_task[task_id].earned))
    assert [t.max_score for t in result.tests[:7]] == [1.37, 2.73, 1.36, 1.36, 4.09, 1.36, 2.73]
    assert [t.score for t in result.tests[7:]] == [3.34, 2.0, 0.0]  # 3.34 × 1, 3.33 × 0.6, 3.33 × 0 (too slow)
    assert _exact_sum([result.raw]) == _exact_sum(t.earned for t in result.tasks)


def test_a_forbidden_task_keeps_its_shares_and_earns_nothing_and_pending_tests_leave_the_share_to_judged_ones():
    finding = StaticFinding("t1", "f", "softmax", 3, "torch.softmax(x)")
    outcomes = [outcome("t1", "passed"), outcome("t1", "passed"), outcome("t2", "passed"),
                TestOutcome(name="t2-later", task="t2", status="pending", kind="not_run")]
    result = score(manifest(), outcomes, [finding])
    assert [(t.max_score, t.score) for t in result.tests] == [(30.0, 0.0), (30.0, 0.0), (40.0, 40.0), (0.0, 0.0)]
    assert result.total == 40.0
    pending_only = score(manifest(), [outcome("speed", "pending"), outcome("speed", "pending")])
    speed = [t for t in pending_only.tests if t.task == "speed"]
    assert [t.max_score for t in speed] == [5.0, 5.0] and not any(t.score for t in speed)
