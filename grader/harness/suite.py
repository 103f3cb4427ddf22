"""Run a pytest suite in the trusted process and collect TestOutcomes.

The suite's tests call student code only through the `check` fixture, whose
runner is the sandbox. Failure text is built from the exception message the
test raised, never from pytest's traceback, so hidden test source and inputs
never reach a student.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from grader.core.errors import GraderError
from grader.core.manifest import Manifest
from grader.core.records import FAILED, PASSED, PENDING, TestOutcome
from grader.harness.pytest_plugin import CONTEXT_KEY, task_of
from grader.harness.testing import GradingContext, Pending, StudentProblem
from grader.harness.threads import torch_threads


def _outcome_name(nodeid: str) -> str:
    """`file stem::test`: unique across files (two files may both have a test_float64)."""
    path, _, test = nodeid.partition("::")
    return f"{Path(path).stem}::{test}"


class _Collector:
    """A pytest plugin object: installs the context, maps tests to tasks, records results."""

    def __init__(self, context: GradingContext, visibility: str, only_task: str | None,
                 order: Sequence[str] | None = None):
        self.context = context
        self.visibility = visibility
        self.only_task = only_task
        self.order = {name: i for i, name in enumerate(order or ())}
        self.tasks: dict[str, str | None] = {}
        self.outcomes: list[TestOutcome] = []
        self.collection_errors: list[str] = []
        self._failures: dict[str, tuple[str, str]] = {}
        self._recorded_failures: set[str] = set()

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[CONTEXT_KEY] = self.context
        # A failure's verdict and message come from the check (self._failures), never from
        # pytest's report: without this pytest formats every failing test's traceback with its
        # source (about 0.1 s each, most of `grade validate` and of grading a wrong submission).
        config.option.tbstyle = "no"

    def pytest_collection_modifyitems(self, config, items: list[pytest.Item]) -> None:
        keep = []
        for item in items:
            task, problem = task_of(item, self.context.manifest)
            if problem:  # a test that names no task (or an unknown one) cannot earn or lose points
                self.collection_errors.append(f"{_outcome_name(item.nodeid)}: {problem}")
                continue
            self.tasks[item.nodeid] = task
            if self.only_task is None or task == self.only_task:
                keep.append(item)
        if self.order:  # the names listed first, in that order; the rest after, as collected
            keep.sort(key=lambda item: self.order.get(_outcome_name(item.nodeid), len(self.order)))
        items[:] = keep

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid}: could not be collected (the file "
                                          f"raised while it was imported)")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        yield
        if call.excinfo is None or call.when == "teardown" and item.nodeid in self._failures:
            return
        exc = call.excinfo.value
        if isinstance(exc, Pending):
            return
        if isinstance(exc, StudentProblem):
            self._failures[item.nodeid] = (exc.kind, str(exc))
        elif isinstance(exc, AssertionError):
            self._failures[item.nodeid] = ("wrong", str(exc) or "the result is not what the "
                                                               "task asks for")
        elif isinstance(exc, pytest.skip.Exception):
            return
        else:
            self._failures[item.nodeid] = (
                "test_error", f"the test could not use your result: {type(exc).__name__}: "
                              f"{str(exc)[:300]} (check the return type and shape)")

    def pytest_runtest_logreport(self, report) -> None:
        record = dict(next((v for k, v in report.user_properties if k == "grade"), {}))
        name = _outcome_name(report.nodeid)
        task = self.tasks.get(report.nodeid)
        base = dict(name=name, task=task, visibility=self.visibility,
                    diagnosis=record.get("diagnosis"), measured=record.get("measured", ""),
                    heatmap=record.get("heatmap"), output=record.get("output", ""),
                    problem=record.get("problem"),
                    detail={k: v for k, v in record.items() if k in ("timing", "detail", "behaviour")})
        if report.when == "call" and report.passed:
            fraction = record.get("fraction", 1.0)
            self.outcomes.append(TestOutcome(status=PASSED, fraction=fraction,
                                             duration_s=report.duration, **base))
        elif report.skipped and report.when in ("setup", "call"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ").removeprefix("pending: ")
            self.outcomes.append(TestOutcome(status=PENDING, kind="not_run", message=reason, **base))
        elif report.failed and report.nodeid not in self._recorded_failures:
            self._recorded_failures.add(report.nodeid)
            kind, message = self._failures.get(
                report.nodeid, ("test_error", f"the test failed during {report.when}"))
            self.outcomes.append(TestOutcome(status=FAILED, kind=kind, message=message,
                                             duration_s=report.duration, **base))


def _forget_modules(tests_dir: Path) -> None:
    """Drop the test modules a run imported. importlib mode names a module by its file name
    alone here (`test_public`), so a later run in this process, of another assignment's
    suite, would otherwise be handed this one's module."""
    roots = tuple({str(tests_dir.absolute()) + os.sep, str(tests_dir.resolve()) + os.sep})
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and where.startswith(roots):
            del sys.modules[name]


PLUGIN = "grader.harness.pytest_plugin"  # the `check` fixture and the task marker


def _run_pytest(tests_dir: Path, collector: _Collector, *extra: str) -> None:
    # no:unraisableexception: its cleanup runs gc.collect() five times, ~0.3 s each in a
    # process holding torch and the reference; grading never needs its warnings.
    # --disable-plugin-autoload: only the grader's own plugin, never the pytest plugins installed
    # here (importing them cost about 1 s, often 4, of a lone grading's start).
    args = [str(tests_dir), "--disable-plugin-autoload", "-p", PLUGIN,
            "-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:unraisableexception",
            "--import-mode=importlib", "--noconftest", "-o", "addopts=",
            "--rootdir", str(tests_dir), "-W", "ignore::DeprecationWarning", *extra]
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = pytest.main(args, plugins=[collector])
    finally:
        _forget_modules(tests_dir)
    if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        raise GraderError(f"the test suite {tests_dir} could not run: {sink.getvalue()[-500:]}")


def run_suite(tests_dir: Path, context: GradingContext, *, visibility: str = "hidden",
              only_task: str | None = None, order: Sequence[str] | None = None) -> tuple[list[TestOutcome], list[str]]:
    """Outcomes of every test under `tests_dir`, and any collection errors (a file that does
    not import, a test that names no task of the manifest: such a test is not run).

    `order`: outcome names (`file stem::test[params]`) to run first, in that order (the others
    follow as collected); grades must not depend on it, and tests prove that they do not."""
    collector = _Collector(context, visibility, only_task, order)
    with torch_threads():  # the grader's side computes as a worker does (grader.harness.threads)
        _run_pytest(tests_dir, collector)
    return collector.outcomes, collector.collection_errors


def collected_names(tests_dir: Path, only_task: str | None = None) -> list[str]:
    """The outcome names of the tests under `tests_dir` (of `only_task` alone, if given), in the order
    they would run; nothing is run."""
    return [name for name, task in collected_tasks(tests_dir, None)[0].items()
            if only_task is None or task == only_task]


def collected_tasks(tests_dir: Path, manifest: Manifest | None) -> tuple[dict[str, str], list[str]]:
    """Each test under `tests_dir` (by its outcome name) → its task, and why any test could not be graded,
    found by collecting them (none runs): what run_suite would report as collection errors, or that
    there are no tests at all."""
    collector = _Collector(GradingContext(runner=None, manifest=manifest, reference={}), "hidden", None)
    if not tests_dir.is_dir():
        return {}, [f"{tests_dir}: no such folder (the tests live there)"]
    _run_pytest(tests_dir, collector, "--collect-only")
    if not collector.tasks and not collector.collection_errors:
        return {}, [f"{tests_dir}: no tests were collected"]
    return ({_outcome_name(nodeid): task for nodeid, task in collector.tasks.items()},
            collector.collection_errors)
