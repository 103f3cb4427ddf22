"""Nothing lost: a grading worker killed mid-job has its job granted again and recorded once; a server
killed mid-queue resumes its queue when it starts again, every upload graded and recorded exactly once."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from serve_client import ServerProcess, job_id, serving_copy, signed_in

from tests.conftest import MINI_COURSE

pytestmark = pytest.mark.sandbox

REFERENCE = (MINI_COURSE / "reference" / "mini" / "mini.py").read_bytes()
# Slow enough to be caught running: every call of double() takes a second.
SLOW = REFERENCE.replace(b"import torch\n", b"import time\n\nimport torch\n").replace(
    b"    return x * 2", b"    time.sleep(1)\n    return x * 2")
WAIT_S = 600


def children(pid: int) -> list[tuple[int, str]]:
    """The processes whose parent is `pid`, with their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found.append((int(entry.name), command))
    return found


def pool_workers(server_pid: int) -> list[int]:
    """The grading pool's workers: the children of the server's forkserver."""
    servers = [pid for pid, command in children(server_pid) if "forkserver" in command]
    return [pid for fork in servers for pid, _ in children(fork)]


def wait_until(what, timeout_s: float = WAIT_S, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"waited {timeout_s} s in vain for {what}")


def job_row(course: Path, job: int) -> tuple:
    with sqlite3.connect(course / ".grade" / "gradebook.sqlite") as con:
        return con.execute("SELECT state, attempts, recorded FROM jobs WHERE id = ?", (job,)).fetchone()


def gradings(course: Path) -> tuple[int, int]:
    with sqlite3.connect(course / ".grade" / "gradebook.sqlite") as con:
        return (con.execute("SELECT COUNT(*) FROM submissions").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM grading_history").fetchone()[0])


def test_a_killed_grading_worker_has_its_job_granted_again_and_recorded_once(tmp_path: Path):
    course = serving_copy(MINI_COURSE, tmp_path / "course")
    server = ServerProcess(course, "--jobs", "1")
    try:
        alice = signed_in(server, "alice")
        job = job_id(alice.upload("mini", [("mini.py", SLOW)]))
        wait_until(lambda: job_row(course, job)[0] == "running")
        workers = wait_until(lambda: pool_workers(server.process.pid))
        time.sleep(2)  # inside the grading now
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        events = alice.events(job)
        assert events[-1]["state"] == "done", events
        state, attempts, recorded = job_row(course, job)
        assert (state, recorded) == ("done", 1) and attempts == 2
        assert gradings(course) == (1, 0)
        assert server.process.poll() is None  # the server itself lives on
    finally:
        server.stop()


def test_a_killed_server_resumes_its_queue_and_records_each_upload_once(tmp_path: Path):
    course = serving_copy(MINI_COURSE, tmp_path / "course")
    server = ServerProcess(course, "--jobs", "1")
    try:
        students = ["bo", "cy", "di"]
        jobs = [job_id(signed_in(server, s).upload("mini", [("mini.py", SLOW if s == "bo" else REFERENCE)]))
                for s in students]
        wait_until(lambda: job_row(course, jobs[0])[0] == "running")
        time.sleep(2)
    finally:
        server.kill()
    assert {job_row(course, j)[0] for j in jobs} <= {"running", "queued"}
    again = ServerProcess(course, "--jobs", "1")
    try:
        for student, job in zip(students, jobs, strict=True):
            client = signed_in(again, student)  # the signing key survived the restart: so do links
            assert client.events(job)[-1]["state"] == "done"
        rows = [job_row(course, j) for j in jobs]
        assert [(state, recorded) for state, _, recorded in rows] == [("done", 1)] * 3
        assert rows[0][1] == 2  # the job the server was running when it died was granted again
        assert gradings(course) == (3, 0)
    finally:
        again.stop()
