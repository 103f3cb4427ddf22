"""The server's jobs in the gradebook (schema 3): one job per upload, leases and heartbeats, recorded once;
the signed links and sessions; the course's [serve] settings; uploads packed for intake. Fast lane: real
SQLite files, no sandbox."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from test_gradebook_history import OLD_GRADEBOOK, files_of, result_for

from grader.core.errors import SettingsError, SubmissionError
from grader.core.settings import ServeSettings, load_settings
from grader.serve.auth import Signer, serve_dir, signing_key
from grader.serve.queue import ServerBook
from grader.serve.uploads import FILES_ZIP, pack
from grader.storage.gradebook import SCHEMA_VERSION, Gradebook

NOW = 1_800_000_000.0


def queued(book: Gradebook, student: str = "alice", sha: str | None = None, when: str = "2026-12-01T10:00:00+00:00"):
    sha = sha or (student * 64)[:64]
    return book.enqueue_job(student, "mini", sha, "upload.zip", b"PK-bytes", when)


def test_a_version_2_gradebook_gains_the_jobs_table(tmp_path: Path):
    path = tmp_path / "old.sqlite"
    shutil.copy(OLD_GRADEBOOK, path)
    with Gradebook(path) as book:  # 0 → 5 in one pass, then a job fits
        assert book.version == SCHEMA_VERSION == 5
        job, created = queued(book)
        assert created and job.state == "queued" and book.count("jobs") == 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (5,)


def test_the_same_upload_twice_is_one_job(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        first, created = queued(book)
        again, created_again = queued(book)
        other, _ = queued(book, sha="b" * 64)
        assert created and not created_again and again.id == first.id and other.id != first.id
        assert book.count("jobs") == 2


def test_the_rate_limit_is_checked_where_the_job_is_queued(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        limit = (2, "2026-12-01T09:00:00+00:00")
        for sha in "ab":
            assert queued(book, sha=sha * 64)[0] is not None
        job, created = book.enqueue_job("alice", "mini", "c" * 64, "upload.zip", b"PK", "2026-12-01T10:00:00+00:00",
                                        limit=limit)
        assert job is None and not created  # a third new upload within the window
        again, created = book.enqueue_job("alice", "mini", "a" * 64, "upload.zip", b"PK",
                                          "2026-12-01T10:00:00+00:00", limit=limit)
        assert again is not None and not created  # the same files again: their job, nothing counted
        assert book.enqueue_job("bob", "mini", "c" * 64, "upload.zip", b"PK", "2026-12-01T10:00:00+00:00",
                                limit=limit)[1]  # another student's own count


def test_a_granted_job_runs_under_a_lease_that_heartbeats_renew(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        first, _ = queued(book, "alice")
        second, _ = queued(book, "bob")
        assert book.jobs_ahead(book.job(second.id)) == 1
        job, upload = book.grant_job("cpu", NOW, 60)
        assert job.id == first.id and job.state == "running" and job.attempts == 1 and upload == b"PK-bytes"
        assert job.lease_until == NOW + 60
        book.heartbeat_jobs([job.id], NOW + 50, 60)
        assert book.expire_leases(NOW + 100) == []  # renewed: still held
        assert book.expire_leases(NOW + 111) == [job.id]  # no heartbeat since: granted again
        assert book.job(job.id).state == "queued"
        assert book.grant_job("gpu", NOW, 60) is None  # another tier's queue is empty


def test_a_job_is_recorded_once_however_often_it_finishes(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        job, _ = queued(book)
        book.grant_job("cpu", NOW, 60)
        result = result_for("alice", double=True, graded_at="2026-12-01T10:01:00+00:00")
        assert book.finish_job(job.id, result, files_of("alice"))
        assert not book.finish_job(job.id, result, files_of("alice"))  # a second worker's answer: dropped
        assert book.count("submissions") == 1 and book.count("grading_history") == 0
        done = book.job(job.id)
        assert done.state == "done" and done.recorded == 1
        assert book.recent_job_seconds("cpu") != []


def test_a_job_that_keeps_killing_its_worker_fails_with_the_reason(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        job, _ = queued(book)
        states = []
        for attempt in range(3):
            book.grant_job("cpu", NOW + attempt, 60)
            states.append(book.requeue_job(job.id, "its grading worker died", max_attempts=3))
        assert states == ["queued", "queued", "failed"]
        assert book.job(job.id).error == "its grading worker died"


def test_a_restarting_server_queues_again_what_was_running(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        job, _ = queued(book)
        book.grant_job("cpu", time.time(), 3600)
        assert book.release_running_jobs() == [job.id] and book.job(job.id).state == "queued"


def test_staff_regrade_queues_each_students_latest_job_again(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        for student, sha in (("alice", "a" * 64), ("alice", "c" * 64), ("bob", "b" * 64)):
            job, _ = queued(book, student, sha)
            book.grant_job("cpu", NOW, 60)
            book.finish_job(job.id, result_for(student, double=True, graded_at="2026-12-01T10:01:00+00:00",
                                               sha=sha), files_of(student))
        assert book.regrade_jobs("mini", "alice") == 1
        again = book.jobs(states=("queued",))
        assert [(j.student_id, j.sha256[0], j.reason, j.attempts) for j in again] == \
            [("alice", "c", "regraded by staff", 0)]
        assert book.regrade_jobs() == 1  # bob's; alice's is already queued


def test_rate_counts_uploads_in_the_window(tmp_path: Path):
    store = ServerBook(tmp_path / "g.sqlite")
    settings = ServeSettings(uploads_per_window=2, window_minutes=60)
    with store.book() as book:
        queued(book, sha="1" * 64, when="2026-12-01T10:00:00.000000+00:00")
        queued(book, sha="2" * 64, when="2026-12-01T10:30:00.000000+00:00")
    from datetime import datetime, timezone

    at = datetime(2026, 12, 1, 10, 45, tzinfo=timezone.utc)
    rate = store.rate("alice", "mini", settings, now=at)
    assert (rate.used, rate.left) == (2, 0) and rate.next_free == datetime(2026, 12, 1, 11, 0, tzinfo=timezone.utc)
    later = store.rate("alice", "mini", settings, now=datetime(2026, 12, 1, 11, 5, tzinfo=timezone.utc))
    assert (later.used, later.left, later.next_free) == (1, 1, None)
    store.close()


# ------------------------------------------------------------------ links, sessions, the key
def test_links_and_sessions_are_signed_and_expire(tmp_path: Path):
    key = signing_key(tmp_path)
    assert stat.S_IMODE(os.stat(serve_dir(tmp_path) / "signing.key").st_mode) == 0o600
    assert signing_key(tmp_path) == key  # made once
    signer = Signer(key, link_hours=1, session_hours=1)
    token = signer.link_token("alice")
    assert signer.open_link(token) == ("alice", "student")
    assert signer.open_link(token[:-2] + ("AA" if not token.endswith("AA") else "BB")) is None  # tampered
    assert Signer(b"x" * 32, 1, 1).open_link(token) is None  # another course's key
    cookie = signer.session_cookie("alice", "student")
    session = signer.open_session(cookie)
    assert session.user == "alice" and not session.staff and session.form_ok(session.csrf)
    assert not session.form_ok("") and not session.form_ok(session.csrf + "x")
    assert signer.open_session(token) is None  # a link is not a session
    expired = Signer(key, link_hours=1, session_hours=1)
    expired.link_s = expired.session_s = -1
    assert expired.open_link(token) is None and expired.open_session(cookie) is None
    with pytest.raises(Exception, match="not a usable student id"):
        signer.link_token("../bob")


def test_serve_settings_are_checked(tmp_path: Path):
    (tmp_path / "course.toml").write_text("[serve]\nuploads_per_window = 3\n")
    assert load_settings(tmp_path).serve.uploads_per_window == 3
    (tmp_path / "course.toml").write_text("[serve]\nuploads_per_window = 0\n")
    with pytest.raises(SettingsError, match="uploads_per_window"):
        load_settings(tmp_path)
    (tmp_path / "course.toml").write_text("[serve]\nuploads = 3\n")
    with pytest.raises(SettingsError, match="unknown \\[serve\\]"):
        load_settings(tmp_path)


def test_uploads_are_packed_for_intake():
    assert pack([("work.ZIP", b"PK")]).name == "upload.zip"
    files = pack([("C:\\Users\\me\\mini.py", b"x = 1\n"), ("answers.toml", b"")])
    import io
    import zipfile

    assert files.name == FILES_ZIP and sorted(zipfile.ZipFile(io.BytesIO(files.data)).namelist()) == \
        ["answers.toml", "mini.py"]
    for parts, words in (([], "no file"), ([("a.zip", b""), ("b.py", b"")], "with other files"),
                         ([("a.py", b""), ("a.py", b"")], "named a.py"), ([("..", b"")], "cannot be used")):
        with pytest.raises(SubmissionError, match=words):
            pack(parts)


def test_an_assignment_may_withhold_results_until_its_deadline(mini_course: Path):
    from datetime import datetime, timezone

    from grader.serve.app import hidden_until
    from tests.conftest import assignment_of

    manifest = mini_course / "assignments" / "mini" / "assignment.toml"
    assert hidden_until(assignment_of(mini_course, "mini")) is None  # [gradescope] hidden_tests: visible
    manifest.write_text(manifest.read_text() + '\n[gradescope]\nhidden_tests = "after_due_date"\n')
    assignment = assignment_of(mini_course, "mini")
    deadline = assignment.manifest.deadline
    before = datetime(2026, 11, 30, tzinfo=timezone.utc)
    assert hidden_until(assignment, before) == deadline
    assert hidden_until(assignment, datetime(2026, 12, 2, tzinfo=timezone.utc)) is None  # after it: shown


def test_serve_link_issues_signed_links_for_one_student_or_the_roster(mini_course: Path, tmp_path: Path):
    from urllib.parse import parse_qs, urlparse

    from click.testing import CliRunner

    from grader.cli import main
    from grader.core.course import Course
    from grader.serve.server import signer_for

    def run(*args):
        return CliRunner().invoke(main, ["--course", str(mini_course), *args])

    def opened(link: str):
        return signer_for(Course(mini_course)).open_link(parse_qs(urlparse(link).query)["token"][0])

    one = run("serve-link", "alice", "--url", "http://grader.example:8000/")
    assert one.exit_code == 0 and one.output.startswith("http://grader.example:8000/signin?token=")
    assert opened(one.output.strip()) == ("alice", "student")
    assert opened(run("serve-link", "prof", "--staff").output.strip()) == ("prof", "staff")
    bad = run("serve-link", "../alice")
    assert bad.exit_code == 2 and "not a usable student id" in bad.output and "Traceback" not in bad.output
    assert run("serve-link").exit_code == 2  # neither a user nor --roster
    assert "roster is empty" in run("serve-link", "--roster").output
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email\nbea,Bea,b@x.org\ncai,Cai,c@x.org\n")
    assert run("roster", "import", str(roster)).exit_code == 0
    lines = run("serve-link", "--roster").output.strip().splitlines()
    assert [line.split(",", 1)[0] for line in lines] == ["bea", "cai"]
    assert [opened(line.split(",", 1)[1]) for line in lines] == [("bea", "student"), ("cai", "student")]
