"""The late-policy API and staff overrides in scoring: pure functions, so pure tests.

`score(..., submitted_at, due)` (a DueDate) is what grade() and a hosted
grader call; `final_score` is how a recorded grade counts today (the student's current
extension, then staff overrides).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from grader.core.compat import NoTimeZone, parse_zoned
from grader.core.due import DueDate
from grader.core.errors import StaffActionRefused
from grader.core.manifest import parse_manifest
from grader.core.records import GradeResult, Override, Score, TestOutcome
from grader.core.scoring import check_override, final_score, score

DEADLINE = datetime.fromisoformat("2026-12-01T12:00:00+00:00")
MANIFEST = parse_manifest({
    "id": "a", "files": ["a.py"], "deadline": DEADLINE.isoformat(),
    "late_policy": {"grace_minutes": 10, "penalty_per_day": 0.25, "max_days_late": 2},
    "tasks": [{"id": "t1", "points": 60, "functions": ["f"]}, {"id": "t2", "points": 40, "functions": ["g"]},
              {"id": "extra", "points": 5, "functions": ["h"], "bonus": True}],
})
ALL_PASS = [TestOutcome(name="a", task="t1", status="passed", fraction=1.0),
            TestOutcome(name="b", task="t2", status="passed", fraction=1.0)]
HALF = [TestOutcome(name="a", task="t1", status="passed", fraction=1.0),
        TestOutcome(name="b", task="t2", status="failed")]


def at(hours: float) -> datetime:
    return DEADLINE + timedelta(hours=hours)


def due(deadline: datetime = DEADLINE, **dates) -> DueDate:
    """The manifest's deadline (or another), with an extension or a closing time."""
    return DueDate(deadline=deadline, **dates)


def test_an_extension_moves_the_deadline_the_late_policy_counts_from():
    late = score(MANIFEST, ALL_PASS, (), at(20))  # 20 h late: one started day, 25 % off
    assert (late.late_days, late.late_penalty, late.total) == (1, 25.0, 75.0)
    assert late.due_at == DEADLINE.isoformat() and late.extension_s == 0
    extended = score(MANIFEST, ALL_PASS, (), at(20), due(extension=timedelta(days=1)))
    assert (extended.late_days, extended.late_penalty, extended.total) == (0, 0.0, 100.0)
    assert extended.due_at == at(24).isoformat() and extended.extension_s == 86400
    short = score(MANIFEST, ALL_PASS, (), at(20), due(extension=timedelta(hours=12)))  # still 8 h late
    assert (short.late_days, short.total) == (1, 75.0)


def test_a_hosted_graders_due_date_replaces_the_manifests_and_takes_the_extension_too():
    own = score(MANIFEST, ALL_PASS, (), at(20), due(deadline=at(-48)))  # due two days earlier: 68 h late
    assert (own.late_days, own.total) == (3, 0.0)  # more than max_days_late: nothing
    both = score(MANIFEST, ALL_PASS, (), at(20), due(deadline=at(-48), extension=timedelta(days=3)))
    assert (both.late_days, both.total, both.due_at) == (0, 100.0, at(24).isoformat())
    assert DueDate(None, timedelta(days=1)).due is None  # no deadline: an extension changes nothing


def test_after_the_late_window_closes_nothing_is_earned():
    assert score(MANIFEST, ALL_PASS, (), at(20), due(closes_at=at(30))).total == 75.0
    closed = score(MANIFEST, ALL_PASS, (), at(20), due(closes_at=at(10)))
    assert (closed.late_days, closed.late_penalty, closed.total) == (1, 100.0, 0.0)
    # the student's extension shifts the window too
    assert score(MANIFEST, ALL_PASS, (), at(20), due(closes_at=at(10), extension=timedelta(hours=11))).total == 75.0


def test_final_score_applies_todays_extension_to_a_recorded_grade():
    recorded = score(MANIFEST, ALL_PASS, (), at(20))
    assert final_score(MANIFEST, recorded, at(20)) == recorded  # nothing changed: the same score
    now = final_score(MANIFEST, recorded, at(20), due=due(extension=timedelta(days=1)))
    assert (now.late_days, now.late_penalty, now.total) == (0, 0.0, 100.0)
    assert now.tasks == recorded.tasks and now.tests == recorded.tests and now.computed_total is None


def test_a_task_override_replaces_its_points_before_the_late_penalty():
    recorded = score(MANIFEST, HALF, (), at(20))  # raw 60, 25 % off: 45
    fix = Override(task="t2", points=30, reason="partial credit", author="ta1", created_at="2026-12-03T10:00:00")
    now = final_score(MANIFEST, recorded, at(20), overrides=[fix])
    assert {t.task_id: t.earned for t in now.tasks} == {"t1": 60, "t2": 30, "extra": 0}
    assert (now.raw, now.late_penalty, now.total, now.computed_total) == (90, 22.5, 67.5, 45.0)
    assert now.overrides == (Override("t2", 30, "partial credit", "ta1", "2026-12-03T10:00:00", computed=0.0),)
    assert now.tests == recorded.tests  # per-test points stay as graded


def test_a_total_override_is_the_last_word_and_the_newest_override_per_task_wins():
    recorded = score(MANIFEST, HALF, (), at(20))
    older = Override(task="t2", points=10, reason="first look", author="ta1", created_at="2026-12-03T10:00:00")
    newer = Override(task="t2", points=20, reason="second look", author="ta2", created_at="2026-12-04T10:00:00")
    total = Override(task=None, points=88, reason="oral exam", author="prof", created_at="2026-12-05T10:00:00")
    now = final_score(MANIFEST, recorded, at(20), overrides=[newer, total, older])
    assert now.total == 88 and now.computed_total == 45.0
    assert [(o.task, o.points, o.computed) for o in now.overrides] == [("t2", 20, 0.0), (None, 88, 60.0)]
    assert now.late_penalty == 20.0  # (60 + 20) x 25 %: still shown, though the total was set by hand


def test_overrides_are_checked_against_the_manifest():
    check_override(MANIFEST, "t2", 40)
    check_override(MANIFEST, None, 105)  # the total may reach the bonus
    check_override(MANIFEST, "t1", 0)
    for task, points, words in [("t2", 41, "task 't2' is worth 40 points; 41 is more"),
                                (None, 106, "a is worth at most 105 points (bonus included); 106 is more"),
                                ("nope", 1, "a has no task 'nope' (tasks: t1, t2, extra)"),
                                ("t1", -1, "override points must be a number >= 0, not -1"),
                                ("t1", float("nan"), "override points must be a number >= 0")]:
        with pytest.raises(StaffActionRefused) as caught:
            check_override(MANIFEST, task, points)
        assert words in str(caught.value)


def test_scores_with_overrides_round_trip_and_old_records_still_load():
    recorded = score(MANIFEST, HALF, (), at(20), due(extension=timedelta(hours=6)))
    fix = Override(task="t2", points=30, reason="r", author="ta1", created_at="2026-12-03T10:00:00")
    now = final_score(MANIFEST, recorded, at(20), due=due(extension=timedelta(hours=6)), overrides=[fix])
    assert Score.from_dict(json.loads(json.dumps(now.to_dict()))) == now
    old = now.to_dict()
    for key in ("due_at", "extension_s", "overrides", "computed_total"):  # a record from before these existed
        old.pop(key)
    assert Score.from_dict(old).overrides == () and Score.from_dict(old).due_at is None
    result = GradeResult(assignment_id="a", assignment_title="A", student="s", mode="submit", score=now,
                         outcomes=tuple(HALF), findings=(), submission_sha256="0" * 64, submission_form="folder",
                         submitted_at=at(20).isoformat(), graded_at="2026-12-02T09:00:00+00:00", seed=1,
                         isolation="process", isolation_level="process", duration_s=1.0, fingerprint="f" * 64)
    data = json.loads(json.dumps(result.to_dict()))
    assert GradeResult.from_dict(data) == result
    data.pop("fingerprint")
    assert GradeResult.from_dict(data).fingerprint == ""


@pytest.mark.parametrize("text, error", [
    ("2026-12-14T23:59:00+01:00", None), ("2026-12-14T23:59:00Z", None),
    ("2026-12-14T23:59:00", NoTimeZone), ("yesterday", ValueError),
])
def test_the_one_parser_of_given_dates_wants_a_time_zone(text, error):
    if error is None:
        assert parse_zoned(text).utcoffset() is not None
    else:
        with pytest.raises(error) as caught:
            parse_zoned(text)
        assert (type(caught.value) is NoTimeZone) == (error is NoTimeZone)


def test_a_late_penalty_and_an_override_are_whole_hundredths_as_every_point_shown():
    manifest = parse_manifest({
        "id": "a", "files": ["a.py"], "deadline": DEADLINE.isoformat(),
        "late_policy": {"grace_minutes": 0, "penalty_per_day": 0.15},
        "tasks": [{"id": "t1", "points": 17.5, "functions": ["f"]}],
    })
    late = score(manifest, [TestOutcome(name="a", task="t1", status="passed", fraction=1.0)], (), at(20))
    assert late.raw == 17.5 and late.late_penalty == 2.62 and late.total == 14.88  # not 2.625 and 14.875
    fix = Override(task="t1", points=10.004, reason="r", author="ta1", created_at="2026-12-03T10:00:00")
    total = Override(task=None, points=9.999, reason="r", author="ta1", created_at="2026-12-04T10:00:00")
    now = final_score(manifest, late, at(20), overrides=[fix, total])
    assert [t.earned for t in now.tasks] == [10.0] and now.total == 10.0
