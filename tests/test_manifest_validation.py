"""The manifest is checked by type and range, every problem at once, before anything is graded.

A quoted number or a negative penalty used to grade a whole class wrongly without a sound
(`call_timeout_s = "30"` timed every call out; `penalty_per_day = -0.5` added points). Each
test here writes the slip into a real assignment.toml of a copy of the tiny course.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.errors import ManifestError
from grader.core.manifest import load_manifest, parse_manifest
from tests.conftest import copy_mini_course

GOOD_TASK = {"id": "a", "points": 10, "functions": ["f"]}


def base(**extra) -> dict:
    return {"id": "x", "files": ["a.py"], "tasks": [dict(GOOD_TASK)], **extra}


def problems_of(data: dict) -> tuple[str, ...]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data)
    return caught.value.problems


@pytest.mark.parametrize("data, words", [
    (base(limits={"call_timeout_s": "30"}),
     "[limits] 'call_timeout_s' must be float: a number > 0, in seconds; got the text '30' "
     "(write call_timeout_s = 30, without quotes)"),
    (base(limits={"call_timeout_s": 0}), "[limits] 'call_timeout_s' must be a number > 0, in seconds; got 0"),
    (base(limits={"submission_budget_s": -5}), "'submission_budget_s' must be a number > 0"),
    (base(limits={"memory_mb": 1.5}), "[limits] 'memory_mb' must be int: a whole number > 0; got 1.5"),
    (base(limits={"call_timeout_s": True}), "'call_timeout_s' must be float: a number > 0, in seconds; got the "
                                            "boolean true"),
    (base(limits={"call_timeout_s": 60, "submission_budget_s": 30}),
     "submission_budget_s (30) must be at least call_timeout_s (60)"),
    (base(limits={"timeout": 3}), "[limits] unknown key 'timeout'"),
    (base(late_policy={"penalty_per_day": -0.5}),
     "[late_policy] 'penalty_per_day' must be a number >= 0 and <= 1, the fraction of the score taken off per "
     "started day; got -0.5"),
    (base(late_policy={"penalty_per_day": 1.5}), "'penalty_per_day' must be a number >= 0 and <= 1"),
    (base(late_policy={"grace_minutes": -1}), "'grace_minutes' must be a whole number >= 0, in minutes; got -1"),
    (base(late_policy={"max_days_late": 2.5}), "'max_days_late' must be int: a whole number >= 0, in days"),
    (base(late_policy={"penalty": 0.1}), "[late_policy] unknown key 'penalty' (did you mean 'penalty_per_day'?)"),
    (base(deadline="2026-12-01T12:00:00"), "deadline: give a time zone"),
    (base(deadline=12), "deadline: not a date-time: 12"),
    (base(deadlne="2026-12-01T12:00:00+00:00"), "unknown key 'deadlne' (did you mean 'deadline'?)"),
    (base(files=["../x.py"]), "'files' entry '../x.py' must be a relative path to a .py module"),
    ({"id": "x", "files": ["a.py"], "tasks": [{**GOOD_TASK, "points": -1}]}, "task 'a': 'points' must be a "
                                                                               "number >= 0; got -1"),
    ({"id": "x", "files": ["a.py"], "tasks": [{**GOOD_TASK, "bonus": "yes"}]}, "'bonus' must be true or false"),
    ({"id": "x", "files": ["a.py"], "tasks": [{**GOOD_TASK, "pionts": 3}]},
     "task 'a': unknown key 'pionts' (did you mean 'points'?)"),
    ({"id": "x", "files": ["a.py"], "tasks": [GOOD_TASK, {"id": "q1", "kind": "quiz", "points": 1},
                                              {"id": "q2", "kind": "quiz", "points": 1}]}, "one quiz task"),
    ({"id": "x", "files": ["a.py"], "tasks": [{"id": "a", "points": 0, "functions": ["f"]}]},
     "must be worth more than 0 points"),
    ({"id": "x", "tasks": [GOOD_TASK]}, "'files' must list the student's modules"),
])
def test_each_slip_is_one_clear_problem(data: dict, words: str):
    found = problems_of(data)
    assert len(found) == 1, found
    assert words in found[0], found[0]


@pytest.mark.parametrize("speed, words", [
    ([[3.0, 0.5], [1.5, 1.0]], "sorted by ratio, fastest first"),
    ([[1.5, 1.2]], "the fraction must be within (0, 1], got 1.2"),
    ([[1.5, 0.0]], "the fraction must be within (0, 1], got 0"),
    ([[0, 1.0]], "the time ratio must be > 0, got 0"),
    ([[1.5, 0.5], [3.0, 1.0]], "must not grow as the ratio grows"),
    ([[1.5]], "must be a [ratio, fraction] pair of numbers"),
    ([["1.5", 1.0]], "must be a [ratio, fraction] pair of numbers"),
])
def test_speed_thresholds_are_sorted_and_within_range(speed, words: str):
    data = base()
    data["tasks"].append({"id": "fast", "kind": "timing", "points": 5, "speed": speed})
    found = problems_of(data)
    assert any(words in p for p in found), found


def test_speed_belongs_to_timing_tasks():
    found = problems_of(base(tasks=[{**GOOD_TASK, "speed": [[1.5, 1.0]]}]))
    assert found == ("task 'a': 'speed' thresholds belong to a task with kind = \"timing\"",)


def test_every_problem_is_listed_at_once_in_one_error():
    data = {"id": "x", "files": ["a.py"], "deadline": "2026-12-01T12:00:00", "colour": "red",
            "late_policy": {"penalty_per_day": -0.5, "grace_minutes": "10"},
            "limits": {"call_timeout_s": "30"},
            "tasks": [{"id": "a", "points": -2, "functions": ["f"]},
                      {"id": "s", "kind": "timing", "points": 5, "speed": [[3, 0.5], [1.5, 1.0]]}]}
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data, Path("assignments/x/assignment.toml"))
    problems = caught.value.problems
    assert len(problems) == 8, problems
    message = str(caught.value)
    assert message.startswith("assignments/x/assignment.toml: 8 problems: (1) unknown key 'colour'")
    for number, problem in enumerate(problems, start=1):
        assert f"({number}) {problem}" in message
    assert "\n" not in message  # one line, as the CLI prints it


def test_the_shipped_manifests_still_load_unchanged():
    for manifest_path in sorted((Path(__file__).parent.parent / "assignments").glob("*/assignment.toml")):
        manifest = load_manifest(manifest_path)
        assert manifest.limits.call_timeout_s > 0 and manifest.max_points > 0
    timing = load_manifest(Path(__file__).parent.parent / "assignments" / "assignment3" / "assignment.toml")
    ratios = [t.ratio for t in timing.task("flash_speed").speed]
    assert ratios == sorted(ratios)


@pytest.mark.parametrize("slip, words", [
    ("call_timeout_s = 30", 'call_timeout_s = "30"'),
    ("penalty_per_day = 0.25", "penalty_per_day = -0.5"),
])
def test_grade_submit_refuses_a_broken_manifest_before_grading(tmp_path: Path, slip: str, words: str):
    course = tmp_path / "course"
    copy_mini_course(course)
    manifest = course / "assignments" / "mini" / "assignment.toml"
    text = manifest.read_text()
    assert slip in text
    manifest.write_text(text.replace(slip, words))
    result = CliRunner().invoke(main, ["--course", str(course), "submit", "mini", "--workspace",
                                       str(course / "reference" / "mini"), "--student", "ref"])
    assert result.exit_code == 2, result.output
    key = words.split(" = ")[0]
    assert re.search(rf"Error: .*assignment\.toml: .*'{key}' must be", result.output), result.output
    assert not (course / ".grade" / "gradebook.sqlite").exists()  # nothing graded, nothing recorded
