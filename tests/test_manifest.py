from __future__ import annotations

import pytest

from grader.core.course import Course
from grader.core.errors import ManifestError
from grader.core.manifest import load_manifest, parse_manifest
from tests.conftest import MINI_COURSE, ROOT


def test_every_shipped_manifest_loads():
    course = Course(ROOT)
    for assignment_id in course.assignment_ids():
        manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
        assert manifest.id == assignment_id
        assert manifest.max_points > 0


def test_mini_manifest():
    manifest = load_manifest(MINI_COURSE / "assignments/mini/assignment.toml")
    assert [t.id for t in manifest.tasks] == ["double", "normalize", "quiz"]
    assert manifest.task_for_function("normalize").forbidden == ("softmax",)
    assert manifest.max_points == 100


@pytest.mark.parametrize("data, words", [
    ({"files": [], "tasks": [{"id": "a", "points": 1}]}, "missing required key 'id'"),
    ({"id": "x", "tasks": []}, "at least one [[tasks]]"),
    ({"id": "x", "tasks": [{"id": "a", "points": 1}, {"id": "a", "points": 2}]}, "duplicate task"),
    ({"id": "x", "tasks": [{"id": "a", "points": "ten"}]}, "'points' must be float"),
    ({"id": "x", "tasks": [{"id": "a", "points": 1, "kind": "essay"}]}, "kind must be one of"),
    ({"id": "x", "tasks": [{"id": "a", "points": 1, "kind": "timing"}]}, "speed thresholds"),
    ({"id": "x", "deadline": "tomorrow", "tasks": [{"id": "a", "points": 1}]}, "ISO 8601"),
    ({"id": "x", "deadline": "2026-01-01T00:00:00", "tasks": [{"id": "a", "points": 1}]}, "time zone"),
    ({"id": "x", "late_policy": {"bogus": 1}, "tasks": [{"id": "a", "points": 1}]}, "bogus"),
    ({"id": "x", "tasks": [{"id": "a", "points": 1, "functions": ["f"]},
                           {"id": "b", "points": 1, "functions": ["f"]}]}, "claimed by two"),
])
def test_bad_manifests_are_explained(data, words):
    with pytest.raises(ManifestError, match=None) as info:
        parse_manifest(data)
    assert words in str(info.value)


def test_unreadable_toml(tmp_path):
    path = tmp_path / "assignment.toml"
    path.write_text("id = [unclosed")
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_manifest(path)


def test_requires_uses_and_the_kernel_contract_are_parsed():
    manifest = load_manifest(ROOT / "assignments" / "assignment3" / "assignment.toml")
    assert manifest.task("flash_launcher").requires == ("triton_launch",)
    assert manifest.task("flash_forward").requires == () and manifest.task("flash_backward").requires == ()
    gqa = manifest.task("flash_gqa")
    assert gqa.uses == ("launch_forward",) and gqa.functions == ()
    assert manifest.task("flash_speed").uses == ("launch_forward",)
    assert manifest.task("gqa").requires == () and manifest.task("gqa").uses == ()
    contract = manifest.contract
    assert (contract.module, contract.file) == ("contract.py", "flash.py")
    assert contract.launcher_names == ("launch_forward", "launch_backward")
    assert manifest.is_launcher("launch_forward") and not manifest.is_launcher("flash_attention")
    assert manifest.kernels_for(gqa) == ("_flash_fwd_kernel",)
    assert manifest.kernels_for(manifest.task("flash_backward")) == ("_flash_bwd_dkdv_kernel", "_flash_bwd_dq_kernel")


@pytest.mark.parametrize("contract, words", [
    ({"module": "flash.py", "file": "flash.py", "launchers": {"launch": ["k"]}}, "not one of the student's files"),
    ({"module": "contract.py", "file": "other.py", "launchers": {"launch": ["k"]}}, "must be one of the student"),
    ({"module": "contract.py", "file": "flash.py", "launchers": {}}, "'launchers' must be a table"),
    ({"module": "contract.py", "file": "flash.py", "launchers": {"launch": "k"}}, "non-empty list of kernel names"),
    ({"module": "contract.py", "file": "flash.py", "launchers": {"unowned": ["k"]}}, "belong to no task"),
    ({"module": "contract.py", "file": "flash.py", "launchers": {"launch": ["k"]}, "extra": 1}, "unknown key"),
])
def test_a_malformed_kernel_contract_is_refused_with_its_reason(contract, words):
    from grader.core.errors import ManifestError
    from grader.core.manifest import parse_manifest

    data = {"id": "a", "files": ["flash.py"], "contract": contract,
            "tasks": [{"id": "kernel", "points": 1, "functions": ["launch"]}]}
    with pytest.raises(ManifestError, match=words):
        parse_manifest(data)


def test_from_scratch_tasks_forbid_numpy():
    course = Course(ROOT)
    for assignment_id in course.assignment_ids():
        manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
        for task in manifest.tasks:
            if task.forbidden:
                assert "numpy" in task.forbidden, (assignment_id, task.id)


@pytest.mark.parametrize("task, words", [
    ({"id": "a", "points": 1, "functions": ["f"], "forbidden": ["softmx"]}, "unknown forbidden group"),
    ({"id": "a", "points": 1, "functions": ["f"], "requires": ["launch"]}, "unknown requirement"),
    ({"id": "a", "points": 1, "requires": ["triton_launch"]}, "'requires' needs the task's functions"),
    ({"id": "a", "points": 1, "uses": ["nobody"]}, "'uses' must name functions of other tasks"),
    ({"id": "a", "points": 1, "functions": ["f"], "uses": ["f"]}, "'uses' must name functions of other tasks"),
])
def test_bad_requires_uses_and_forbidden_are_explained(task, words):
    with pytest.raises(ManifestError) as info:
        parse_manifest({"id": "x", "tasks": [task, {"id": "b", "points": 1, "functions": ["g"]}]})
    assert words in str(info.value)


def test_has_timing_task_is_read_from_the_tasks():
    course = Course(ROOT)
    timed = {aid: load_manifest(course.assignment_dir(aid) / "assignment.toml").has_timing_task
             for aid in ("assignment1", "assignment3")}
    assert timed == {"assignment1": False, "assignment3": True}
