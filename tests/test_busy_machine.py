"""The suite on a busy machine: two cores shared with other work must get the verdicts an idle
machine gets. No test holds a grading to a short wall-clock limit: budgets in tests are generous
(the tiny course's calls get 30 s, its submissions 300 s) or measured on the machine at the time
(tests/conftest.sandbox_start_s), and hang guards are minutes long. A guard below reads every test
file for a short fixed threshold, and a grading under load checks the verdicts themselves."""

from __future__ import annotations

import ast
import multiprocessing
import os
from pathlib import Path

import pytest

from grader.core.compat import tomllib
from grader.core.course import Course
from grader.core.manifest import load_manifest
from tests.conftest import FAULTS, FIXTURES, HANGING_CALL_TIMEOUT_S, ROOT, copy_mini_course, grade_workspace

SHORTEST_WAIT_S = 60  # a test may wait less than this for nothing: a timeout, a join, an elapsed-time bound
SHORTEST_CALL_TIMEOUT_S = 20  # a fixture course's call_timeout_s: a correct call on a busy machine fits
assert HANGING_CALL_TIMEOUT_S >= SHORTEST_CALL_TIMEOUT_S  # the hanging tests' shorter copies too
CLOCK_WORDS = ("elapsed", "waited", "took", "duration")


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # 8 + 6
        left, right = _number(node.left), _number(node.right)
        return None if left is None or right is None else left + right
    return None


def short_thresholds(path: Path) -> list[str]:
    """Fixed wall-clock limits under SHORTEST_WAIT_S in one test file: `timeout=N` arguments and
    comparisons of an elapsed time with a number."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            if callee.endswith("alarm") and node.args and (_number(node.args[0]) or SHORTEST_WAIT_S) < SHORTEST_WAIT_S:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
            for keyword in node.keywords:
                limit = _number(keyword.value) if keyword.arg in ("timeout", "timeout_s") else None
                if limit is not None and limit < SHORTEST_WAIT_S and not callee.endswith("settimeout"):
                    found.append(f"{path.name}:{node.lineno}: {callee}(timeout={limit:g})")
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Lt, ast.LtE)) for op in node.ops):
            names = {n.id.lower() for n in ast.walk(node.left) if isinstance(n, ast.Name)}
            limits = [_number(c) for c in node.comparators]
            if any(word in name for name in names for word in CLOCK_WORDS) and any(
                    limit is not None and limit < 10 * SHORTEST_WAIT_S for limit in limits):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_test_holds_a_grading_to_a_short_fixed_wall_clock_limit():
    files = sorted((ROOT / "tests").glob("*.py"))
    assert len(files) > 40
    found = [problem for path in files for problem in short_thresholds(path)]
    assert found == [], "fixed short waits (scale them by sandbox_start_s, or make them minutes): " + "; ".join(found)


def test_the_guard_sees_a_short_threshold(tmp_path: Path):
    planted = tmp_path / "test_planted.py"
    planted.write_text("import signal, subprocess, time\n\ndef test_x():\n    started = time.monotonic()\n"
                       "    subprocess.run(['true'], timeout=5)\n    elapsed = time.monotonic() - started\n"
                       "    assert elapsed < 8 + 6\n    assert elapsed < budget + 60\n    signal.alarm(20)\n"
                       "    signal.alarm(0)\n")
    assert short_thresholds(planted) == ["test_planted.py:5: subprocess.run(timeout=5)",
                                         "test_planted.py:7: elapsed < 8 + 6", "test_planted.py:9: signal.alarm(20)"]


def test_fixture_courses_give_calls_and_submissions_generous_limits():
    for manifest_path in sorted(FIXTURES.glob("*/assignments/*/assignment.toml")):
        limits = load_manifest(manifest_path).limits
        assert limits.call_timeout_s >= SHORTEST_CALL_TIMEOUT_S, manifest_path
        assert limits.submission_budget_s >= 4 * limits.call_timeout_s, manifest_path
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert settings["timeout"] >= 1200  # a hang detector, never a limit a slow test on a busy machine meets


def _busy() -> None:
    while True:
        pass


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_loaded_machine_gets_the_verdicts_of_an_idle_one(tmp_path: Path):
    """Every core kept busy by two spinning processes, a correct submission, one that kills its
    worker (a restart and a fresh import under load) and a wrong one are graded as on an idle machine."""
    course = tmp_path / "course"
    copy_mini_course(course)
    spinners = [multiprocessing.get_context("spawn").Process(target=_busy, daemon=True)
                for _ in range(2 * (os.cpu_count() or 1))]
    for spinner in spinners:
        spinner.start()
    try:
        totals = {name: grade_workspace(Course(course), "mini", FAULTS / name, student=name.replace("_", "-"))
                  for name in ("wrong_axis", "os_exit")}
        reference = grade_workspace(Course(course), "mini", course / "reference" / "mini", student="ref")
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()
    assert {t.task_id: t.earned for t in reference.score.tasks}.items() >= {"double": 40, "normalize": 40}.items()
    assert not [o for o in reference.outcomes if o.kind in ("timeout", "budget", "crashed")]
    axis = totals["wrong_axis"]
    assert [o.diagnosis["id"] for o in axis.outcomes if o.task == "normalize" and o.status == "failed"] and all(
        o.diagnosis and o.diagnosis["id"] == "normalize_wrong_axis"
        for o in axis.outcomes if o.task == "normalize" and o.status == "failed")
    crashed = totals["os_exit"]
    assert {o.kind for o in crashed.outcomes if o.task == "double"} == {"crashed"}
    tasks = {t.task_id: t for t in crashed.score.tasks}
    assert tasks["normalize"].earned == tasks["normalize"].points  # the restarted worker answered in time
    assert tasks["quiz"].earned == tasks["quiz"].points


@pytest.mark.slow  # starts a subprocess
def test_the_lane_guard_notes_a_subprocess_the_suite_starts_and_not_one_a_library_starts():
    """The guard that keeps the fast lane fast counts what a test's own code starts (a library's processes
    start inside a sandbox worker or a pool, which it counts already)."""
    import subprocess
    import sys

    noted = sys.modules["conftest"]._GRADING_STARTS  # the instance pytest loaded, whose guard runs
    before = len(noted)
    exec(compile("import subprocess\nsubprocess.run(['true'], check=True)\n", "/usr/lib/some_library.py", "exec"))
    assert noted[before:] == []
    subprocess.run(["true"], check=True)
    assert noted[before:] == ["a subprocess"]


def test_the_grader_side_of_a_suite_computes_on_a_workers_threads(tmp_path: Path):
    """While a suite runs, torch in the grader's process computes on WORKER_TORCH_THREADS, as a sandbox
    worker does (idle threads of gradings side by side spin on the same cores: grader.harness.threads);
    the process's own setting is back afterwards."""
    import torch

    from grader.sandbox.limits import WORKER_TORCH_THREADS
    from tests.conftest import hidden_outcomes

    course = copy_mini_course(tmp_path / "course")
    (course / "reference" / "mini" / "tests" / "test_threads.py").write_text(
        "import pytest\nimport torch\n\n\n@pytest.mark.task('double')\ndef test_threads(check):\n"
        f"    assert torch.get_num_threads() == {WORKER_TORCH_THREADS}, torch.get_num_threads()\n")
    own = WORKER_TORCH_THREADS + 2  # a setting of the process's own, not the grader's
    before = torch.get_num_threads()
    torch.set_num_threads(own)
    try:
        outcomes = hidden_outcomes(course, "mini", "double", course / "reference" / "mini", seed=1)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    threads = next(o for o in outcomes if o.name.endswith("test_threads"))
    assert threads.status == "passed", threads.message
    assert after == own
