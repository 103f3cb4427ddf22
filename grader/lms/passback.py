"""Grades back to the LMS: each linked student's grade as it stands (render/standing: the late policy
with their extension, then overrides) is sent when, and only when, it differs from the last score the
LMS accepted; each try is recorded in the gradebook (what, when, the outcome), a failed one is tried
again (a few times now, and at the next push), and a dry run lists what would be sent.

Two targets: the platform's Assignment and Grade Services over LTI 1.3 (a line item per assignment,
created once and found again by its resourceId, never duplicated), and Canvas's REST API."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from grader.core.assignment import Assignment
from grader.core.errors import LmsError
from grader.lms.canvas import CanvasApi
from grader.lms.config import LmsConfig
from grader.lms.services import PlatformServices
from grader.render.standing import standings
from grader.storage.gradebook import Gradebook

TRIES = 3  # tries of one score within a push (a failure is tried again at the next push too)


class ScoreTarget(Protocol):
    platform: str

    def send(self, assignment: Assignment, lms_user_id: str, score: float, maximum: float) -> None: ...


class LtiTarget:
    """Scores through the platform's AGS: the assignment's line item found (the gradebook's, else the
    platform's by resourceId) or created once."""

    def __init__(self, config: LmsConfig, book: Gradebook, services: PlatformServices | None = None):
        if config.lti is None:
            raise LmsError("course.toml [lms] has no LTI 1.3 settings (issuer, client_id, ...)")
        self.config = config.lti
        self.platform = config.lti.issuer
        self.book = book
        self.services = services or PlatformServices(config.lti)

    def line_item(self, assignment: Assignment) -> str:
        known = self.book.line_item(self.platform, assignment.id)
        if known:
            return known
        lineitems = self.config.lineitems_url or self.book.lms_endpoint(self.platform, "lineitems")
        if not lineitems:
            raise LmsError("no line items URL yet: set [lms].lineitems_url, or launch the tool from the LMS once")
        url = self.services.find_line_item(lineitems, assignment.id) or self.services.create_line_item(
            lineitems, assignment.id, assignment.manifest.title, assignment.manifest.max_points)
        self.book.set_line_item(self.platform, assignment.id, url)
        return url

    def send(self, assignment: Assignment, lms_user_id: str, score: float, maximum: float) -> None:
        self.services.send_score(self.line_item(assignment), lms_user_id, score, maximum)


class CanvasTarget:
    def __init__(self, config: LmsConfig, api: CanvasApi | None = None):
        if config.canvas is None:
            raise LmsError("course.toml has no [lms.canvas] table")
        self.platform = config.platform if config.lti is None else f"canvas:{config.canvas.base_url}"
        self.api = api or CanvasApi(config.canvas)

    def send(self, assignment: Assignment, lms_user_id: str, score: float, maximum: float) -> None:
        self.api.send_score(assignment.id, lms_user_id, score)


@dataclass(frozen=True)
class Change:
    student_id: str
    lms_user_id: str
    score: float
    maximum: float
    last_sent: float | None  # what the LMS holds now (None: nothing yet)

    def describe(self) -> str:
        was = "nothing" if self.last_sent is None else f"{self.last_sent:.2f}"
        return f"{self.student_id}: {was} -> {self.score:.2f} of {self.maximum:.2f}"


@dataclass
class PushReport:
    sent: list[Change] = field(default_factory=list)
    failed: list[tuple[Change, str]] = field(default_factory=list)
    unchanged: int = 0
    unlinked: list[str] = field(default_factory=list)  # graded students the LMS has not been tied to yet

    def lines(self, dry_run: bool) -> list[str]:
        verb = "would send" if dry_run else "sent"
        lines = [f"{verb}: {change.describe()}" for change in self.sent]
        lines += [f"failed: {change.describe()} ({why}); the next push tries again" for change, why in self.failed]
        lines.append(f"{len(self.sent)} {verb}, {len(self.failed)} failed, {self.unchanged} unchanged"
                     + (f", {len(self.unlinked)} not linked to an LMS user ({', '.join(self.unlinked)})"
                        if self.unlinked else ""))
        return lines


def pending(assignment: Assignment, book: Gradebook, platform: str, student: str | None = None) -> tuple[
        list[Change], int, list[str]]:
    """(the changes to send, how many are unchanged, the graded students without an LMS user)."""
    linked = book.lms_users(platform)
    sent = book.last_sent(platform, assignment.id)
    changes, unchanged, unlinked = [], 0, []
    for student_id, standing in sorted(standings(assignment.manifest, book).items()):
        if student is not None and student_id != student:
            continue
        if student_id not in linked:
            unlinked.append(student_id)
            continue
        score, maximum = round(standing.total, 2), round(standing.score.max_points, 2)
        last = sent.get(student_id)
        if last is not None and round(last.score, 2) == score and round(last.maximum, 2) == maximum:
            unchanged += 1
            continue
        changes.append(Change(student_id, linked[student_id], score, maximum, last.score if last else None))
    return changes, unchanged, unlinked


def push(assignment: Assignment, book: Gradebook, target: ScoreTarget, *, dry_run: bool = False,
         student: str | None = None, sleep: Callable[[float], None] = time.sleep) -> PushReport:
    """Send every changed grade of the assignment (or one student's) to `target`, recording each try."""
    changes, unchanged, unlinked = pending(assignment, book, target.platform, student)
    report = PushReport(unchanged=unchanged, unlinked=unlinked)
    if student is not None and not changes and not unchanged:
        raise LmsError(f"{student} has no graded submission of {assignment.id} linked to an LMS user")
    for change in changes:
        if dry_run:
            report.sent.append(change)
            continue
        why = ""
        for attempt in range(TRIES):
            try:
                target.send(assignment, change.lms_user_id, change.score, change.maximum)
                why = ""
                break
            except LmsError as exc:
                why = str(exc)
                if attempt + 1 < TRIES:
                    sleep(0.5 * 2 ** attempt)
        book.record_passback(target.platform, assignment.id, change.student_id, change.score, change.maximum,
                             "failed" if why else "sent", why)
        if why:
            report.failed.append((change, why))
        else:
            report.sent.append(change)
    return report


def target_for(config: LmsConfig, book: Gradebook, via: str | None = None) -> ScoreTarget:
    """The course's passback target: LTI's AGS where LTI is set up, else Canvas's REST API (`via`
    "lti" or "canvas" chooses)."""
    via = via or ("lti" if config.lti is not None else "canvas")
    return LtiTarget(config, book) if via == "lti" else CanvasTarget(config)
