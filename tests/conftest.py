"""Shared fixtures of the grader's own test suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.sandbox.limits import WORKER_TORCH_THREADS

# Triton reads TRITON_INTERPRET when triton.language is first imported (its own helpers are
# kernels too): without a GPU, every kernel this process defines must be an interpreted one,
# whichever test imports Triton first.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The suite's processes run side by side, as a grading pool's do, so each computes on a sandbox
# worker's threads (grader.harness.threads): the test processes, and every process they start
# (set before pytest-xdist starts its workers, which read it as torch loads).
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(WORKER_TORCH_THREADS)
torch.set_num_threads(WORKER_TORCH_THREADS)  # this process loaded torch before reading this file

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MINI_COURSE = FIXTURES / "mini_course"
FAULTS = FIXTURES / "faults"


def copy_mini_course(target: Path) -> Path:
    """A private copy of the tiny course at `target` (caches and grader state left out): the one way a
    test gets a course it may change. `target` must not exist yet."""
    shutil.copytree(MINI_COURSE, target, ignore=shutil.ignore_patterns("__pycache__", ".grade"))
    return target


# The per-call timeout of a mini course copy whose test hangs by design: the shortest a fixture course
# may have (tests/test_busy_machine.py: a correct call on a busy machine still fits).
HANGING_CALL_TIMEOUT_S = 20


def shorten_call_timeout(course_root: Path, seconds: int = HANGING_CALL_TIMEOUT_S) -> None:
    """Set a mini course copy's per-call timeout to `seconds` (from its generous 30 s), for a test whose
    call hangs by design: the defence is the same, and the suite waits less for it."""
    manifest = course_root / "assignments" / "mini" / "assignment.toml"
    text = manifest.read_text()
    assert text.count("\ncall_timeout_s = 30\n") == 1
    manifest.write_text(text.replace("\ncall_timeout_s = 30\n", f"\ncall_timeout_s = {seconds}\n"))


COURSE_PARTS = ("assignments", "reference", "course_kernels", "lecture", "course.toml")


def copy_course(target: Path, parts: tuple[str, ...] = COURSE_PARTS) -> Path:
    """A private copy of `parts` of the real course at `target` (caches and grader state left out): the
    one way a test gets the real course to change or grade in. A part is a folder or file of the course
    root, or one assignment's folder ("reference/assignment1": the reference package's __init__.py
    comes with it)."""
    for part in parts:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, target / part, ignore=shutil.ignore_patterns("__pycache__", ".grade"))
        elif source.is_file():
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / part)
        if part.startswith("reference/"):
            shutil.copyfile(ROOT / "reference" / "__init__.py", target / "reference" / "__init__.py")
    return target


# The lanes (README): the fast lane deselects these marks. A test that grades in a real
# sandbox worker, or hands jobs to a grading pool, must say so with `sandbox` (or `ray`), and one
# whose own code starts a subprocess (a command, pip, a browser) with `slow` (or `browser`); the
# guard below fails an unmarked one, so the fast lane never grades or waits on a process behind its
# own back. A start inside a shared (module or session) fixture counts for the test whose setup
# built it. The fast lane prints its slowest tests (FAST_LANE_DURATIONS), so the next slow one shows.
FAST_LANE = "not sandbox and not browser and not slow and not ray"
FAST_LANE_DURATIONS = 15
_GRADING_STARTS: list[str] = []  # what this process started, in order
_STARTS_BEFORE = pytest.StashKey[int]()
_TESTS = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    """The fast lane (`-m` FAST_LANE) lists its slowest tests unless --durations says otherwise."""
    if config.getoption("markexpr", "") == FAST_LANE and not config.getoption("durations", None):
        config.option.durations = FAST_LANE_DURATIONS


def _started_by_a_test() -> bool:
    """Whether the code starting a process now is the suite's own (a test or one of its helpers), not
    the grader's or a library's (those start their processes inside what the guard already counts)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == subprocess.__file__:
        frame = frame.f_back
    return frame is not None and Path(frame.f_code.co_filename).resolve().is_relative_to(_TESTS)


@pytest.fixture(scope="session", autouse=True)
def _note_grading_starts():
    """Note every sandbox worker, grading pool and test-started subprocess of this process, for the guard."""
    from grader.pipeline.local_pool import LocalProcessExecutor
    from grader.sandbox.client import Sandbox

    def noting(what: str, real, when=lambda: True):
        def wrapper(self, *args, **kwargs):
            if when():
                _GRADING_STARTS.append(what)
            return real(self, *args, **kwargs)
        return wrapper

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Sandbox, "start", noting("a sandbox worker", Sandbox.start))
        patch.setattr(LocalProcessExecutor, "submit", noting("a grading pool", LocalProcessExecutor.submit))
        patch.setattr(subprocess.Popen, "__init__", noting("a subprocess", subprocess.Popen.__init__,
                                                           _started_by_a_test))
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_STARTS_BEFORE] = len(_GRADING_STARTS)


@pytest.fixture(autouse=True)
def _grading_is_marked(request):
    """Fail a test that starts a sandbox worker or a grading pool in this process, in its body or
    in a fixture its setup built, without the `sandbox` mark (or `ray`, for Ray's executor)."""
    yield
    if any(request.node.get_closest_marker(mark) for mark in ("sandbox", "ray")):
        return
    started = _GRADING_STARTS[request.node.stash.get(_STARTS_BEFORE, len(_GRADING_STARTS)):]
    if started and started[0] == "a subprocess" and set(started) == {"a subprocess"}:
        if not any(request.node.get_closest_marker(mark) for mark in ("slow", "browser")):
            pytest.fail(f"this test starts a subprocess but is not marked slow: mark it (@pytest.mark.slow, or "
                        f"browser for Chromium), so that the fast lane ({FAST_LANE!r}) stays fast", pytrace=False)
    elif started:
        pytest.fail(f"this test starts {next(s for s in started if s != 'a subprocess')} but is not marked sandbox: "
                    f"mark it (@pytest.mark.sandbox), so that the fast lane ({FAST_LANE!r}) stays fast", pytrace=False)


@pytest.fixture
def mini_course(tmp_path: Path) -> Path:
    """A private copy of the tiny course (so gradebooks and reports stay in tmp)."""
    return copy_mini_course(tmp_path / "course")


@pytest.fixture(scope="session")
def course_root() -> Path:
    return ROOT


# The sandbox levels every attack runs at, with the layers each needs here.
STACKS = {"bubblewrap": {"bubblewrap", "landlock", "seccomp", "reaper"},
          "process": {"process", "uid", "landlock", "seccomp", "reaper"}}


@pytest.fixture(params=sorted(STACKS))
def level(request, monkeypatch) -> str:
    """Each sandbox level in turn: bubblewrap, and the no-namespace stack (GRADE_NO_BWRAP=1);
    a level that lacks one of its layers here is skipped with the reason."""
    from grader.pipeline.policy import host_isolation
    from grader.sandbox.isolation import bwrap_works
    from grader.sandbox.uids import DEFAULT_UID_RANGE

    if request.param == "bubblewrap":
        monkeypatch.delenv("GRADE_NO_BWRAP", raising=False)
        if not bwrap_works():
            pytest.skip("bubblewrap cannot create namespaces here")
    else:
        monkeypatch.setenv("GRADE_NO_BWRAP", "1")
    isolation = host_isolation(DEFAULT_UID_RANGE)
    lacking = STACKS[request.param] - set(isolation.layers)
    if request.param == "bubblewrap" and os.geteuid() == 0:
        lacking |= {"uid"} - set(isolation.layers)
    if lacking:
        reasons = "; ".join(f"{name}: {isolation.missing.get(name, 'missing')}" for name in sorted(lacking))
        pytest.skip(f"the {request.param} level lacks {reasons}")
    return request.param


def grade_workspace(course, assignment_id: str, workspace, *, student: str | None = None, submitted_at=None,
                    **request):
    """One grading through the real pipeline, as `grade submit` grades (nothing recorded): the
    assignment built once, the submission opened, graded as `request` says (GradeRequest's fields)."""
    from grader.core.assignment import Assignment
    from grader.pipeline.grading import GradeRequest, grade, open_submission

    assignment = Assignment.load(course, assignment_id)
    submission = open_submission(assignment, workspace, student=student, submitted_at=submitted_at)
    return grade(assignment, submission, GradeRequest(**request))


def assignment_of(course, assignment_id: str):
    """The Assignment of `course` (a Course, or a course root) named `assignment_id`, as a command builds it."""
    from grader.core.assignment import Assignment
    from grader.core.course import Course

    return Assignment.load(course if isinstance(course, Course) else Course(Path(course)), assignment_id)


def hidden_outcomes(course, assignment_id: str, task: str, workspace, seed: int):
    """The hidden tests of `task` on `workspace` through the grader's own suite and check, in this
    process (no sandbox, the catalogue loaded as grading loads it): their TestOutcomes. A suite error
    fails the calling test."""
    from grader.harness.reference import course_imports, load_reference
    from grader.harness.runners import InProcessRunner
    from grader.harness.suite import run_suite
    from grader.harness.testing import GradingContext

    assignment = assignment_of(course, assignment_id)
    with course_imports(assignment.course.root):
        reference, mutants = load_reference(assignment)
        context = GradingContext(runner=InProcessRunner(Path(workspace), assignment.manifest.files),
                                 manifest=assignment.manifest, reference=reference, mutants=mutants, seed=seed,
                                 hidden=True)
        outcomes, errors = run_suite(assignment.hidden_tests, context, only_task=task)
    assert not errors
    return outcomes


def write_report(result, path, templates_dir) -> Path:
    """The student's HTML report at `path`, through the sink `grade submit` uses."""
    from grader.pipeline.record import HtmlReport

    HtmlReport(Path(path), Path(templates_dir)).deliver(result, None)
    return Path(path)


def write_results(result, path, manifest=None) -> Path:
    """Gradescope's results.json at `path`, through the sink `grade submit --json` uses."""
    from grader.pipeline.record import ResultsJson

    ResultsJson(Path(path), manifest).deliver(result, None)
    return Path(path)


def sandbox_start_s(level: str | None = None) -> float:
    """How long a sandbox worker takes, on this machine and now, to start and answer its first call
    (seconds). Tests that must give a grading a short budget scale it by this, so that a busy machine
    gets the same verdict as an idle one: no test holds a grading to a fixed short wall-clock limit."""
    import time

    from grader.sandbox.client import Sandbox
    from grader.sandbox.limits import SandboxLimits

    started = time.monotonic()
    with Sandbox({"pace.py": b"import torch\n\ndef one():\n    return torch.ones(1)\n"}, ["pace.py"],
                 isolation_level=level, use_gpu=False,
                 limits=SandboxLimits(call_timeout_s=600, submission_budget_s=600)) as box:
        result = box.call("one")
    assert result.status == "ok", result.detail
    return time.monotonic() - started
