"""The server's pages (Starlette, server-rendered Jinja2 templates from templates/serve/) and its start.

Students: a sign-in link staff issued (`grade serve-link`) sets a session cookie; the home page lists the
assignments; an assignment's page takes an upload (CSRF-checked, within intake's limits and the course's
rate limit, which it shows before it is reached), lists the student's earlier uploads and which one counts;
a job's page shows its place in the queue and the estimated wait and follows its status live (server-sent
events); its report is the one `grade submit` writes, rendered from the gradebook's record. A student
reaches only their own jobs: another's id in a URL answers 404, as a job that does not exist. Staff see
both queues, regrade a student, an assignment or everyone, and read the class report and the CSV export
from the same gradebook. Every error is a page with one line of what to do, never a traceback.

Nothing is computed in the templates: each page's facts are made here as plain values.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from grader.core.assignment import Assignment
from grader.core.compat import UTC, parse_iso
from grader.core.course import ENGINE_ROOT, Course
from grader.core.errors import GraderError
from grader.core.settings import ServeSettings
from grader.core.student_ids import is_student_id
from grader.core.text import one_line
from grader.serve.auth import Session, Signer
from grader.serve.queue import ServerBook
from grader.serve.runner import Runner, submitted_now
from grader.serve.tiers import leaderboard, timing_tasks
from grader.serve.uploads import MAX_PARTS, MAX_UPLOAD_BYTES, pack, read_upload
from grader.storage.gradebook import JobRecord

COOKIE = "grade_session"
PAGES = ENGINE_ROOT / "templates" / "serve"
EVENT_POLL_S = 0.5  # how often a status stream looks at its job
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'; "
                                           "base-uri 'none'",
                "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
REPORT_HEADERS = {**PAGE_HEADERS, "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                                             "img-src data:; frame-ancestors 'none'"}
STATIC = {"serve.css": "text/css", "status.js": "text/javascript"}
TIERS = ("cpu", "gpu")
FINISHED = ("done", "failed", "superseded")  # a job's states that do not change any more (until a regrade)
NEXT_PAGE = re.compile(r"/(a/[A-Za-z0-9_-]{1,64}|jobs/[0-9]{1,12}(/report)?|staff)")  # where a sign-in link may lead


class PageError(Exception):
    """A request the server refuses: the status and one line for the page."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ServerState:
    """What the pages read: the course, its served assignments, the gradebook, the signer, the runners."""

    course: Course
    assignments: dict[str, Assignment]
    store: ServerBook
    signer: Signer
    settings: ServeSettings
    runners: dict[str, Runner] = field(default_factory=dict)  # tier → its runner ("gpu" only with a GPU worker)
    spool: Path = Path(".")
    alias_key: bytes = b""  # keys the leaderboard's aliases (the signing key: stable, secret)
    lms: object = None  # grader.lms.config.LmsConfig, when course.toml links the course to an LMS


# ------------------------------------------------------------------ words and facts the pages show
def minutes_text(seconds: float) -> str:
    """An estimated wait in words: 'under a minute', 'about 3 minutes'."""
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    return f"about {minutes} minute{'s' if minutes != 1 else ''}"


def when_text(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    moment = parse_iso(value) if isinstance(value, str) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def job_status(state: ServerState, job: JobRecord) -> dict:
    """A job's status as the page and its event stream show it (JSON-able)."""
    slots = state.runners[job.tier].slots if job.tier in state.runners else 1
    place = state.store.place(job, slots)
    report = f"/jobs/{job.id}/report" if job.state == "done" else None
    if job.state == "queued":
        ahead = "you are next" if place.ahead == 0 else \
            f"{place.ahead} submission{'s' if place.ahead != 1 else ''} ahead of yours"
        text = f"Queued: {ahead}; estimated wait {minutes_text(place.wait_s or 0)}."
    elif job.state == "running":
        text = "Being graded now" + (f" (attempt {job.attempts}: its grading worker stopped before)."
                                     if job.attempts > 1 else ".")
    elif job.state == "done":
        text = "Graded: your report is ready."
    elif job.state == "superseded":
        text = "Not timed: a newer submission of yours was queued for timing in its place."
    else:
        text = f"Not graded: {one_line(job.error or 'the grader could not grade it', 400)}"
    return {"id": job.id, "state": job.state, "ahead": place.ahead, "wait_s": place.wait_s, "text": text,
            "report": report}


def hidden_until(assignment: Assignment, now: datetime | None = None) -> datetime | None:
    """The deadline before which a student's report is withheld (the assignment's [gradescope] hidden_tests
    setting: anything but "visible" withholds hidden-test results until the deadline); None: shown now."""
    deadline = assignment.manifest.deadline
    if assignment.manifest.gradescope.hidden_tests == "visible" or deadline is None:
        return None
    return deadline if (now or datetime.now(UTC)) < deadline else None


# ------------------------------------------------------------------ the app
def create_app(state: ServerState) -> Starlette:
    """The Starlette application over `state` (the runners are started and stopped by the caller)."""
    env = Environment(loader=FileSystemLoader(str(PAGES)), autoescape=select_autoescape(["html", "j2"]))

    def page(request: Request, template: str, title: str, status: int = 200, **values) -> HTMLResponse:
        session = getattr(request.state, "session", None)
        html = env.get_template(template).render(title=title, session=session, course=state.course.root.name,
                                                 **values)
        return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)

    def signed_in(request: Request, staff: bool = False) -> Session:
        session = state.signer.open_session(request.cookies.get(COOKIE))
        if session is None:
            raise PageError(401, "You are not signed in, or your session has expired: open the sign-in link your "
                                 "course staff sent you.")
        if staff and not session.staff:
            raise PageError(404, "There is no such page.")
        request.state.session = session
        return session

    async def form_of(request: Request, session: Session, **limits):
        form = await request.form(**limits)
        if not session.form_ok(form.get("csrf")):
            raise PageError(403, "This form has expired or did not come from this site: reload the page and try "
                                 "again.")
        return form

    def served(assignment_id: str) -> Assignment:
        assignment = state.assignments.get(assignment_id)
        if assignment is None:
            raise PageError(404, "There is no such assignment on this server.")
        return assignment

    def own_job(session: Session, job_id: str) -> JobRecord:
        job = state.store.call(lambda book: book.job(int(job_id))) if job_id.isdigit() and len(job_id) < 18 \
            else None
        if job is None or (job.student_id != session.user and not session.staff):
            raise PageError(404, "There is no such submission among yours.")
        return job

    # -------------------------------------------------------------- pages
    def home(request: Request) -> Response:
        session = state.signer.open_session(request.cookies.get(COOKIE))
        if session is None:
            return page(request, "signin.html.j2", "Sign in")
        request.state.session = session
        rows = []
        for assignment in state.assignments.values():
            rate = state.store.rate(session.user, assignment.id, state.settings)
            rows.append({"id": assignment.id, "title": assignment.manifest.title,
                         "deadline": when_text(assignment.manifest.deadline),
                         "uploads": f"{rate.left} of {rate.allowed} left"})
        return page(request, "home.html.j2", "Your assignments", assignments=rows)

    def sign_in(request: Request) -> Response:
        token = request.query_params.get("token", "")
        opened = state.signer.open_link(token) if len(token) < 2000 else None
        if opened is None:
            raise PageError(403, "This sign-in link is not valid or has expired: ask your course staff for a new "
                                 "one.")
        current = state.signer.open_session(request.cookies.get(COOKIE))
        if current is not None and (current.user, current.role) != opened:  # no silent switch of account
            request.state.session = current
            raise PageError(409, f"You are signed in as {current.user}: sign out first (the button at the top), "
                                 f"then open the link again.")
        wanted = request.query_params.get("next", "")
        target = wanted if NEXT_PAGE.fullmatch(wanted) else "/staff" if opened[1] == "staff" else "/"
        response = RedirectResponse(target, status_code=303,
                                    headers={"Referrer-Policy": "no-referrer"})
        response.set_cookie(COOKIE, state.signer.session_cookie(*opened), max_age=state.signer.session_s,
                            httponly=True, samesite="lax", secure=request.url.scheme == "https")
        return response

    async def sign_out(request: Request) -> Response:
        session = signed_in(request)
        await form_of(request, session)
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    def assignment_page(request: Request) -> Response:
        session = signed_in(request)
        assignment = served(request.path_params["assignment"])
        return page(request, "assignment.html.j2", assignment.manifest.title,
                    **state_of_assignment(state, assignment, session.user))

    async def upload(request: Request) -> Response:
        session = signed_in(request)
        assignment = served(request.path_params["assignment"])
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            raise PageError(411, "The upload did not say its size: upload it again from the assignment's page.")
        if int(length) > MAX_UPLOAD_BYTES + 64 * 1024:
            raise PageError(413, f"The upload is larger than {MAX_UPLOAD_BYTES // 2**20} MiB: remove what the "
                                 f"assignment does not need (data, checkpoints) and upload again.")
        form = await form_of(request, session, max_files=MAX_PARTS + 1, max_fields=10)
        parts = []
        try:
            for item in form.getlist("files"):
                if hasattr(item, "read") and item.filename:
                    parts.append((item.filename, await item.read()))
        finally:
            await form.close()  # the parts' temporary files
        job_id = await run_in_threadpool(queue_upload, state, assignment, session.user, parts)
        return RedirectResponse(f"/jobs/{job_id}", status_code=303)

    def job_page(request: Request) -> Response:
        session = signed_in(request)
        job = own_job(session, request.path_params["job"])
        assignment = state.assignments.get(job.assignment_id)
        return page(request, "job.html.j2", f"Submission {job.id}", job=job, live=job_status(state, job),
                    assignment_title=assignment.manifest.title if assignment else job.assignment_id,
                    uploaded=when_text(job.submitted_at))

    async def job_events(request: Request) -> Response:
        session = signed_in(request)
        job = own_job(session, request.path_params["job"])

        async def stream():
            last = None
            while True:
                current = await run_in_threadpool(state.store.call, lambda book: book.job(job.id))
                status = await run_in_threadpool(job_status, state, current)
                if status != last:
                    yield f"event: status\ndata: {json.dumps(status)}\n\n"
                    last = status
                if current.state in FINISHED or await request.is_disconnected():
                    return
                await asyncio.sleep(EVENT_POLL_S)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    def job_report(request: Request) -> Response:
        session = signed_in(request)
        job = own_job(session, request.path_params["job"])
        assignment = served(job.assignment_id)
        if job.state != "done":
            raise PageError(404, "This submission has no report yet: its page shows where it stands.")
        withheld = hidden_until(assignment)
        if withheld is not None and not session.staff:
            return page(request, "withheld.html.j2", "Report after the deadline", deadline=when_text(withheld))
        record = state.store.call(lambda book: next(
            (r for r in book.submissions(job.assignment_id, job.student_id) if r.sha256 == job.sha256), None))
        if record is None:
            raise PageError(404, "This submission's grading is not in the gradebook any more.")
        from grader.render.report import render_html

        return HTMLResponse(render_html(record.result, state.course.templates_dir), headers=REPORT_HEADERS)

    def leaderboard_page(request: Request) -> Response:
        session = signed_in(request)
        assignment = served(request.path_params["assignment"])
        if not timing_tasks(assignment.manifest):
            raise PageError(404, "This assignment has no timed kernels, so no leaderboard.")
        latest = state.store.call(lambda book: book.latest(assignment.id))
        rows = [{"rank": row.rank, "who": f"{row.alias} (you)" if row.own else row.alias,
                 "speedup": f"{row.speedup:.2f}×", "tests": row.tests}
                for row in leaderboard({s: r.result for s, r in latest.items()}, state.alias_key, session.user)]
        return page(request, "leaderboard.html.j2", f"{assignment.manifest.title}: leaderboard", rows=rows,
                    assignment_id=assignment.id, gpu="gpu" in state.runners)

    # -------------------------------------------------------------- staff
    def staff_page(request: Request) -> Response:
        signed_in(request, staff=True)
        queues = []
        for tier in TIERS:
            counts = state.store.call(lambda book, t=tier: book.job_counts(t))
            waiting = state.store.call(lambda book, t=tier: book.jobs(tier=t, states=("queued", "running")))
            queues.append({"tier": tier, "worker": tier in state.runners,
                           "counts": ", ".join(f"{counts.get(s, 0)} {s}" for s in ("queued", "running", "done",
                                                                                    "failed")),
                           "jobs": [{"id": j.id, "student": j.student_id, "assignment": j.assignment_id,
                                     "state": j.state, "attempts": j.attempts, "reason": j.reason,
                                     "uploaded": when_text(j.submitted_at)} for j in waiting[:200]]})
        queued = request.query_params.get("queued")
        return page(request, "staff.html.j2", "Course staff", queues=queues, assignments=list(state.assignments),
                    message=f"{int(queued)} submission(s) queued for regrading." if (queued or "").isdigit()
                    else "")

    async def regrade(request: Request) -> Response:
        session = signed_in(request, staff=True)
        form = await form_of(request, session)
        which = str(form.get("assignment") or "")
        student = str(form.get("student") or "").strip() or None
        if which != "*":
            served(which)
        if student is not None and not is_student_id(student):
            raise PageError(400, "That is not a student id: leave it empty to regrade everyone.")
        count = await run_in_threadpool(state.store.call, lambda book: book.regrade_jobs(
            None if which == "*" else which, student, reason="regraded by staff"))
        state.store.notify()
        return RedirectResponse(f"/staff?queued={count}", status_code=303)

    def class_report(request: Request) -> Response:
        signed_in(request, staff=True)
        assignment = served(request.path_params["assignment"])
        from grader.render.class_report import class_view_model, render_class_report

        html = state.store.call(lambda book: render_class_report(
            class_view_model(assignment, book, everyone=True), state.course.templates_dir))
        return HTMLResponse(html, headers=REPORT_HEADERS)

    def class_export(request: Request) -> Response:
        signed_in(request, staff=True)
        assignment = served(request.path_params["assignment"])
        from grader.render.exports import export_table

        text = state.store.call(lambda book: export_table(assignment, book, "csv", None, True))
        return Response(text, media_type="text/csv", headers={
            **PAGE_HEADERS, "Content-Disposition": f'attachment; filename="{assignment.id}-grades.csv"'})

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            raise PageError(404, "There is no such page.")
        return Response((PAGES / name).read_bytes(), media_type=STATIC[name],
                        headers={"X-Content-Type-Options": "nosniff"})

    def health(_request: Request) -> Response:
        return PlainTextResponse("ok")

    # -------------------------------------------------------------- errors: a page, never a traceback
    def error_page(request: Request, status: int, message: str) -> Response:
        try:
            return page(request, "error.html.j2", "Something went wrong" if status >= 500 else "Not possible",
                        status=status, message=message)
        except Exception:
            return PlainTextResponse(message, status_code=status, headers=PAGE_HEADERS)

    async def on_page_error(request: Request, exc: PageError) -> Response:
        return error_page(request, exc.status, exc.message)

    async def on_http_error(request: Request, exc: HTTPException) -> Response:
        words = {404: "There is no such page.", 405: "This page cannot be used that way: go back and use its "
                                                     "links and buttons."}
        return error_page(request, exc.status_code, words.get(exc.status_code, "The request was not understood: "
                                                                               "go back and try again."))

    async def on_grader_error(request: Request, exc: GraderError) -> Response:
        return error_page(request, 400, one_line(str(exc), 600))

    async def on_any_error(request: Request, exc: Exception) -> Response:
        print(f"grade serve: error on {request.method} {request.url.path}: {type(exc).__name__}", file=sys.stderr)
        return error_page(request, 500, "The server could not do this; nothing you submitted was lost. Try "
                                        "again in a minute, and tell your course staff if it keeps happening.")

    routes = [
        Route("/", home), Route("/signin", sign_in), Route("/signout", sign_out, methods=["POST"]),
        Route("/a/{assignment}", assignment_page), Route("/a/{assignment}/upload", upload, methods=["POST"]),
        Route("/a/{assignment}/leaderboard", leaderboard_page),
        Route("/jobs/{job}", job_page), Route("/jobs/{job}/events", job_events),
        Route("/jobs/{job}/report", job_report),
        Route("/staff", staff_page), Route("/staff/regrade", regrade, methods=["POST"]),
        Route("/staff/report/{assignment}", class_report), Route("/staff/export/{assignment}", class_export),
        Route("/static/{name}", static), Route("/healthz", health),
    ]
    if state.lms is not None and state.lms.lti is not None:  # the LTI 1.3 launch as sign-in
        from grader.serve.lti_routes import lti_routes

        routes += lti_routes(state, PageError, COOKIE)
    return Starlette(routes=routes, exception_handlers={
        PageError: on_page_error, HTTPException: on_http_error, GraderError: on_grader_error,
        Exception: on_any_error, 500: on_any_error})


def queue_upload(state: ServerState, assignment: Assignment, student: str, parts: list[tuple[str, bytes]]) -> int:
    """Read an upload through intake and queue it (the same files again: the job they already are); its job's id.
    PageError for what intake refuses and for a student over the rate limit."""
    try:
        upload = pack(parts)
        now = submitted_now()
        submission = read_upload(assignment, state.spool, upload, student, parse_iso(now))
    except GraderError as exc:
        raise PageError(400, f"This upload cannot be graded: {one_line(str(exc), 600)}") from exc
    settings = state.settings
    since = (parse_iso(now) - timedelta(minutes=settings.window_minutes)).isoformat(timespec="microseconds")
    job, _created = state.store.call(lambda book: book.enqueue_job(
        student, assignment.id, submission.sha256, upload.name, upload.data, now,
        limit=(settings.uploads_per_window, since)))
    if job is None:  # the same files again are their job; new ones count against the limit
        rate = state.store.rate(student, assignment.id, settings)
        raise PageError(429, f"You have used all {rate.allowed} uploads of the last {rate.window_minutes} minutes "
                             f"for this assignment: the next is possible at {when_text(rate.next_free)}.")
    state.store.notify()
    return job.id


def state_of_assignment(state: ServerState, assignment: Assignment, student: str) -> dict:
    """What a student's assignment page shows: deadline, rate limit, uploads and which counts, speed."""
    rate = state.store.rate(student, assignment.id, state.settings)
    jobs = state.store.call(lambda book: book.jobs(assignment_id=assignment.id, student_id=student, tier="cpu"))
    counting = state.store.call(lambda book: book.latest_for(assignment.id, student))
    graded = {r.sha256: r for r in state.store.call(lambda book: book.submissions(assignment.id, student))}
    withheld = hidden_until(assignment)
    rows = []
    for job in reversed(jobs):
        record = graded.get(job.sha256) if job.state == "done" else None
        score = "withheld until the deadline" if record is not None and withheld is not None else \
            f"{record.total:g} / {record.max_points:g}" if record is not None else "—"
        rows.append({"id": job.id, "uploaded": when_text(job.submitted_at), "state": job.state, "score": score,
                     "counts": counting is not None and counting.sha256 == job.sha256})
    if rate.left:
        rate_text = (f"You have used {rate.used} of your {rate.allowed} uploads for the last "
                     f"{rate.window_minutes} minutes: {rate.left} left.")
    else:
        rate_text = (f"You have used all {rate.allowed} uploads for the last {rate.window_minutes} minutes: the "
                     f"next is possible at {when_text(rate.next_free)}.")
    speed_text = timing_text(state, assignment, student)
    return {"assignment_id": assignment.id, "deadline": when_text(assignment.manifest.deadline),
            "rate_text": rate_text, "can_upload": rate.left > 0, "rows": rows, "speed_text": speed_text,
            "withheld": when_text(withheld) if withheld else "", "max_mib": MAX_UPLOAD_BYTES // 2**20,
            "max_files": MAX_PARTS, "leaderboard": bool(timing_tasks(assignment.manifest))}


def timing_text(state: ServerState, assignment: Assignment, student: str) -> str:
    """Where the student's speed points stand, in words ('' for an assignment without timing tasks)."""
    if not timing_tasks(assignment.manifest):
        return ""
    if "gpu" not in state.runners:
        return ("Speed points stay pending: this server has no GPU worker, so your kernels are timed by the course "
                "staff on a GPU after the deadline.")
    timings = state.store.call(lambda book: book.jobs(assignment_id=assignment.id, student_id=student, tier="gpu"))
    quota = f"at most {state.settings.gpu_timings_per_day} timings a day"
    if not timings:
        return f"Speed points: your latest submission whose kernel tasks all pass is timed on a GPU ({quota})."
    latest = timings[-1]
    words = {"queued": f"queued for timing on the GPU ({job_status(state, latest)['text'].removeprefix('Queued: ')})",
             "running": "being timed on the GPU now", "done": "timed on the GPU: its speed points count",
             "failed": f"not timed: {one_line(latest.error or '', 300)}",
             "superseded": "replaced by a newer submission"}
    return f"GPU timing of your submission {latest.id}: {words.get(latest.state, latest.state)} ({quota})."
