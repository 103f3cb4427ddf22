"""The course itself through `grade serve`: assignment 1's reference solution, uploaded as a browser uploads
the files, gets full marks and its report; the stubs get 0. Assignment 3 on a server without a GPU worker:
its speed points stay pending, and its pages say so."""

from __future__ import annotations

import re
import time

import pytest
from serve_client import ServerProcess, job_id, signed_in

from tests.conftest import ROOT, copy_course

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("course-serve") / "course")
    process = ServerProcess(course, "--jobs", "1", "--assignment", "assignment1", "--assignment", "assignment3")
    yield process
    process.stop()


def test_assignment1_reference_gets_full_marks_and_the_stubs_zero(server):
    ada = signed_in(server, "ada")
    reference = ROOT / "reference" / "assignment1"
    started = time.monotonic()
    good = job_id(ada.upload("assignment1", [("attention.py", (reference / "attention.py").read_bytes()),
                                             ("answers.toml", (reference / "answers.toml").read_bytes())]))
    assert ada.events(good)[-1]["state"] == "done"
    print(f"assignment 1's reference: upload to report in {time.monotonic() - started:.1f} s")
    report = ada.get(f"/jobs/{good}/report").body
    assert re.search(r"<title>[^<]*ada[^<]*— (\d+\.\d)/\1</title>", report), report[:300]
    stubs = ROOT / "assignments" / "assignment1"
    bad = job_id(ada.upload("assignment1", [("attention.py", (stubs / "attention.py").read_bytes()),
                                            ("answers.toml", (stubs / "answers.toml").read_bytes())]))
    assert ada.events(bad)[-1]["state"] == "done"
    assert re.search(r"<title>[^<]*— 0\.0/\d+\.\d</title>", ada.get(f"/jobs/{bad}/report").body)


def test_without_a_gpu_worker_speed_points_stay_pending_saying_so(server):
    bo = signed_in(server, "bo")
    page = bo.get("/a/assignment3").body
    assert "Speed points stay pending: this server has no GPU worker" in page
    board = bo.get("/a/assignment3/leaderboard")
    assert board.status == 200 and "No kernel has been timed yet" in board.body and "no GPU worker" in board.body
    assert "leaderboard" not in bo.get("/a/assignment1").body  # no timed kernels, no board
    assert bo.get("/a/assignment1/leaderboard").status == 404
