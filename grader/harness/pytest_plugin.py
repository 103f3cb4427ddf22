"""The pytest side of the grader (registered as the `grade` pytest11 plugin).

It gives every test a `check` fixture (see grader.harness.testing). Under `grade
check`/`grade submit` the engine puts a sandboxed GradingContext in the
config; under plain `pytest` the context is built here, importing the
workspace next to the tests (the stubs, a student's work, or the reference
when run from reference/<id>/tests), so the same tests run both ways.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from grader.core.assignment import Assignment
from grader.core.course import Course, owner_of_tests
from grader.core.manifest import Manifest
from grader.harness.reference import load_dependencies, load_reference, stub_sources
from grader.harness.testing import Check, GradingContext, Pending

CONTEXT_KEY = pytest.StashKey[GradingContext]()
CHECK_KEY = pytest.StashKey[Check]()
SEED_ENV = "GRADE_SEED"
WORKSPACE_ENV = "GRADE_WORKSPACE"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grade", "attention course grader")
    group.addoption("--grade-workspace", default=None,
                    help="folder with the files to test (default: the assignment next to the tests)")
    group.addoption("--grade-seed", type=int, default=None, help="seed for the test inputs")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(id): the assignment task this test belongs to")


def task_of(item: pytest.Item, manifest: Manifest | None) -> tuple[str | None, str]:
    """(the task a test belongs to, "") or (None, why it cannot be graded).

    A test needs exactly one task: one `@pytest.mark.task("<id>")` (on the function, its
    class or the module's `pytestmark`) naming a task of the manifest."""
    named = [m.args[0] if m.args and isinstance(m.args[0], str) and len(m.args) == 1 else None
             for m in item.iter_markers("task")]
    if not named:
        return None, 'has no @pytest.mark.task("<id>") marker, so it belongs to no task and cannot be graded'
    if None in named:
        return None, 'has a task marker without exactly one task id: write @pytest.mark.task("<id>")'
    if len(set(named)) > 1:
        return None, f"is marked with more than one task ({', '.join(sorted(set(named)))}); a test counts for one"
    task = named[0]
    if manifest is not None and not manifest.has_task(task):
        known = ", ".join(t.id for t in manifest.tasks)
        return None, f"is marked with task {task!r}, which {manifest.id} does not have (tasks: {known})"
    return task, ""


_MANIFESTS = pytest.StashKey[dict]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under plain pytest, a test of an assignment's suite that grading would not run (no task marker, or a
    task the manifest does not have) fails at setup with the same reason, instead of passing unseen."""
    if item.config.stash.get(CONTEXT_KEY, None) is not None:
        return  # grading: the suite's collector already left such tests out, and named them
    cache = item.config.stash.setdefault(_MANIFESTS, {})
    folder = item.path.parent
    if folder not in cache:
        found = owner_of_tests(item.path)
        cache[folder] = Assignment.load(found[0], found[1]).manifest if found else None
    manifest = cache[folder]
    if manifest is None:
        return
    _, problem = task_of(item, manifest)
    if problem:
        pytest.fail(f"{item.nodeid} {problem}: grading would not run it (grade validate names it too)",
                    pytrace=False)


def _assignment_of(path: Path) -> tuple[Course, str, bool] | None:
    """(course, assignment id, hidden?) for a test file in assignments/ or reference/, or in an
    unzipped student bundle (grader.core.course.owner_of_tests)."""
    return owner_of_tests(path)


def _seed(config: pytest.Config) -> int:
    seed = config.getoption("--grade-seed")
    if seed is None and os.environ.get(SEED_ENV):
        seed = int(os.environ[SEED_ENV])
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
        config.option.grade_seed = seed
    return seed


def _in_process_context(request: pytest.FixtureRequest) -> GradingContext:
    import torch

    from grader.harness.runners import InProcessRunner

    cache_key = f"_grade_ctx_{request.node.path.parent}"
    cached = getattr(request.config, cache_key, None)
    if cached is not None:
        return cached
    found = _assignment_of(request.node.path)
    if found is None:
        raise pytest.UsageError(f"{request.node.path} is not inside assignments/<id>/ or "
                                f"reference/<id>/ of a course, nor in an unzipped assignment bundle")
    course, assignment_id, hidden = found
    assignment = Assignment.load(course, assignment_id)  # plain pytest is this process's edge
    manifest = assignment.manifest
    explicit = request.config.getoption("--grade-workspace") or os.environ.get(WORKSPACE_ENV)
    default = assignment.reference if hidden else assignment.folder
    workspace = Path(explicit) if explicit else default
    reference, mutants = load_reference(assignment)
    context = GradingContext(
        runner=InProcessRunner(workspace, manifest.files, manifest.contract, assignment.contract_module),
        manifest=manifest,
        reference=reference, mutants=mutants, compositions=load_dependencies(assignment),
        stub_sources=stub_sources(assignment) if hidden else {}, seed=_seed(request.config),
        device="cuda" if torch.cuda.is_available() else "cpu", hidden=hidden)
    setattr(request.config, cache_key, context)
    return context


@pytest.fixture
def check(request: pytest.FixtureRequest) -> Check:
    """Calls the student's functions and judges them (see grader.harness.testing.Check)."""
    context = request.config.stash.get(CONTEXT_KEY, None) or _in_process_context(request)
    marker = request.node.get_closest_marker("task")
    task_id = marker.args[0] if marker and marker.args else None
    helper = Check(context, request.node.nodeid, task_id)
    request.node.stash[CHECK_KEY] = helper
    return helper


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--grade-seed", default=None) or os.environ.get(SEED_ENV)
    return f"grade: input seed {seed}" if seed else None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """The seed the `check` inputs came from, also when this run chose it (plain pytest)."""
    seed = config.getoption("--grade-seed", default=None)
    if seed is not None:
        terminalreporter.write_line(f"grade: input seed {seed} (the same inputs again: --grade-seed {seed})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(Pending):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1], f"pending: {call.excinfo.value}")
    helper = item.stash.get(CHECK_KEY, None)
    if helper is not None and report.when == "call":
        report.user_properties.append(("grade", dict(helper.record)))
