"""Ctrl-C and SIGTERM stop a command within seconds and leave no process behind, nor any folder of its
sandbox templates (a grading pool's workers end with os._exit, which skips atexit: each must close its
templates itself).

Each command runs as a real process under a child subreaper (tests/process_tree.py), so every
process it starts, a grading pool's forkserver and workers and their sandboxes included, stays in
a tree /proc can show, whatever dies first. Once the command is grading in a sandbox, the signal
goes to its process group (as a terminal's Ctrl-C does) or to it alone (as `kill` and `timeout` do);
then it must exit with the signal's code and one line, and nothing of its tree may remain. The
bounds are generous (a busy machine is slow); what is checked is that nothing is left, not how fast.
"""

from __future__ import annotations

import shutil
import signal
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from class_builder import build_class
from process_tree import TreeRun, environment, grade_command, open_temp, sandbox_folders, stop_and_check

from tests.conftest import copy_mini_course


@pytest.fixture
def course(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


@pytest.fixture
def temp() -> Iterator[Path]:
    """The command's TMPDIR, checked for sandbox folders left behind."""
    folder = open_temp()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("signum, group", [(signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c to the process group", "sigterm to the command"])
def test_validate_stops_and_leaves_no_process(course: Path, tmp_path: Path, temp: Path, signum: int, group: bool):
    tree = TreeRun(grade_command(course, "validate", "mini", "--jobs", "2"), env=environment(temp), cwd=str(tmp_path),
                   folder=str(tmp_path))
    try:
        said = stop_and_check(tree, signum, group=group)
    finally:
        tree.close()
    name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM"
    assert said.strip().splitlines()[-1] == (f"Error: stopped by {name}: nothing more was graded; what was "
                                             f"recorded before stays recorded (run the command again to continue)")
    assert "Traceback" not in said


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("signum, group", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["sigterm to the command", "ctrl-c to the process group"])
def test_batch_stops_keeps_what_it_recorded_and_leaves_no_process(tmp_path: Path, temp: Path, signum: int,
                                                                  group: bool):
    from class_builder import STUDENTS

    course, submissions = build_class(tmp_path, STUDENTS[:6])
    gradebook = tmp_path / "gb.sqlite"
    tree = TreeRun(grade_command(course, "batch", "mini", str(submissions), "--jobs", "2", "--gradebook",
                                 str(gradebook), "--allow-weak-sandbox"), env=environment(temp), cwd=str(tmp_path),
                   folder=str(tmp_path))
    try:
        said = stop_and_check(tree, signum, group=group)
    finally:
        tree.close()
    assert "stopped by" in said and "Traceback" not in said
    from grader.storage.gradebook import Gradebook

    with Gradebook(gradebook) as book:  # whatever was recorded is whole; a rerun grades the rest
        assert len(book.latest("mini")) < 6 and book.count("batch_errors") == 0


def test_a_signal_while_the_pool_module_is_still_imported_stops_the_command_cleanly(monkeypatch: pytest.MonkeyPatch):
    """A command stopped while it imports grader.pipeline.local_pool (the module is in sys.modules, half
    made) raises Stopped, not an AttributeError from the signal handler (it printed a traceback)."""
    from grader.cli.main import Stopped, _stop

    half_made = types.ModuleType("grader.pipeline.local_pool")  # what an import cut short leaves there
    monkeypatch.setitem(sys.modules, "grader.pipeline.local_pool", half_made)
    monkeypatch.setattr(_stop, "requested", False)
    with pytest.raises(Stopped) as stopped:
        _stop(signal.SIGTERM, None)
    assert stopped.value.signum == signal.SIGTERM


@pytest.mark.sandbox
@pytest.mark.slow
def test_submit_stops_on_sigterm_and_closes_its_sandbox(course: Path, tmp_path: Path, temp: Path):
    tree = TreeRun(grade_command(course, "submit", "mini", "--workspace", str(course / "reference" / "mini"),
                                 "--student", "ada", "--allow-weak-sandbox"), env=environment(temp), cwd=str(tmp_path),
                   folder=str(tmp_path))
    try:
        said = stop_and_check(tree, signal.SIGTERM, group=False)
    finally:
        tree.close()
    assert "stopped by SIGTERM" in said and not (course / ".grade" / "gradebook.sqlite").exists()


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_finished_batch_leaves_no_sandbox_folder(tmp_path: Path, temp: Path):
    from class_builder import STUDENTS

    course, submissions = build_class(tmp_path, STUDENTS[:3])
    tree = TreeRun(grade_command(course, "batch", "mini", str(submissions), "--jobs", "2", "--gradebook",
                                 str(tmp_path / "gb.sqlite"), "--allow-weak-sandbox"),
                   env=environment(temp), cwd=str(tmp_path), folder=str(tmp_path))
    try:
        code = tree.wait(600)
        assert code == 0, tree.stderr()[-3000:]
        tree.wait_for(lambda: not tree.processes(), 120, "every process of the command's tree to end")
    finally:
        tree.close()
    assert sandbox_folders(temp) == []
