"""Progress on a terminal for `grade submit`, `grade batch` and `grade validate`, and silence when
stderr is not one: the commands run as real processes with stderr on a pseudo-terminal (or a
pipe) and what reached it is read back."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from class_builder import BY_ID, build_class
from rich.console import Console

from grader.cli.console import ActivityProgress, RichProgress
from grader.pipeline.batch import BatchSummary
from tests.conftest import FAULTS, copy_mini_course

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def run(args: list[str], *, terminal: bool, timeout: float = 600) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m grader.cli ARGS`; stderr on a pty when `terminal`."""
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "140", "LINES": "40"}
    env.pop("NO_COLOR", None)
    command = [sys.executable, "-m", "grader.cli", *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
        return done.returncode, done.stdout, done.stderr
    master, slave = os.openpty()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, env=env) as process:
        os.close(slave)
        seen = bytearray()
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                process.kill()
                raise AssertionError("the command stopped writing")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        stdout = process.stdout.read().decode()
        code = process.wait(timeout=timeout)
    os.close(master)
    return code, stdout, seen.decode("utf-8", errors="replace")


def plain(text: str) -> str:
    return ANSI.sub("", text).replace("\r", "\n")


def test_progress_draws_on_a_terminal_console_and_nothing_elsewhere():
    for terminal in (True, False):
        buffer = io.StringIO()
        console = Console(file=buffer, force_terminal=terminal, width=120)
        with ActivityProgress("grading mini for ada", console=console) as activity:
            activity("running the hidden tests")
            activity.done("reference")
        summary = BatchSummary("mini", total=3, graded=["a"], stale=["a"])
        with RichProgress(console=console) as progress:
            progress("planned", "2", summary)
            progress("graded", "a", summary)
        shown = plain(buffer.getvalue())
        if terminal:
            assert "grading mini for ada" in shown and "running the hidden tests" in shown
            assert "grading mini" in shown and "stale 1" in shown and "1/2" in shown
        else:
            assert shown == ""


@pytest.fixture
def course(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


@pytest.mark.slow
def test_submit_shows_its_steps_on_a_terminal_and_is_silent_in_a_pipe(course: Path):
    args = ["--course", str(course), "submit", "mini", "--workspace", str(FAULTS / "wrong_axis"),
            "--student", "bob", "--no-record"]
    code, stdout, terminal = run(args, terminal=True)
    assert code == 0, terminal
    shown = plain(terminal)
    assert "grading mini for bob" in shown and "running the hidden tests" in shown
    assert "Total:" in stdout and "grading mini for bob" not in stdout  # the result itself goes to stdout
    code, stdout, stderr = run(args, terminal=False)
    assert code == 0 and stderr == "" and "Total:" in stdout


@pytest.mark.slow
def test_batch_shows_a_bar_on_a_terminal_and_is_silent_in_a_pipe(tmp_path: Path):
    course, submissions = build_class(tmp_path, [BY_ID["s01"], BY_ID["s08"]])
    args = ["--course", str(course), "batch", "mini", str(submissions), "--jobs", "1", "--no-reports",
            "--gradebook", str(tmp_path / "gb.sqlite")]
    code, stdout, terminal = run(args, terminal=True)
    assert code == 0, terminal
    shown = plain(terminal)
    assert "grading mini" in shown and "2/2" in shown and "ETA" in shown and "graded 2" in shown
    assert re.search(r"graded\s*│\s*2\b", stdout)
    code, stdout, stderr = run([*args[:-2], "--gradebook", str(tmp_path / "other.sqlite")], terminal=False)
    assert code == 0 and stderr == "" and re.search(r"graded\s*│\s*2\b", stdout)


@pytest.mark.slow
def test_validate_shows_what_it_is_doing_on_a_terminal_and_keeps_stdout_whole(course: Path):
    code, stdout, terminal = run(["--course", str(course), "validate", "mini"], terminal=True)
    assert code == 0, terminal + stdout
    shown = plain(terminal)
    assert "validating mini" in shown and "grading the reference, the stubs and every mutant" in shown
    assert "✓ reference" in stdout and "✓ stubs" in stdout  # the verdicts stay on stdout, redirected or not
    # In a pipe: one line per finished check, never wrapped (COLUMNS is 140 here; rich's pipe default is 80),
    # read back from the cache this time.
    code, stdout, stderr = run(["--course", str(course), "validate", "mini"], terminal=False)
    assert code == 0 and stderr == "", stderr
    lines = stdout.splitlines()
    checks = [line for line in lines if line.startswith(("  ✓ ", "  ✗ "))]
    assert len(checks) >= 19
    assert all(line.startswith(("mini", "  ")) for line in lines), lines  # no line carried over onto the next
    assert any(len(line) > 140 and line.startswith("  ✓ degenerate answers: ") for line in checks), checks
    assert sum("(cached)" in line for line in checks) == 9  # the degenerate answers and 8 gradings' verdicts
