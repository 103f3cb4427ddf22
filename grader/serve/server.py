"""Starting the course server: the course's assignments, its gradebook, the executor, the runner, uvicorn.

`open_server` builds everything a server holds (and queues again whatever a server before it left running);
`serve` runs it on HOST:PORT until it is stopped, then ends the runner and its executor. The grading
workers never read the gradebook or the server's folder (its key, its uploads): both are protected paths
of every job.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import UTC
from grader.core.course import Course
from grader.core.errors import GraderError
from grader.core.records import GradeResult
from grader.core.settings import load_settings
from grader.lms.config import load_optional as load_lms
from grader.serve.app import ServerState, create_app
from grader.serve.auth import Signer, serve_dir, signing_key
from grader.serve.queue import ServerBook
from grader.serve.runner import Runner
from grader.serve.tiers import timing_tasks, wants_timing
from grader.storage.gradebook import JobRecord

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@dataclass
class Server:
    """A course server's parts: its state (what the pages read) and its application."""

    state: ServerState
    app: object
    passback: object = None  # grader.serve.lti_routes.Passback, when the course is linked to an LMS

    def start(self) -> None:
        for runner in self.state.runners.values():
            runner.start()

    def stop(self) -> None:
        for runner in self.state.runners.values():
            runner.stop(cancel=True)
        if self.passback is not None:
            self.passback.stop()
        self.state.store.close()


def signer_for(course: Course) -> Signer:
    """The course's signer: its key under the state folder, its [serve] lifetimes."""
    settings = load_settings(course.root).serve
    return Signer(signing_key(course.state_dir), settings.link_hours, settings.session_hours)


def sign_in_link(course: Course, user: str, role: str = "student", base_url: str | None = None) -> str:
    """A sign-in link for `user` as `role` (its token alone without `base_url`)."""
    token = signer_for(course).link_token(user, role)
    return f"{base_url.rstrip('/')}/signin?token={token}" if base_url else token


def open_server(course: Course, *, gradebook_path: Path, executor_kind: str | None = None, jobs: int | None = None,
                address: str | None = None, allow_weak_sandbox: bool = False,
                assignment_ids: list[str] | None = None) -> Server:
    """Everything a server holds for `course` (see the module docstring); the runner is not started yet."""
    from grader.pipeline.policy import require_sandbox

    ids = assignment_ids or course.assignment_ids()
    if not ids:
        raise GraderError(f"{course.root} has no assignments to serve")
    if executor_kind == "ray" and len(ids) > 1:  # a Ray executor's nodes read one assignment's manifest
        raise GraderError(f"with --executor ray a server serves one assignment: pass --assignment ID (one of "
                          f"{', '.join(ids)}), and start one server per assignment")
    assignments = {i: Assignment.load(course, i) for i in ids}
    first = next(iter(assignments.values()))
    if not allow_weak_sandbox and executor_kind in (None, "local"):
        require_sandbox(first)
    settings = load_settings(course.root).serve
    store = ServerBook(gradebook_path)
    store.call(lambda book: book.release_running_jobs())  # a server starting: nothing runs yet
    spool = serve_dir(course.state_dir) / "spool"
    shutil.rmtree(spool, ignore_errors=True)  # what a server killed mid-job left: its jobs are queued again
    key = signing_key(course.state_dir)
    signer = Signer(key, settings.link_hours, settings.session_hours)
    executors = make_executors(executor_kind, jobs, first, address, allow_weak_sandbox)
    protected = (str(Path(gradebook_path).resolve()), str(serve_dir(course.state_dir).resolve()))
    runners: dict[str, Runner] = {}
    lms = load_lms(course.root)
    state = ServerState(course, assignments, store, signer, settings, runners=runners, spool=spool, alias_key=key,
                        lms=lms)
    passback = None
    if lms is not None:
        from grader.serve.lti_routes import Passback

        passback = Passback(lms, Path(gradebook_path), assignments)

    def after_grading(job: JobRecord, assignment: Assignment, result: GradeResult) -> None:
        if "gpu" in executors:
            queue_timing(state, job, assignment, result)
        if passback is not None:  # the grade back to the LMS, when it changed
            passback.graded(assignment.id, job.student_id)

    for tier, executor in executors.items():
        runners[tier] = Runner(store, executor, assignments, spool, protected=protected, tier=tier,
                               allow_weak_sandbox=allow_weak_sandbox,
                               after_grading=after_grading if tier == "cpu" and ("gpu" in executors or lms) else None)
    return Server(state, create_app(state), passback)


def make_executors(kind: str | None, jobs: int | None, assignment: Assignment, address: str | None,
                   allow_weak_sandbox: bool) -> dict:
    """tier → its executor. The local pool grades the CPU tier (as `grade submit` grades on this machine).
    On Ray, CPU actors grade every upload and, when the cluster has GPUs and the assignment timing tasks,
    one actor holding one GPU times the kernels that passed, one job at a time."""
    from grader.pipeline.batch import executor_choice, make_executor

    if executor_choice(kind, address) != "ray":
        return {"cpu": make_executor(kind, jobs, assignment, allow_weak_sandbox=allow_weak_sandbox)}
    from grader.pipeline.ray_executor import RayExecutor

    cpu = RayExecutor(jobs, assignment=assignment, address=address, allow_weak_sandbox=allow_weak_sandbox,
                      use_gpu=False)
    executors = {"cpu": cpu}
    if timing_tasks(assignment.manifest) and int(cpu.ray.cluster_resources().get("GPU", 0)) > 0:
        executors["gpu"] = RayExecutor(1, assignment=assignment, address=address,
                                       allow_weak_sandbox=allow_weak_sandbox, use_gpu=True)
    return executors


def queue_timing(state: ServerState, job: JobRecord, assignment: Assignment, result: GradeResult) -> None:
    """After a CPU grading: its files queued for GPU timing when its kernel tasks pass (tiers.wants_timing),
    within the student's GPU quota, superseding their timing still queued."""
    if job.tier != "cpu" or not wants_timing(assignment.manifest, result):
        return
    now = datetime.now(UTC)
    since = (now - timedelta(days=1)).isoformat(timespec="microseconds")
    state.store.call(lambda book: book.enqueue_timing(job.id, now.isoformat(timespec="microseconds"),
                                                      quota=state.settings.gpu_timings_per_day, since=since))
    state.store.notify()


def serve(server: Server, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          ready: object = None) -> None:
    """Run `server` on host:port until stopped (Ctrl-C, SIGTERM); `ready(url)` is called once it listens."""
    import uvicorn

    config = uvicorn.Config(server.app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=3, lifespan="off")
    web = uvicorn.Server(config)
    server.start()
    if ready is not None:
        original = web.startup

        async def startup(sockets=None):
            await original(sockets)
            bound = web.servers[0].sockets[0].getsockname() if web.servers else (host, port)
            ready(f"http://{bound[0]}:{bound[1]}")

        web.startup = startup
    try:
        web.run()
    finally:
        server.stop()
