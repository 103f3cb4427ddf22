"""`grade roster sync`: the roster filled from the LMS's member list (NRPS over LTI 1.3, or Canvas's
REST API). Learners become roster rows, their roster id taken as course.toml's [lms].match says (the
SIS id, the login or the email); extensions and sections already recorded are kept; who joined and
who left is reported. Someone who left is taken off the roster, never out of the gradebook."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.core.errors import InvalidStudentId
from grader.core.student_ids import check_student_id
from grader.lms.services import Member
from grader.storage.gradebook import Gradebook


@dataclass
class SyncReport:
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    kept: int = 0
    skipped: list[str] = field(default_factory=list)  # members that could not be tied to a roster id, and why

    def lines(self) -> list[str]:
        lines = [f"joined: {', '.join(self.joined)}" if self.joined else "joined: nobody",
                 f"left (taken off the roster, their grades kept): {', '.join(self.left)}" if self.left
                 else "left: nobody"]
        lines += [f"skipped: {why}" for why in self.skipped]
        lines.append(f"{len(self.joined)} joined, {len(self.left)} left, {self.kept} unchanged, "
                     f"{len(self.skipped)} skipped")
        return lines


def roster_id(member: Member, match: str) -> str:
    return {"sis": member.sis_id, "login": member.login, "email": member.email}[match]


def sync(book: Gradebook, members: list[Member], platform: str, match: str) -> SyncReport:
    """Make the roster the LMS's active learners (see the module docstring)."""
    report = SyncReport()
    before = {entry.id for entry in book.roster()}
    rows, links = [], []
    for member in members:
        if not member.learner or not member.active:
            continue
        student = roster_id(member, match).strip()
        label = member.name or member.email or member.lms_user_id
        if not student:
            report.skipped.append(f"{label}: the LMS sends no {match} for them")
            continue
        try:
            check_student_id(student, f"the LMS's {match} of {label}", fix="set [lms].match to sis, login or email")
        except InvalidStudentId as exc:
            report.skipped.append(str(exc))
            continue
        rows.append({"id": student, "name": member.name or None, "email": member.email or None})
        links.append((member.lms_user_id, student))
    now = {row["id"] for row in rows}
    book.import_roster(rows)  # no extension_days or section key: both are kept as they are
    for lms_user_id, student in links:
        book.link_lms_user(platform, lms_user_id, student)
    report.joined = sorted(now - before)
    report.left = sorted(before - now)
    report.kept = len(now & before)
    if report.left:
        book.unroster(report.left)
    return report


def lms_members(config, book: Gradebook, via: str | None = None) -> tuple[list[Member], str, str]:
    """(the LMS's member list, the platform key, the match rule), through NRPS where LTI is set up,
    else (or with `via` "canvas") Canvas's REST API."""
    from grader.core.errors import LmsError
    from grader.lms.canvas import CanvasApi
    from grader.lms.services import PlatformServices

    via = via or ("lti" if config.lti is not None else "canvas")
    if via == "lti":
        if config.lti is None:
            raise LmsError("course.toml [lms] has no LTI 1.3 settings (issuer, client_id, ...)")
        url = config.lti.memberships_url or book.lms_endpoint(config.lti.issuer, "memberships")
        if not url:
            raise LmsError("no memberships URL yet: set [lms].memberships_url, or launch the tool from the LMS once")
        return PlatformServices(config.lti).members(url), config.lti.issuer, config.lti.match
    if config.canvas is None:
        raise LmsError("course.toml has no [lms.canvas] table")
    platform = config.platform if config.lti is None else f"canvas:{config.canvas.base_url}"
    return CanvasApi(config.canvas).members(), platform, config.lti.match if config.lti else "sis"
