"""The LTI 1.3 launch as sign-in to the course server (grader.lms.lti checks it), and grades sent back to
the LMS when a grading changes a student's grade (grader.lms.passback), for a course whose course.toml
has an [lms] table.

`/lti/login` answers the platform's OIDC login initiation: the browser gets the login's state in a
cookie of its own and goes to the platform, which posts the signed id_token to `/lti/launch`; a checked
launch becomes the same session a sign-in link gives (a student by their roster id, staff by an id made
from the LMS user), and opens the assignment the link names. Every refusal is a clean page."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from grader.core.assignment import Assignment
from grader.core.errors import LaunchRefused, LmsError
from grader.lms.config import LmsConfig
from grader.lms.lti import PlatformKeys, check_launch, login_redirect
from grader.lms.passback import push, target_for
from grader.storage.gradebook import Gradebook

STATE_COOKIE = "grade_lti_state"
MAX_FIELD = 16_000  # an id_token is a few kilobytes


def staff_user(lms_user_id: str) -> str:
    """The session id of a staff member signed in by the LMS (a valid id, stable for the same LMS user)."""
    return "lti-" + hashlib.sha256(lms_user_id.encode()).hexdigest()[:12]


def lti_routes(state, refuse: Callable[[int, str], Exception], session_cookie: str) -> list[Route]:
    """The two routes of the launch, over the server's `state` (its store, signer, assignments and `lms`).
    `refuse(status, message)` makes the server's clean error page; `session_cookie` is its session's name."""
    config: LmsConfig = state.lms
    keys = PlatformKeys(config.lti.keyset_url)

    async def params_of(request: Request) -> dict[str, str]:
        values = dict(request.query_params)
        if request.method == "POST":
            form = await request.form(max_files=0, max_fields=20)
            values.update({k: v for k, v in form.items() if isinstance(v, str)})
        return {k: v for k, v in values.items() if len(v) <= MAX_FIELD}

    async def login(request: Request) -> Response:
        params = await params_of(request)
        try:
            redirect = state.store.call(lambda book: login_redirect(config.lti, params, book))
        except LaunchRefused as exc:
            raise refuse(403, f"This sign-in from the LMS was refused: {exc}.") from exc
        response = RedirectResponse(redirect.url, status_code=302, headers={"Referrer-Policy": "no-referrer"})
        secure = request.url.scheme == "https"  # the platform posts back from another site: SameSite=None
        response.set_cookie(STATE_COOKIE, redirect.state, max_age=600, httponly=True,
                            samesite="none" if secure else "lax", secure=secure)
        return response

    async def launch(request: Request) -> Response:
        params = await params_of(request)
        try:
            launched = state.store.call(lambda book: check_launch(
                config.lti, keys, book, params.get("id_token", ""), params.get("state", ""),
                request.cookies.get(STATE_COOKIE, ""), tuple(state.assignments)))
        except LaunchRefused as exc:
            raise refuse(403, f"This launch from the LMS was refused: {exc}.") from exc
        except LmsError as exc:
            raise refuse(502, f"The LMS could not be asked about this launch: {exc}. Try again in a minute.") from exc
        user = launched.student_id if launched.role == "student" else staff_user(launched.lms_user_id)
        target = (f"/a/{launched.assignment_id}" if launched.assignment_id
                  else "/staff" if launched.role == "staff" else "/")
        response = RedirectResponse(target, status_code=303, headers={"Referrer-Policy": "no-referrer"})
        response.set_cookie(session_cookie, state.signer.session_cookie(user, launched.role),
                            max_age=state.signer.session_s, httponly=True, samesite="lax",
                            secure=request.url.scheme == "https")
        response.delete_cookie(STATE_COOKIE)
        return response

    return [Route("/lti/login", login, methods=["GET", "POST"]), Route("/lti/launch", launch, methods=["POST"])]


class Passback:
    """Sends a student's grade to the LMS after a grading is recorded, when it changed (push sends only a
    grade that differs from what the LMS holds, and records every try). One thread, so the LMS's speed
    never holds up grading; its own connection to the gradebook."""

    def __init__(self, config: LmsConfig, gradebook_path, assignments: dict[str, Assignment]):
        self.config = config
        self.gradebook_path = gradebook_path
        self.assignments = assignments
        self._queue: list[tuple[str, str]] = []
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="lms-passback", daemon=True)
        self._thread.start()

    def graded(self, assignment_id: str, student: str) -> None:
        with self._wake:
            self._queue.append((assignment_id, student))
            self._wake.notify()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._stopped:
                    self._wake.wait()
                if self._stopped and not self._queue:
                    return
                assignment_id, student = self._queue.pop(0)
            try:
                with Gradebook(self.gradebook_path) as book:
                    push(self.assignments[assignment_id], book, target_for(self.config, book), student=student)
            except LmsError:
                pass  # not linked to an LMS user yet, or the LMS is down: recorded by push; the next push retries
            except Exception as exc:  # noqa: BLE001 - the server keeps serving whatever the LMS does
                import sys

                print(f"grade serve: passback of {student}'s {assignment_id}: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
