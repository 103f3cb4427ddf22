"""What the three assignment content test files share.

* `run_suite`: one pass of a hidden or public suite on a workspace with
  `pytest.main`, in this process, recording every test's task, outcome, phase,
  message and diagnosis (`Collector`);
* `mutant_workspace` / `run_mutants`: a mutant run as a submission, its workspace
  built by `grade validate`'s own `reference_workspace` (the reference with the
  mutant's source appended to the module that defines its function);
* `child_main` / `run_children`: the suites of a content file run in child
  processes (`python tests/test_<id>_content.py GROUP OUT.json`, side by side),
  which call pytest.main once per workspace (torch is imported once per process,
  not once per run) and hand back what they saw as JSON;
* `reference_problems`, `stub_problems`, `mutant_problems`: what a run must show
  (the reference passes, the stubs fail in the test body, a mutant fails only its
  own task and is named there), as a list of problems that a test asserts empty.

A run is a dict: {"exit_code", "seed", "tests": {nodeid: {"task", "outcome",
"when", "text", "diagnosis"}}}, outcome one of passed, failed, skipped, not run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from grader.harness.catalogue import Mutant

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `reference` is a top-level package of the course root
    sys.path.insert(0, str(ROOT))

# Plugins a suite run does not need: without them one pass of a suite is much faster.
_QUIET = [arg for name in (
    "cacheprovider", "unraisableexception", "threadexception", "logging", "warnings", "doctest",
    "junitxml", "pastebin", "stepwise", "legacypath", "faulthandler", "tmpdir", "monkeypatch",
    "recwarn", "setuponly", "setupplan", "debugging", "hypothesispytest") for arg in ("-p", f"no:{name}")]


class Collector:
    """A pytest plugin object: per test, its task, outcome, phase, message and diagnosis."""

    def __init__(self) -> None:
        self.tasks: dict[str, str | None] = {}
        self.results: dict[str, dict] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            markers = list(item.iter_markers("task"))
            self.tasks[item.nodeid] = markers[0].args[0] if len(markers) == 1 else None

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.tasks.pop(item.nodeid, None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.results.setdefault(report.nodeid, {"outcome": "passed", "when": "call"})
        if report.skipped and entry["outcome"] == "passed":
            entry.update(outcome="skipped", when=report.when, text=str(report.longrepr)[-300:])
        if report.failed and entry["outcome"] in ("passed", "skipped"):
            entry.update(outcome="failed", when=report.when, text=report.longreprtext[-800:])
        for key, value in report.user_properties:
            if key == "grade":
                entry["diagnosis"] = (value.get("diagnosis") or {}).get("id")


def run_suite(paths: Sequence[Path], workspace: Path, seed: int, select: str | None = None) -> dict:
    """One pass of the tests at `paths` on `workspace`, in this process (see the module docstring)."""
    collector = Collector()
    args = [*map(str, paths), "-q", "-s", "--tb=line", "--no-header", "--import-mode=importlib",
            "--assert=plain",  # the tests judge through `check`; no assertion rewriting needed
            *_QUIET, f"--grade-seed={seed}", "--grade-workspace", str(workspace)]
    if select:
        args += ["-k", select]
    code = pytest.main(args, plugins=[collector])
    for nodeid, task in collector.tasks.items():
        collector.results.setdefault(nodeid, {"outcome": "not run", "when": ""})["task"] = task
    return {"exit_code": int(code), "seed": seed,
            "tests": {n: t for n, t in collector.results.items() if n in collector.tasks}}


def load_file(path: Path, name: str) -> ModuleType:
    """Import the Python file at `path` as a module called `name` (stubs, scripts), outside sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def failing(run: dict) -> dict[str, dict]:
    """The tests of a run that neither passed nor were skipped."""
    return {n: t for n, t in run["tests"].items() if t["outcome"] not in ("passed", "skipped")}


# --------------------------------------------------------------------- mutants


def mutant_workspace(folder: Path, assignment_id: str, mutant: Mutant) -> Path:
    """`folder` as `grade validate` builds it for `mutant`: the reference with the mutant swapped in."""
    from grader.authoring.validate import reference_workspace
    from grader.core.assignment import Assignment
    from grader.core.course import Course

    return reference_workspace(Assignment.load(Course(ROOT), assignment_id), folder, mutant)


def run_mutants(assignment_id: str, mutants: Iterable[Mutant], tests: Callable[[Mutant], Sequence[Path]],
                seed: Callable[[], int]) -> dict[str, dict]:
    """{mutant id: the run of `tests(mutant)` on its workspace}, each workspace in a temporary folder."""
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in mutants:
            folder = mutant_workspace(Path(tmp) / m.id, assignment_id, m)
            runs[m.id] = run_suite(tests(m), folder, seed())
    return runs


# -------------------------------------------------------------- child processes


def child_main(build: Callable[[str], dict]) -> None:
    """In a child (`python FILE GROUP OUT.json`): write `build(GROUP)`'s runs to OUT.json."""
    group, out = sys.argv[1], Path(sys.argv[2])
    with contextlib.redirect_stdout(io.StringIO()):
        runs = build(group)
    out.write_text(json.dumps(runs, indent=1), encoding="utf-8")


def run_children(script: Path, groups: Sequence[str], folder: Path, *, env: dict[str, str] | None = None,
                 timeout_s: float = 900) -> dict:
    """Run `script GROUP OUT.json` for every group side by side; their runs merged ("mutants" by id)."""
    children = {}
    for group in groups:
        with open(folder / f"{group}.log", "w") as log:
            children[group] = subprocess.Popen([sys.executable, str(script), group, str(folder / f"{group}.json")],
                                               cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log,
                                               stderr=subprocess.STDOUT)
    merged: dict = {"mutants": {}}
    for group, child in children.items():
        child.wait(timeout=timeout_s)
        out = folder / f"{group}.json"
        log = (folder / f"{group}.log").read_text(encoding="utf-8", errors="replace")
        assert child.returncode == 0 and out.is_file(), log[-3000:]
        data = json.loads(out.read_text(encoding="utf-8"))
        merged["mutants"].update(data.pop("mutants", {}))
        merged.update(data)
    return merged


# ----------------------------------------------------------- what a run must show


def _pending(test: dict, pending_tasks: Iterable[str], pending_text: str) -> bool:
    return test["outcome"] == "skipped" and test["task"] in pending_tasks and pending_text in test.get("text", "")


def reference_problems(run: dict, pending_tasks: Iterable[str] = (), pending_text: str = "pending") -> list[str]:
    """The reference passes every test but those of `pending_tasks`, which are pending (skipped, saying
    `pending_text`), and pytest exits 0."""
    pending_tasks = set(pending_tasks)
    if not run["tests"]:
        return ["no tests were collected"]
    problems = [f"{n}: {t['outcome']} {t.get('text', '')}" for n, t in run["tests"].items()
                if t["outcome"] != "passed" and not _pending(t, pending_tasks, pending_text)]
    if run["exit_code"] != 0:
        problems.append(f"pytest exit code {run['exit_code']}")
    return [f"seed {run['seed']}: {p}" for p in problems]


STUB_WORDS = ("not implemented yet", "If the kernel's loop is still empty, write it",
              "is not written yet: it stored nothing")


def stub_problems(run: dict, pending_tasks: Iterable[str] = ()) -> list[str]:
    """Every test fails on the stubs in the test body, saying "not implemented yet" (a stub kernel,
    launched by the grader, writes zeros and is told its loop is empty); the tests of
    `pending_tasks` are skipped (not judged here)."""
    pending_tasks = set(pending_tasks)
    if not run["tests"]:
        return ["no tests were collected"]
    problems = []
    for nodeid, t in run["tests"].items():
        if t["task"] in pending_tasks:
            if t["outcome"] != "skipped":
                problems.append(f"{nodeid}: {t['outcome']}, not skipped")
        elif t["outcome"] != "failed" or t["when"] != "call" or not any(w in t.get("text", "") for w in STUB_WORDS):
            problems.append(f"{nodeid}: {t}")
    return problems


def mutant_problems(run: dict, mutant_id: str, own_task: str, *, also: Iterable[str] = (),
                    pending_tasks: Iterable[str] = (), not_named_as: Iterable[str] = ()) -> list[str]:
    """A mutant fails some test; only tests of `own_task` (or of the tasks in `also`, whose tests call
    its function too); always in the test body; a failing `own_task` test names it; no test names one
    of `not_named_as`; nothing is skipped but tests of `pending_tasks`; and pytest ran to the end."""
    seed = run["seed"]
    failed = failing(run)
    if not failed:
        return [f"{mutant_id} passes every hidden test (seed {seed})"]
    problems = [] if run["exit_code"] == pytest.ExitCode.TESTS_FAILED else [
        f"{mutant_id}: pytest exit code {run['exit_code']} (seed {seed})"]
    allowed = {own_task, *also}
    elsewhere = sorted(n for n, t in failed.items() if t["task"] not in allowed)
    if elsewhere:
        problems.append(f"{mutant_id} fails tests of other tasks (seed {seed}): {elsewhere}")
    outside = sorted(f"{n} ({t['when'] or t['outcome']})" for n, t in failed.items() if t["when"] != "call")
    if outside:
        problems.append(f"{mutant_id} fails outside the test body (seed {seed}): {outside}")
    if not any(t["task"] == own_task and t.get("diagnosis") == mutant_id for t in failed.values()):
        problems.append(f"no failing {own_task} test names {mutant_id} (seed {seed}): {failed}")
    confused = sorted({t.get("diagnosis") for t in failed.values()} & set(not_named_as))
    if confused:
        problems.append(f"{mutant_id} was diagnosed as {confused} (seed {seed})")
    skipped = sorted(n for n, t in run["tests"].items() if t["outcome"] == "skipped" and t["task"] not in
                     set(pending_tasks))
    if skipped:
        problems.append(f"{mutant_id}: tests skipped (seed {seed}): {skipped}")
    return problems
