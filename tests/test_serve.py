"""`grade serve` for real: the server started as a process on a loopback port and driven over HTTP as a
browser drives it. Students sign in with a staff-issued link, upload, follow the status stream and read the
report; hostile requests (no session, someone else's URL, no CSRF token, too large, a bad archive, too many
uploads, a forged cookie, a student id in the body) each get a clean page and change nothing. At both
sandbox levels: bubblewrap, and the no-namespace stack."""

from __future__ import annotations

import re
import sqlite3

import pytest
from serve_client import MINI_ANSWERS, Client, ServerProcess, job_id, serving_copy, signed_in

from tests.conftest import MINI_COURSE, STACKS

pytestmark = pytest.mark.sandbox

REFERENCE = (MINI_COURSE / "reference" / "mini" / "mini.py").read_bytes()
STUB = (MINI_COURSE / "assignments" / "mini" / "mini.py").read_bytes()


@pytest.fixture(scope="module", params=sorted(STACKS))
def server(request, tmp_path_factory):
    """The server at each sandbox level: bubblewrap, and the no-namespace stack (GRADE_NO_BWRAP=1)."""
    from grader.sandbox.isolation import bwrap_works

    if request.param == "bubblewrap" and not bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces here")
    course = serving_copy(MINI_COURSE, tmp_path_factory.mktemp("serve") / "course",
                          "uploads_per_window = 3\nwindow_minutes = 60\n")
    env = {"GRADE_NO_BWRAP": "1" if request.param == "process" else ""}
    process = ServerProcess(course, "--jobs", "1", env=env)
    process.level = request.param
    yield process
    process.stop()


def db(server: ServerProcess) -> sqlite3.Connection:
    return sqlite3.connect(server.course / ".grade" / "gradebook.sqlite")


def clean(reply) -> None:
    """An error answered as a page of the site: its words, no traceback, no file path."""
    assert "<main" in reply.body and "Traceback" not in reply.body and "grader/" not in reply.body, reply.body


def test_the_reference_gets_full_marks_and_the_stubs_zero_through_uploads(server):
    alice = signed_in(server, "alice")
    assert "Mini assignment" in alice.get("/").body
    good = job_id(alice.upload("mini", [("mini.py", REFERENCE), ("answers.toml", MINI_ANSWERS)]))
    events = alice.events(good)
    assert events[-1]["state"] == "done" and events[-1]["report"] == f"/jobs/{good}/report"
    assert {e["state"] for e in events} <= {"queued", "running", "done"}
    report = alice.get(f"/jobs/{good}/report")
    assert report.status == 200 and re.search(r"<title>[^<]*alice[^<]*100\.0/100\.0", report.body), report.body[:400]
    assert "default-src 'none'" in report.headers["content-security-policy"]
    stub = job_id(alice.upload("mini", [("mini.py", STUB)]))
    assert alice.events(stub)[-1]["state"] == "done"
    assert re.search(r"<title>[^<]*0\.0/100\.0", alice.get(f"/jobs/{stub}/report").body)
    page = alice.get("/a/mini").body  # newest first: the stub counts now, the reference's row says its score
    rows = re.findall(r"Submission (\d+)</a></td><td>[^<]*</td><td>(\w+)</td>\s*<td>([^<]*)</td><td>(\w+|—)</td>",
                      page)
    assert rows == [(str(stub), "done", "0 / 100", "counts"), (str(good), "done", "100 / 100", "—")]
    assert "1 left" in page  # the rate limit as it stands, before it is reached
    with db(server) as con:  # graded at the level the server runs at
        levels = {row[0] for row in con.execute("SELECT isolation FROM submissions WHERE student_id = 'alice'")}
    assert all(("bubblewrap" in level) == (server.level == "bubblewrap") for level in levels), levels


def test_the_same_upload_twice_is_one_job_and_one_grading(server):
    dora = signed_in(server, "dora")
    first = job_id(dora.upload("mini", [("mini.py", REFERENCE)]))
    again = job_id(dora.upload("mini", [("mini.py", REFERENCE)]))
    assert again == first
    dora.events(first)
    with db(server) as con:
        assert con.execute("SELECT COUNT(*), SUM(recorded) FROM jobs WHERE student_id = 'dora'").fetchone() == (1, 1)
        assert con.execute("SELECT COUNT(*) FROM submissions WHERE student_id = 'dora'").fetchone() == (1,)
    assert "3 left" in dora.get("/a/mini").body or "2 left" in dora.get("/a/mini").body


def test_a_student_reaches_only_their_own_work(server):
    erin = signed_in(server, "erin")
    mine = job_id(erin.upload("mini", [("mini.py", STUB)]))
    erin.events(mine)
    frank = signed_in(server, "frank")
    for path in (f"/jobs/{mine}", f"/jobs/{mine}/report", f"/jobs/{mine}/events", "/jobs/999999", "/jobs/x",
                 "/jobs/-1/report", "/staff", "/staff/report/mini", "/staff/export/mini", "/a/nope",
                 "/static/../gradebook.sqlite", "/static/signing.key"):
        reply = frank.get(path)
        assert reply.status == 404, (path, reply.status)
        clean(reply)
    assert "erin" not in frank.get("/").body


def test_hostile_requests_get_a_clean_page_and_change_nothing(server):
    with db(server) as con:
        before = con.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    nobody = Client(server.url)
    for path in ("/a/mini", "/jobs/1", "/staff"):
        reply = nobody.get(path)
        assert reply.status == 401 and "sign-in link" in reply.body
        clean(reply)
    forged = Client(server.url)
    forged.get(server.link("gina"))
    for cookie in forged.jar:
        cookie.value = cookie.value[:-3] + "abc"
    assert forged.get("/a/mini").status == 401
    assert forged.get(f"{server.url}/signin?token=not-a-token").status == 403
    someone = signed_in(server, "kim")
    switched = someone.get(server.link("mallory"))  # another's link opened in a signed-in browser
    assert switched.status == 409 and "signed in as kim" in switched.body
    assert "Signed in as kim" in someone.get("/").body

    gina = signed_in(server, "gina")
    no_csrf = gina.post("/a/mini/upload", {}, [("mini.py", REFERENCE)])
    assert no_csrf.status == 403 and "reload the page" in no_csrf.body
    wrong_csrf = gina.post("/a/mini/upload", {"csrf": "x" * 32}, [("mini.py", REFERENCE)])
    assert wrong_csrf.status == 403
    assert gina.post("/signout", {}).status == 403  # every form, sign-out too
    too_big = gina.request("/a/mini/upload", b"x", {"Content-Type": "multipart/form-data; boundary=b",
                                                     "Content-Length": str(10**9)})
    assert too_big.status == 413 and "MiB" in too_big.body
    bad_zip = gina.upload("mini", [("work.zip", b"PK\x03\x04 this is not a zip")])
    assert bad_zip.status == 400 and "cannot be graded" in bad_zip.body
    clean(bad_zip)
    nothing = gina.upload("mini", [])
    assert nothing.status in (400, 422)
    clean(nothing)
    wrong_files = gina.upload("mini", [("notes.txt", b"hello")])
    assert wrong_files.status == 400 and "mini.py" in wrong_files.body
    assert gina.get("/no/such/page").status == 404
    with db(server) as con:
        assert con.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == before


def test_the_student_id_comes_from_the_session_never_the_body(server):
    hana = signed_in(server, "hana")
    job = job_id(hana.upload("mini", [("mini.py", STUB)], student="alice", student_id="alice", user="alice"))
    hana.events(job)
    with db(server) as con:
        assert con.execute("SELECT student_id FROM jobs WHERE id = ?", (job,)).fetchone() == ("hana",)


def test_the_rate_limit_is_shown_then_enforced(server):
    ivan = signed_in(server, "ivan")
    for number in range(3):
        assert "3 of your 3" not in ivan.get("/a/mini").body
        job_id(ivan.upload("mini", [("mini.py", STUB + f"\n# take {number}\n".encode())]))
    page = ivan.get("/a/mini").body
    assert "used all 3 uploads" in page and "next is possible at" in page and 'action="/a/mini/upload"' not in page
    refused = ivan.post("/a/mini/upload", {"csrf": ivan.csrf("/")}, [("mini.py", STUB + b"#4")])
    assert refused.status == 429 and "next is possible at" in refused.body
    clean(refused)


def test_staff_see_the_queues_regrade_and_read_the_class_report(server):
    jack = signed_in(server, "jack")
    job = job_id(jack.upload("mini", [("mini.py", REFERENCE)]))
    jack.events(job)
    staff = Client(server.url)
    landing = staff.get(server.link("prof", staff=True))
    assert landing.url.endswith("/staff") and "The CPU queue" in landing.body and "No GPU worker" in landing.body
    regraded = staff.post("/staff/regrade", {"csrf": staff.csrf("/staff"), "assignment": "mini", "student": "jack"})
    assert "1 submission(s) queued for regrading" in regraded.body
    assert jack.events(job)[-1]["state"] == "done"
    with db(server) as con:
        assert con.execute("SELECT replaced_because FROM grading_history WHERE student_id = 'jack'").fetchall() == \
            [("regraded by staff",)]
        assert con.execute("SELECT COUNT(*) FROM submissions WHERE student_id = 'jack'").fetchone() == (1,)
    assert "jack" in staff.get("/staff/report/mini").body
    export = staff.get("/staff/export/mini")
    assert export.status == 200 and "jack" in export.body
    assert staff.get(f"/jobs/{job}/report").status == 200  # staff read any report
    assert staff.post("/staff/regrade", {"assignment": "mini"}).status == 403  # CSRF on staff forms too
