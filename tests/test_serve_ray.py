"""`grade serve --executor ray`: the gradings run on grading actors of a Ray cluster (here, one started on this
machine), recorded by the server alone, the reports as on the local pool."""

from __future__ import annotations

import re
import sqlite3

import pytest
from serve_client import MINI_ANSWERS, ServerProcess, job_id, serving_copy, signed_in

from tests.conftest import MINI_COURSE

pytestmark = [pytest.mark.ray, pytest.mark.sandbox]
pytest.importorskip("ray")

REFERENCE = (MINI_COURSE / "reference" / "mini" / "mini.py").read_bytes()


def test_a_server_on_ray_grades_uploads_on_its_actors(tmp_path):
    course = serving_copy(MINI_COURSE, tmp_path / "course")
    server = ServerProcess(course, "--executor", "ray", "--jobs", "1")
    try:
        ray_user = signed_in(server, "rae")
        job = job_id(ray_user.upload("mini", [("mini.py", REFERENCE), ("answers.toml", MINI_ANSWERS)]))
        assert ray_user.events(job)[-1]["state"] == "done"
        assert re.search(r"<title>[^<]*rae[^<]*100\.0/100\.0", ray_user.get(f"/jobs/{job}/report").body)
        with sqlite3.connect(course / ".grade" / "gradebook.sqlite") as con:
            assert con.execute("SELECT state, recorded FROM jobs WHERE id = ?", (job,)).fetchone() == ("done", 1)
        assert "No GPU worker" in signed_in(server, "prof", staff=True).get("/staff").body  # a cluster without GPUs
    finally:
        server.stop()
