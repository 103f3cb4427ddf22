"""No sandbox folder outlives the process that made it, however that process ends.

A grading worker makes its templates' runtime and slot folders (and its sandboxes' own) in the
temporary folder. One that exits closes them; these tests cover the two ends where it cannot: a
worker killed (SIGKILL, after it did not stop within the pool's grace: the pool removes what it
left), and one stopped while it was still making a template (the template is not yet among those
it closes: its last exit hook removes what it made). Each runs a real template in a real child
process, in a temporary folder of its own.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.pipeline.local_pool import end_processes
from grader.sandbox import scratch
from grader.sandbox.template import Zygote

pytestmark = pytest.mark.sandbox

FORK = multiprocessing.get_context("fork")


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process's (and its children's) temporary folder for the test."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder


def _start(target) -> tuple[multiprocessing.Process, object]:
    """A forked child running `target(signal_event)`, started, with the event it sets."""
    event = FORK.Event()
    child = FORK.Process(target=target, args=(event,))
    child.start()
    return child, event


def _make_a_template_then_hang(ready) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a worker that does not stop within the grace
    Zygote.shared(False, namespaced=False, uid_range=None)
    ready.set()
    time.sleep(600)


def test_the_pool_removes_what_a_worker_it_killed_left(temp: Path):
    worker, ready = _start(_make_a_template_then_hang)
    assert ready.wait(120), "the child did not make its template"
    made = [p.name for p in scratch.left_by(worker.pid)]
    assert any(name.startswith(f"grade-runtime-{worker.pid}-") for name in made), made
    end_processes([worker], grace_s=1.0)
    assert worker.exitcode == -signal.SIGKILL
    assert sorted(p.name for p in temp.iterdir()) == []


def _half_make_a_template_then_stop(done) -> None:
    Zygote(False, namespaced=False, uid_range=None)  # made, not yet among the process's templates
    Zygote.close_all()  # what a worker stopped by SIGTERM runs before os._exit
    done.set()
    os._exit(0)


def test_a_worker_stopped_while_it_makes_a_template_leaves_no_folder(temp: Path):
    worker, done = _start(_half_make_a_template_then_stop)
    worker.join(120)
    assert done.is_set() and worker.exitcode == 0
    assert sorted(p.name for p in temp.iterdir()) == []


def test_what_a_process_left_is_named_after_it_and_only_its_own_is_removed(temp: Path):
    mine = scratch.make("runtime")
    (mine / "inside").write_text("x")
    theirs = temp / f"grade-runtime-{os.getpid() + 1}-abc"
    theirs.mkdir()
    log = temp / f"{mine.name}.log"
    log.write_text("log")
    assert scratch.left_by(os.getpid()) == sorted([mine, log])
    scratch.remove_left_by(os.getpid())
    assert sorted(p.name for p in temp.iterdir()) == [theirs.name]
    with pytest.raises(ValueError):
        scratch.make("anything")
