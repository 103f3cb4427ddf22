"""The LMS and the course server together, for real: `grade serve` on loopback, a mock LTI 1.3 platform on
loopback. A launch signs a student in and opens the assignment; their upload's grade reaches the platform's
gradebook once; a regrade that changes it sends it again, one that does not sends nothing; forged and
replayed launches are refused with a clean page."""

from __future__ import annotations

import re
import time
import urllib.parse
import urllib.request

import pytest
from lms_platform import LEARNER, MockPlatform, new_key
from serve_client import MINI_ANSWERS, Client, ServerProcess, job_id, serving_copy, signed_in

from grader.lms.keys import load_key, make_key, public_jwks
from grader.serve.app import COOKIE as SESSION
from grader.serve.lti_routes import STATE_COOKIE
from tests.conftest import MINI_COURSE

REFERENCE = (MINI_COURSE / "reference" / "mini" / "mini.py").read_bytes()
STUB = (MINI_COURSE / "assignments" / "mini" / "mini.py").read_bytes()


@pytest.fixture(scope="module")
def platform():
    with MockPlatform() as running:
        running.members = [{"user_id": "lti-ann", "name": "Ann", "email": "ann@uni.edu",
                            "lis_person_sourcedid": "ann", "roles": [LEARNER], "status": "Active"}]
        yield running


@pytest.fixture(scope="module")
def server(platform, tmp_path_factory):
    course = serving_copy(MINI_COURSE, tmp_path_factory.mktemp("lti") / "course")
    table = platform.lms_table("http://127.0.0.1", ".grade/lti/tool-key.pem")
    lines = ["[lms]"] + [f'{k} = {_toml(v)}' for k, v in table.items() if k != "canvas"]
    settings = course / "course.toml"
    settings.write_text((settings.read_text() if settings.exists() else "") + "\n" + "\n".join(lines) + "\n")
    make_key(course / ".grade" / "lti" / "tool-key.pem")
    platform.tool_jwks = public_jwks(load_key(course / ".grade" / "lti" / "tool-key.pem"))
    process = ServerProcess(course, "--jobs", "1")
    staff = signed_in(process, "tia", staff=True)
    roster = course.parent / "roster.csv"
    roster.write_text("id,name,email\nann,Ann,ann@uni.edu\n")
    from serve_client import grade
    grade(course, "roster", "import", str(roster))
    yield process, staff
    process.stop()


def _toml(value) -> str:
    return "[" + ", ".join(f'"{v}"' for v in value) + "]" if isinstance(value, list) else f'"{value}"'


def launch(server: ServerProcess, platform: MockPlatform, **forge) -> tuple[Client, object, dict]:
    """The launch as a browser makes it: the platform's login initiation, its authorisation answer (the
    form with the signed id_token), that form posted to the tool. The browser, the tool's last answer, and
    the form it posted."""
    browser = Client(server.url, follow=False)
    query = urllib.parse.urlencode({"iss": platform.issuer, "login_hint": "lti-ann", "client_id": platform.client_id,
                                    "target_link_uri": f"{server.url}/a/mini", "lti_message_hint": "mini"})
    login = browser.get(f"/lti/login?{query}")
    assert login.status == 302, login.body
    with urllib.request.urlopen(header(login, "location"), timeout=60) as answer:
        form = answer.read().decode()
    fields = dict(re.findall(r'name="(id_token|state)" value="([^"]+)"', form))
    if "token" in forge:
        fields["id_token"] = forge["token"](fields)
    body = urllib.parse.urlencode(fields).encode()
    reply = browser.request("/lti/launch", body, {"Content-Type": "application/x-www-form-urlencoded"})
    return browser, reply, fields


def header(reply, name: str) -> str:
    return next((v for k, v in reply.headers.items() if k.lower() == name), "")


def following(browser: Client, server: ServerProcess) -> Client:
    """A browser that follows redirects, with `browser`'s cookies."""
    client = Client(server.url)
    for cookie in browser.jar:
        client.jar.set_cookie(cookie)
    return client


def wait_for(condition, what: str, timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.sandbox
def test_a_launch_signs_in_and_the_grade_goes_back_once_and_again_only_when_it_changes(server, platform):
    process, staff = server
    browser, reply, _ = launch(process, platform)
    assert reply.status == 303 and header(reply, "location") == "/a/mini", reply.body
    ann = following(browser, process)
    page = ann.get("/a/mini")
    assert page.status == 200 and "mini" in page.body.lower()
    good = job_id(ann.upload("mini", [("mini.py", REFERENCE), ("answers.toml", MINI_ANSWERS)]))
    assert ann.events(good)[-1]["state"] == "done"
    wait_for(lambda: len(platform.scores) == 1, "the first score")
    first = platform.scores[0]
    assert first["userId"] == "lti-ann" and first["scoreGiven"] == first["scoreMaximum"] == 100
    assert len(platform.line_items) == 1 and platform.line_items[0]["resourceId"] == "mini"
    worse = job_id(ann.upload("mini", [("mini.py", STUB), ("answers.toml", MINI_ANSWERS)]))  # a grade that changes
    assert ann.events(worse)[-1]["state"] == "done"
    wait_for(lambda: len(platform.scores) == 2, "the changed score")
    assert platform.scores[1]["scoreGiven"] < 100
    regraded = staff.post("/staff/regrade", {"csrf": staff.csrf("/staff"), "assignment": "mini", "student": "ann"})
    assert "1 submission(s) queued for regrading" in regraded.body
    assert ann.events(worse)[-1]["state"] == "done"  # graded again, the same grade
    time.sleep(3)  # a passback of an unchanged grade would have been sent by now
    assert len(platform.scores) == 2 and len(platform.line_items) == 1


@pytest.mark.sandbox
@pytest.mark.parametrize("forgery, words", [
    ("signed by another key", "signature does not verify"),
    ("for another tool", "wrong audience"),
    ("expired", "expired"),
])
def test_a_forged_launch_is_refused_with_a_clean_page(server, platform, forgery, words):
    process, _ = server

    def forged(fields: dict) -> str:  # the platform's nonce, but a token it did not sign as it should
        return platform.id_token("lti-ann", nonce=_nonce_of(fields["id_token"]), sis="ann", **{
            "signed by another key": {"key": new_key()}, "for another tool": {"aud": "another-tool"},
            "expired": {"expires_in": -600}}[forgery])

    _, reply, _ = launch(process, platform, token=forged)
    assert reply.status == 403 and words in " ".join(reply.body.split()) and "Traceback" not in reply.body
    assert SESSION not in header(reply, "set-cookie")  # nobody signed in


@pytest.mark.sandbox
def test_a_replayed_launch_is_refused(server, platform):
    """Someone who captured a launch (its form and the state cookie) and posts it again gets no session."""
    process, _ = server
    _, reply, fields = launch(process, platform)
    assert reply.status == 303
    replayer = Client(process.url, follow=False)
    again = replayer.request("/lti/launch", urllib.parse.urlencode(fields).encode(),
                             {"Content-Type": "application/x-www-form-urlencoded",
                              "Cookie": f"{STATE_COOKIE}={fields['state']}"})
    assert again.status == 403 and "already used" in " ".join(again.body.split()) and "Traceback" not in again.body
    assert SESSION not in header(again, "set-cookie")


def _nonce_of(token: str) -> str:
    import jwt

    return jwt.decode(token, options={"verify_signature": False})["nonce"]


def test_a_course_without_an_lms_table_has_no_lms_link():
    from grader.lms.config import load_optional

    assert load_optional(MINI_COURSE) is None
