"""The LMS link against a mock platform on loopback that speaks LTI 1.3 (signed launches, AGS, NRPS)
and Canvas's REST API: launches checked claim by claim, grades sent once and only when they change,
retried when the LMS fails, the roster filled from the LMS, Canvas's rate limit respected."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from class_builder import FIXTURE
from click.testing import CliRunner
from lms_platform import INSTRUCTOR, LEARNER, MockPlatform, new_key

from grader.cli.main import main
from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.core.errors import LaunchRefused, LmsError
from grader.core.records import GradeResult, TestOutcome
from grader.core.scoring import score
from grader.intake.submission import Submission
from grader.lms import config as lms_config
from grader.lms.keys import load_key, make_key, public_jwks
from grader.lms.lti import PlatformKeys, check_launch, login_redirect
from grader.lms.passback import CanvasTarget, LtiTarget, push
from grader.lms.roster_sync import lms_members, sync
from grader.storage.gradebook import Gradebook


@pytest.fixture
def platform():
    with MockPlatform() as running:
        running.members = [
            {"user_id": "lti-ann", "name": "Ann", "email": "ann@uni.edu", "lis_person_sourcedid": "ann",
             "roles": [LEARNER], "status": "Active"},
            {"user_id": "lti-bob", "name": "Bob", "email": "bob@uni.edu", "lis_person_sourcedid": "bob",
             "roles": [LEARNER], "status": "Active"},
            {"user_id": "lti-tia", "name": "Tia", "email": "tia@uni.edu", "lis_person_sourcedid": "tia",
             "roles": [INSTRUCTOR], "status": "Active"},
        ]
        running.canvas_users = [
            {"id": 11, "name": "Ann", "email": "ann@uni.edu", "sis_user_id": "ann", "login_id": "ann1"},
            {"id": 12, "name": "Bob", "email": "bob@uni.edu", "sis_user_id": "bob", "login_id": "bob1"},
            {"id": 13, "name": "Cy", "email": "cy@uni.edu", "sis_user_id": "cy", "login_id": "cy1"},
        ]
        yield running


@pytest.fixture
def course(tmp_path: Path, platform: MockPlatform) -> Course:
    """The mini course registered with the mock platform: its [lms] table, the tool's key (given to the
    platform as a registration does), the Canvas token in a file of its own."""
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__", ".grade"))
    table = platform.lms_table("http://127.0.0.1:9", ".grade/lti/tool-key.pem")
    lines = ["[lms]"] + [f"{k} = {_toml(v)}" for k, v in table.items() if k != "canvas"]
    lines += ["[lms.canvas]"] + [f"{k} = {_toml(v)}" for k, v in table["canvas"].items() if k != "assignments"]
    lines += ["[lms.canvas.assignments]", 'mini = "501"']
    (root / "course.toml").write_text("\n".join(lines) + "\n")
    (root / "canvas-token").write_text(platform.canvas_token + "\n")
    made = make_key(root / ".grade" / "lti" / "tool-key.pem")
    assert made and (root / ".grade" / "lti" / "tool-key.pem").stat().st_mode & 0o777 == 0o600
    platform.tool_jwks = public_jwks(load_key(root / ".grade" / "lti" / "tool-key.pem"))
    return Course(root)


def _toml(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value) + '"'


def graded(book: Gradebook, student: str, passed: bool) -> None:
    """Record one grading of the mini assignment (real scoring of real outcomes)."""
    manifest = Assignment.load(Course(FIXTURE), "mini").manifest
    outcomes = [TestOutcome(name="test_double_matrix", task="double", status="passed" if passed else "failed",
                            fraction=1.0 if passed else 0.0)]
    result = GradeResult(assignment_id="mini", assignment_title=manifest.title, student=student, mode="submit",
                         score=score(manifest, outcomes), outcomes=tuple(outcomes), findings=(),
                         submission_sha256=(student + ("1" if passed else "0")) * 8, submission_form="folder",
                         submitted_at=None, graded_at="2026-12-01T10:00:00+00:00", seed=1, isolation="process",
                         isolation_level="process", duration_s=1.0, fingerprint="f" * 64)
    book.record(result, Submission(files={"mini.py": f"# {student} {passed}\n".encode()}, source="x", form="folder",
                                   student=student))


def book_of(course: Course) -> Gradebook:
    return Gradebook(course.gradebook_path(None))


def launch(course: Course, platform: MockPlatform, book: Gradebook, **token_args):
    config = lms_config.load(course.root).lti
    redirect = login_redirect(config, {"iss": platform.issuer, "login_hint": "lti-ann",
                                       "client_id": platform.client_id}, book)
    nonce = dict(p.split("=", 1) for p in redirect.url.split("?", 1)[1].split("&"))["nonce"]
    token = platform.id_token(token_args.pop("sub", "lti-ann"), nonce=token_args.pop("nonce", nonce),
                              sis=token_args.pop("sis", "ann"), **token_args)
    return config, redirect, token


# ------------------------------------------------------------------ launches
def test_a_launch_signs_a_rostered_student_in_and_opens_the_assignment(course, platform):
    with book_of(course) as book:
        book.import_roster([{"id": "ann", "name": "Ann", "email": "ann@uni.edu"}])
        config, redirect, token = launch(course, platform, book, assignment="mini")
        assert redirect.url.startswith(f"{platform.url}/auth?") and "redirect_uri=" in redirect.url
        signed_in = check_launch(config, PlatformKeys(config.keyset_url), book, token, redirect.state,
                                 redirect.state, ("mini",))
        assert (signed_in.role, signed_in.student_id, signed_in.assignment_id) == ("student", "ann", "mini")
        assert book.lms_users(platform.issuer) == {"ann": "lti-ann"}
        assert book.lms_endpoint(platform.issuer, "lineitems") == f"{platform.url}/lineitems"


@pytest.mark.parametrize("forgery, reason", [
    ("another key", "does not publish"),
    ("same kid, another key", "signature does not verify"),
    ("wrong audience", "wrong audience"),
    ("expired", "expired"),
    ("wrong issuer", "wrong issuer"),
    ("unknown deployment", "deployment this course does not know"),
    ("other browser", "state is not the one this browser was given"),
    ("nonce not issued", "nonce is not the one"),
    ("not a launch", "not a launch this tool takes"),
])
def test_a_forged_or_wrong_launch_is_refused(course, platform, forgery, reason):
    other = new_key()
    token_args = {"another key": {"key": other, "kid": "nope"}, "same kid, another key": {"key": other},
                  "wrong audience": {"aud": "another-tool"}, "expired": {"expires_in": -600},
                  "wrong issuer": {"iss": "https://evil.example"}, "unknown deployment": {"deployment": "d-x"},
                  "nonce not issued": {"nonce": "made-up"},
                  "not a launch": {"message_type": "LtiDeepLinkingRequest"}}.get(forgery, {})
    with book_of(course) as book:
        book.import_roster([{"id": "ann", "name": "Ann", "email": "ann@uni.edu"}])
        config, redirect, token = launch(course, platform, book, **token_args)
        browser = "someone-else" if forgery == "other browser" else redirect.state
        with pytest.raises(LaunchRefused, match=reason):
            check_launch(config, PlatformKeys(config.keyset_url), book, token, redirect.state, browser, ("mini",))
        assert book.lms_users(platform.issuer) == {}  # nobody was signed in or linked


def test_a_replayed_launch_is_refused(course, platform):
    with book_of(course) as book:
        book.import_roster([{"id": "ann", "name": "Ann", "email": "ann@uni.edu"}])
        config, redirect, token = launch(course, platform, book)
        keys = PlatformKeys(config.keyset_url)
        check_launch(config, keys, book, token, redirect.state, redirect.state, ("mini",))
        with pytest.raises(LaunchRefused, match="already used"):
            check_launch(config, keys, book, token, redirect.state, redirect.state, ("mini",))


def test_roles_decide_student_or_staff_and_a_learner_is_never_staff(course, platform):
    with book_of(course) as book:
        book.import_roster([{"id": "ann", "name": "Ann", "email": "ann@uni.edu"}])
        config, redirect, token = launch(course, platform, book, sub="lti-tia", sis="tia", roles=(INSTRUCTOR,))
        keys = PlatformKeys(config.keyset_url)
        staff = check_launch(config, keys, book, token, redirect.state, redirect.state, ("mini",))
        assert staff.role == "staff" and staff.student_id is None
        config, redirect, token = launch(course, platform, book, roles=(LEARNER,), assignment="../staff")
        student = check_launch(config, keys, book, token, redirect.state, redirect.state, ("mini",))
        assert student.role == "student" and student.assignment_id is None  # an unknown target opens nothing


def test_a_student_not_on_the_roster_is_refused_saying_what_to_do(course, platform):
    with book_of(course) as book:
        config, redirect, token = launch(course, platform, book)
        with pytest.raises(LaunchRefused, match="not on this course's roster .*ask the course staff"):
            check_launch(config, PlatformKeys(config.keyset_url), book, token, redirect.state, redirect.state, ())


def test_a_login_from_an_unknown_platform_is_refused(course, platform):
    with book_of(course) as book:
        with pytest.raises(LaunchRefused, match="unknown platform"):
            login_redirect(lms_config.load(course.root).lti, {"iss": "https://evil.example", "login_hint": "x"}, book)


# ------------------------------------------------------------------ grades back over AGS
def test_grades_reach_the_platform_once_and_again_only_when_they_change(course, platform):
    assignment = Assignment.load(course, "mini")
    config = lms_config.load(course.root)
    with book_of(course) as book:
        book.link_lms_user(platform.issuer, "lti-ann", "ann")
        graded(book, "ann", passed=False)
        graded(book, "cy", passed=True)  # graded, but the LMS has not been tied to cy
        dry = push(assignment, book, LtiTarget(config, book), dry_run=True)
        assert [c.student_id for c in dry.sent] == ["ann"] and platform.scores == [] and dry.unlinked == ["cy"]
        report = push(assignment, book, LtiTarget(config, book))
        assert [(s["userId"], s["scoreGiven"]) for s in platform.scores] == [("lti-ann", report.sent[0].score)]
        assert len(platform.line_items) == 1 and platform.line_items[0]["resourceId"] == "mini"
        push(assignment, book, LtiTarget(config, book))  # nothing changed: nothing sent
        assert len(platform.scores) == 1
        graded(book, "ann", passed=True)  # a regrade that changes the grade
        push(assignment, book, LtiTarget(config, book))
        assert len(platform.scores) == 2 and platform.scores[1]["scoreGiven"] > platform.scores[0]["scoreGiven"]
        assert len(platform.line_items) == 1  # the line item found again, never a second one
        book2 = Gradebook(course.gradebook_path(None))
        book2.set_line_item(platform.issuer, "mini", "")  # even with the gradebook's copy lost
        graded(book2, "ann", passed=False)
        push(assignment, book2, LtiTarget(config, book2))
        assert len(platform.line_items) == 1 and len(platform.scores) == 3
        book2.close()
        log = list(book.passback_log(platform.issuer, "mini"))
        assert [row[3] for row in log] == ["sent", "sent", "sent"]


def test_a_failed_passback_is_retried_and_recorded(course, platform):
    assignment = Assignment.load(course, "mini")
    config = lms_config.load(course.root)
    with book_of(course) as book:
        book.link_lms_user(platform.issuer, "lti-ann", "ann")
        graded(book, "ann", passed=True)
        platform.fail_scores = 2  # two failures, then the third try goes through
        report = push(assignment, book, LtiTarget(config, book), sleep=lambda s: None)
        assert len(report.sent) == 1 and len(platform.scores) == 1
        platform.fail_scores = 10  # the LMS is down: recorded as failed, tried again at the next push
        graded(book, "ann", passed=False)
        report = push(assignment, book, LtiTarget(config, book), sleep=lambda s: None)
        assert len(report.failed) == 1 and "HTTP 500" in report.failed[0][1] and len(platform.scores) == 1
        platform.fail_scores = 0
        report = push(assignment, book, LtiTarget(config, book), sleep=lambda s: None)
        assert len(report.sent) == 1 and len(platform.scores) == 2
        assert [row[3] for row in book.passback_log(platform.issuer, "mini")] == ["sent", "failed", "sent"]


def test_the_tool_key_that_is_not_registered_is_refused_by_the_platform(course, platform):
    platform.tool_jwks = public_jwks(new_key())  # registered with another key
    assignment = Assignment.load(course, "mini")
    config = lms_config.load(course.root)
    with book_of(course) as book:
        book.link_lms_user(platform.issuer, "lti-ann", "ann")
        graded(book, "ann", passed=True)
        report = push(assignment, book, LtiTarget(config, book), sleep=lambda s: None)
        assert "refused the tool's token request" in report.failed[0][1] and platform.scores == []


# ------------------------------------------------------------------ the roster from the LMS
def test_roster_sync_over_nrps_keeps_extensions_and_sections_and_says_who_joined_and_left(course, platform):
    with book_of(course) as book:
        book.import_roster([{"id": "bob", "name": "Bob", "email": "bob@uni.edu", "section": "B",
                             "extension_days": 2.0},
                            {"id": "zed", "name": "Zed", "email": "zed@uni.edu"}])
        members, where, match = lms_members(lms_config.load(course.root), book)
        report = sync(book, members, where, match)
        assert (report.joined, report.left, report.kept) == (["ann"], ["zed"], 1)  # tia is staff: not on it
        roster = {entry.id: entry for entry in book.roster()}
        assert sorted(roster) == ["ann", "bob"] and roster["bob"].section == "B"
        assert book.extensions_for_every_assignment()["bob"].extra_s == 2 * 86400
        assert book.lms_users(platform.issuer) == {"ann": "lti-ann", "bob": "lti-bob"}


def test_roster_sync_and_grades_through_canvas_rest_respect_its_rate_limit(course, platform):
    config = lms_config.load(course.root)
    assignment = Assignment.load(course, "mini")
    with book_of(course) as book:
        platform.canvas_rate_limited = 2
        result = CliRunner().invoke(main, ["--course", str(course.root), "roster", "sync", "--via", "canvas"])
        assert result.exit_code == 0, result.output
        assert "joined: ann, bob, cy" in result.output
        graded(book, "bob", passed=True)
        platform.canvas_rate_limited = 1
        target = CanvasTarget(config)
        target.api._sleep = lambda s: None
        report = push(assignment, book, target)
        assert platform.canvas_grades == [{"user": "12", "assignment": "501", "grade": f"{report.sent[0].score:g}"}]
        assert target.api.waited_s > 0  # it waited for the bucket, then went through


def test_the_commands_send_all_or_one_with_a_dry_run(course, platform):
    with book_of(course) as book:
        book.link_lms_user(platform.issuer, "lti-ann", "ann")
        book.link_lms_user(platform.issuer, "lti-bob", "bob")
        graded(book, "ann", passed=True)
        graded(book, "bob", passed=False)
    run = CliRunner().invoke(main, ["--course", str(course.root), "lms", "push", "mini", "--dry-run"])
    assert run.exit_code == 0 and "would send: ann: nothing ->" in run.output and platform.scores == []
    run = CliRunner().invoke(main, ["--course", str(course.root), "lms", "push", "mini", "--student", "bob"])
    assert run.exit_code == 0 and [s["userId"] for s in platform.scores] == ["lti-bob"]
    run = CliRunner().invoke(main, ["--course", str(course.root), "lms", "push", "mini"])
    assert "1 sent, 0 failed, 1 unchanged" in run.output and len(platform.scores) == 2


def test_a_misconfigured_lms_is_one_line(tmp_path: Path):
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__", ".grade"))
    run = CliRunner().invoke(main, ["--course", str(root), "lms", "push", "mini"])
    assert run.exit_code == 2 and "has no [lms] table" in run.output and "Traceback" not in run.output
    (root / "course.toml").write_text('[lms]\nissuer = "x"\ndeployment_ids = "one"\n')
    with pytest.raises(LmsError, match="deployment_ids must be a non-empty list"):
        lms_config.load(root)
