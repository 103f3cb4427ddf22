"""Grade a class on a Ray cluster: `grade batch ... --executor ray [--address auto|HOST:PORT]`.

The same Executor as the local process pool (grader.pipeline.executor: submit,
restart, slots, shutdown), so the batch engine (grader/pipeline/batch.py) plans,
skips, records, shows progress and recovers exactly as it does on one machine.
What differs, and why:

- **Long-lived actors, one job at a time each.** A `GradingActor` is a Ray actor
  that imports torch, pytest and the assignment's reference once, when it
  starts; at the no-namespace level its sandbox workers fork from the actor's
  own template worker (grader.sandbox.template.Zygote), which imported torch once.
  The executor keeps the queue on the driver and hands an actor its next job
  only when it is idle, so a job never waits inside Ray behind another one and
  "in flight" means the same as in a local pool.
- **Resources.** An assignment with a timing task, on a cluster with GPUs, gets
  one GPU per actor (`num_gpus=1`): Ray gives each actor a GPU of its own
  (CUDA_VISIBLE_DEVICES), so one timing runs per GPU at a time. Every other
  assignment (and a timing assignment on a cluster without GPUs, whose timing
  points are then pending, as on a CPU-only machine) uses one CPU slot per
  actor, and that actor sees no GPU. Actors: `jobs`, else one per slot the
  cluster has.
- **Submissions travel as data.** The driver reads each submission with the
  intake's caps (grader/intake/submission.py) and ships the Submission; the
  actor never reads the submissions folder. The GradeResult comes back as a
  dict. Only the course has to be on every node (see docs/RAY.md): each actor
  builds the assignment from its node's copy of the course (with the driver's
  sandbox switches) and reports what grades there, before it gets a job: the
  grading fingerprint (grader.core.fingerprint), the course's settings, the
  grader's code and the report templates, and its node's sandbox level; a node
  that differs, or whose sandbox is below the course's requirement, stops the
  batch before anyone is graded on it.
- **The driver writes everything.** The gradebook is written by the batch's
  recorder alone, as always. A report is rendered by the actor (its figures are
  a fair share of a submission's cost, so rendering scales with the cluster)
  and comes back as text beside the result; the driver writes it, whole, where
  the local pool would have: nodes need no write access to the course's
  `.grade/`, a report can never be left half-written by an actor that died,
  and nothing a node holds can overwrite another student's report. The
  templates are part of what the fingerprint compares, so the page is the one
  the driver would have rendered.
- **An actor that dies is a broken executor.** Its job's future fails with
  ExecutorBroken, so the batch does what it does for a local pool: the jobs
  in flight run again one at a time, and only a job that kills its actor while
  running alone is charged (twice, then recorded as that student's error).
  `restart()` ends the actors still busy with jobs the batch gave up (so a job
  run "alone" really is alone) and replaces them and the dead ones. Ray itself
  never restarts an actor or retries a task (`max_restarts=0`,
  `max_task_retries=0`): retrying is the batch's decision.
- **Ending an actor leaves nothing.** `ray.kill` skips every exit hook, so an
  actor idle or still starting is first asked to close its sandbox templates;
  then it is killed, and for an actor on the driver's machine (a dead one too)
  whatever it left in its temporary folder is removed once its process is gone
  (grader.sandbox.scratch: each folder is named after the process that made it).
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import parse_iso
from grader.core.course import Course
from grader.core.errors import GraderError, SandboxRefused
from grader.core.files import tree_digest, tree_files, write_atomic
from grader.core.manifest import Manifest
from grader.core.text import one_line
from grader.intake.submission import Submission, load_submission
from grader.pipeline.executor import ExecutorBroken
from grader.pipeline.jobs import GradingJob, JobResult, describe_failure, run_job, warm_process
from grader.sandbox import scratch
from grader.sandbox.isolation import SandboxSwitches
from grader.sandbox.template import Zygote

RAY_EXTRA = 'pip install -e ".[ray]"'
START_TIMEOUT_S = 600.0  # for the first actor: imports, and on an autoscaling cluster a new node
START_GRACE_S = 60.0  # once one actor is ready, how long the others may take before they are given up
POLL_S = 0.2  # how often the collector looks for jobs handed over while it waited
CLOSE_TIMEOUT_S = 10.0  # an actor's time to close its templates, then to be gone once killed


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise GraderError(f"--executor ray needs Ray, which is not installed here: {RAY_EXTRA} "
                          f"(or pip install ray)") from exc
    return ray


def needs_gpu(manifest: Manifest) -> bool:
    """Whether the assignment's grading wants a GPU of its own (it has a timing task)."""
    return manifest.has_timing_task


# ----------------------------------------------------------------------- what a node must hold
def node_digests(assignment: Assignment) -> dict[str, str]:
    """What must be the same on the driver and on every node, by part: `grader` (the grader's own Python
    files), `course` (what grades the assignment: its grading fingerprint and the course's settings) and
    `templates` (the report templates the course uses)."""
    import grader

    settings = assignment.course.root / "course.toml"
    code = Path(grader.__file__).resolve().parent
    return {"grader": tree_digest(tree_files(code), "grader"),
            "course": tree_digest({"course.toml": settings} if settings.is_file() else {},
                                  f"grading {assignment.fingerprint}\n"),
            "templates": tree_digest(tree_files(assignment.course.templates_dir), "templates")}


PART_NAMES = {"grader": "grader code (install the same commit of the grader there)",
              "course": "copy of the course (its manifest, hidden tests, reference, kernels or course.toml; "
                        "copy the course there again)",
              "templates": "set of report templates (copy the course, or install the grader, there again)"}


def _ray_paths() -> tuple[str, ...]:
    """Ray's files on this node (session folders, the cluster's token): no sandbox worker may read them."""
    temp = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
    found = [Path(temp) / "ray", Path.home() / ".ray"]
    return tuple(str(p) for p in found if p.exists())


# ------------------------------------------------------------------------------------ the actor
class GradingActor:
    """One long-lived grading process on a Ray node (wrapped with ray.remote by RayExecutor).

    It builds the assignment from its node's copy of the course, once (this process's edge:
    without a GPU Triton is switched to its interpreter before anything imports it), and
    imports torch, pytest and the reference once; each job it grades still gets a fresh
    sandbox worker (grade() starts one), so students never share a worker."""

    def __init__(self, course_root: str, assignment_id: str, use_gpu: bool, switches: SandboxSwitches):
        if not use_gpu:  # a CPU slot: never touch a GPU that Ray gave another actor
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            os.environ.setdefault("TRITON_INTERPRET", "1")
        self.course_root = course_root
        self.problem = ""
        self.assignment: Assignment | None = None
        try:
            self.assignment = Assignment.load(Course(Path(course_root)), assignment_id, switches)
        except Exception as exc:  # reported by describe(): the driver stops the batch with it
            self.problem = describe_failure(exc)
        self.protected = _ray_paths()
        warm_process(self.assignment)

    def run(self, job: GradingJob, submission: Submission, render_report: bool) -> JobResult:
        """What the actor runs per job (a subclass may run something else around it)."""
        return run_job(job, submission, render_report=render_report)

    def describe(self) -> dict:
        """This node as the driver checks it: what grades here and the sandbox level here."""
        from grader.pipeline.policy import host_isolation, refusal

        node = socket.gethostname()
        here = {"node": node, "pid": os.getpid(), "temp": tempfile.gettempdir()}  # where its folders are
        if self.assignment is None:
            return {**here, "problem": f"node {node}: the course at {self.course_root} cannot grade "
                                       f"({self.problem})"}
        try:
            settings = self.assignment.settings.sandbox
            isolation = host_isolation(settings.uid_range, self.assignment.switches)
            return {**here, "fingerprint": node_digests(self.assignment),
                    "level": isolation.level, "refusal": refusal(isolation, settings)}
        except Exception as exc:  # reported to the driver, which stops the batch with it
            return {**here, "problem": f"node {node}: {describe_failure(exc)}"}

    def close(self) -> None:
        """Close this actor's sandbox templates: the driver asks before it ends the actor (ray.kill skips
        every exit hook)."""
        Zygote.close_all()

    def grade(self, job: GradingJob, submission: Submission, with_report: bool) -> JobResult:
        """The job's result and, when `with_report`, the student's HTML report as text (the driver writes it)."""
        return self.run(job.on(self.assignment, self.protected), submission, with_report)


# --------------------------------------------------------------------------------- the executor
class ActorDied(ExecutorBroken):
    """The actor grading a job died (or its node did): the batch treats it as a broken executor."""


@dataclass
class _Slot:
    """One actor and the job it is grading, if any."""

    handle: object
    node: str = ""
    pid: int | None = None  # the actor's process on its node, and its temporary folder there
    temp: str = ""
    job: GradingJob | None = None
    ref: object = None  # the ObjectRef of the job's JobResult
    future: Future | None = None
    dead: bool = False


@dataclass
class _Queued:
    job: GradingJob
    submission: Submission
    future: Future


class RayExecutor:
    """Grading actors on a Ray cluster, fed one job at a time each from a queue on the driver.

    `address`: None starts a Ray instance on this machine (one slot per CPU, or
    `jobs`); "auto" joins the cluster this machine belongs to; "HOST:PORT" (or
    "ray://HOST:10001") joins that one. A Ray already initialised in this process
    is used as it is. `node_course_root`: where the course folder is on the nodes
    (default: the same path as here). `jobs`: actors (default: one per CPU slot,
    or per GPU for a timing assignment on a cluster with GPUs)."""

    actor = GradingActor  #: the actor class each slot runs

    def __init__(self, jobs: int | None = None, *, assignment: Assignment, address: str | None = None,
                 node_course_root: str | None = None, allow_weak_sandbox: bool = False,
                 use_gpu: bool | None = None):
        self.ray = _import_ray()
        self.assignment = assignment
        self.node_course_root = node_course_root or str(assignment.course.root.resolve())
        self.allow_weak_sandbox = allow_weak_sandbox
        self.manifest: Manifest = assignment.manifest
        self.expected = node_digests(assignment)
        self._owns_ray = False
        self._connect(address, jobs)
        resources = self.ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        self.use_gpu = (needs_gpu(self.manifest) and gpus > 0) if use_gpu is None else use_gpu
        if self.use_gpu and gpus < 1:
            raise GraderError("the Ray cluster has no GPU, and this executor was asked for one per actor")
        slots = gpus if self.use_gpu else int(resources.get("CPU", 1))
        self.jobs = max(1, int(jobs) if jobs else slots)
        self.nodes: set[str] = set()  # the nodes whose actors passed the check
        self._slots: list[_Slot] = []
        self._queue: deque[_Queued] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._collector: threading.Thread | None = None
        self._started = False

    # ------------------------------------------------------------------ connection and actors
    def _connect(self, address: str | None, jobs: int | None) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        try:
            if address is None:
                ray.init(num_cpus=int(jobs) if jobs else os.cpu_count() or 1, include_dashboard=False, **quiet)
            else:
                ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            where = "a Ray instance on this machine" if address is None else f"the Ray cluster at {address}"
            raise GraderError(f"could not start or reach {where}: {one_line(str(exc), 300)}") from exc
        self._owns_ray = True

    @property
    def slots(self) -> int:
        return self.jobs

    def _actor_class(self):
        options = {"num_cpus": 1, "num_gpus": 1 if self.use_gpu else 0, "max_restarts": 0,
                   "max_task_retries": 0, "scheduling_strategy": "SPREAD"}
        return self.ray.remote(self.actor).options(**options)

    def _check(self, report: dict) -> str:
        """The node's name when its actor may grade; GraderError (or SandboxRefused) when not."""
        node = report.get("node", "?")
        if report.get("problem"):
            raise GraderError(f"{report['problem']}; see docs/RAY.md for what a node needs")
        differ = [PART_NAMES[part] for part, digest in self.expected.items()
                  if report.get("fingerprint", {}).get(part) != digest]
        if differ:
            raise GraderError(f"node {node} holds a different {' and a different '.join(differ)} than this "
                              f"machine, so it would grade differently (docs/RAY.md)")
        if report.get("refusal") and not self.allow_weak_sandbox:
            raise SandboxRefused(f"node {node}: {report['refusal']}")
        return node

    def _add_actors(self, count: int) -> None:
        """Start `count` actors and wait until they are ready and checked (some may be given up)."""
        ray = self.ray
        cls = self._actor_class()
        # The driver's sandbox switches apply on every node (each can only weaken or rehearse a level,
        # and every node's level is still checked against the course's requirement).
        handles = [cls.remote(self.node_course_root, self.assignment.id, self.use_gpu, self.assignment.switches)
                   for _ in range(count)]
        waiting = {h.describe.remote(): h for h in handles}
        ready: list[_Slot] = []
        reported: list[_Slot] = []  # every actor that answered, ready or not: ended as a slot if given up
        started = time.monotonic()
        first_ready: float | None = None
        try:
            while waiting:
                now = time.monotonic()
                limit = START_TIMEOUT_S if first_ready is None else START_GRACE_S
                left = (first_ready or started) + limit - now
                if left <= 0:
                    break
                done, _ = ray.wait(list(waiting), num_returns=1, timeout=min(left, 5.0))
                for ref in done:
                    handle = waiting.pop(ref)
                    try:
                        report = ray.get(ref)
                    except self.ray.exceptions.RayError as exc:
                        raise GraderError(f"a grading actor could not start on the Ray cluster (is the grader "
                                          f"installed on every node?): {one_line(str(exc), 400)}") from exc
                    slot = _Slot(handle, report.get("node", ""), report.get("pid"), report.get("temp", ""))
                    reported.append(slot)
                    node = self._check(report)
                    self.nodes.add(node)
                    ready.append(slot)
                    first_ready = first_ready or time.monotonic()
        except BaseException:  # every actor started here ends, closing its templates (one still starting too)
            answered = {id(slot.handle) for slot in reported}
            self._end_actors(reported + [_Slot(handle) for handle in handles if id(handle) not in answered])
            raise
        for handle in waiting.values():  # no room for them on the cluster (yet): given up
            self._kill(handle)
        if not ready and not any(not s.dead for s in self._slots):
            resource = "a GPU" if self.use_gpu else "a CPU"
            raise GraderError(f"no grading actor started on the Ray cluster within {START_TIMEOUT_S:g} s: "
                              f"each needs {resource} slot; is the cluster up and does it have room?")
        with self._lock:
            self._slots.extend(ready)

    def _end_actors(self, slots: list[_Slot]) -> None:
        """End these actors (dead ones included): an idle one, or one still starting, first closes its
        sandbox templates, since ray.kill skips every exit hook; then each live one is killed, and what
        one on this machine left in its temporary folder is removed once its process is gone
        (grader.sandbox.scratch)."""
        idle = [slot for slot in slots if not slot.dead and slot.job is None]
        if idle:
            try:
                self.ray.wait([slot.handle.close.remote() for slot in idle], num_returns=len(idle),
                              timeout=CLOSE_TIMEOUT_S)
            except Exception:  # an actor that cannot close is killed all the same
                pass
        for slot in slots:
            if not slot.dead:
                self._kill(slot.handle)
        here = socket.gethostname()
        for slot in slots:
            if slot.pid is not None and slot.node == here and scratch.gone(slot.pid, CLOSE_TIMEOUT_S):
                scratch.remove_left_by(slot.pid, slot.temp)

    def _kill(self, handle) -> None:
        try:
            self.ray.kill(handle, no_restart=True)
        except Exception:  # already gone
            pass

    def _start(self) -> None:
        if self._started:
            return
        self._add_actors(self.jobs)
        self.jobs = len(self._slots)  # those the cluster had room for: restarts replace up to this many
        self._started = True
        self._collector = threading.Thread(target=self._collect, name="ray-collector", daemon=True)
        self._collector.start()

    # ------------------------------------------------------------------------------ the jobs
    def submit(self, job: GradingJob) -> Future[JobResult]:
        self._start()
        future: Future[JobResult] = Future()
        try:  # the files travel as data, read here within the intake's caps
            submission = load_submission(job.path, self.manifest.files, student=job.student,
                                         submitted_at=parse_iso(job.submitted_at) if job.submitted_at else None)
        except Exception as exc:  # changed since the batch hashed it: that student's error, as in run_job
            future.set_result(JobResult(job.student, error=describe_failure(exc)))
            return future
        with self._lock:
            self._queue.append(_Queued(job, submission, future))
            self._dispatch()
        self._wake.set()
        return future

    def _dispatch(self) -> None:
        """Hand queued jobs to idle actors (the lock is held)."""
        for slot in self._slots:
            if not self._queue:
                return
            if slot.dead or slot.job is not None:
                continue
            queued = self._queue.popleft()
            queued.future.set_running_or_notify_cancel()
            slot.job, slot.future = queued.job, queued.future
            slot.ref = slot.handle.grade.remote(queued.job, queued.submission, bool(queued.job.report_path))

    def _collect(self) -> None:
        """The collector thread: every finished job's result (and report), and the next job for its actor."""
        ray = self.ray
        while not self._stop.is_set():
            with self._lock:
                running = {s.ref: s for s in self._slots if s.ref is not None}
            if not running:
                self._wake.wait(POLL_S)
                self._wake.clear()
                continue
            done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            for ref in done:
                slot = running[ref]
                future = slot.future
                try:
                    self._finish(slot, ref)
                except Exception as exc:  # never leave the batch waiting on a future nobody will settle
                    if future is not None and not future.done():
                        future.set_exception(RuntimeError(f"the Ray executor failed: {describe_failure(exc)}"))

    def _finish(self, slot: _Slot, ref) -> None:
        ray = self.ray
        deaths = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                  ray.exceptions.OutOfMemoryError, ray.exceptions.LocalRayletDiedError,
                  ray.exceptions.ObjectLostError)
        with self._lock:
            if slot.ref is not ref:  # given up by restart() meanwhile
                return
            job, future = slot.job, slot.future
        outcome: JobResult | None = None
        failure: BaseException | None = None
        try:
            outcome = ray.get(ref)
        except deaths as exc:
            failure = ActorDied(f"the grading actor on {slot.node} died while grading {job.student}: "
                                f"{one_line(str(exc), 300)}")
        except Exception as exc:  # an executor failure, recorded as this student's error by the batch
            failure = RuntimeError(f"Ray could not run the job: {one_line(str(exc), 300)}")
        if outcome is not None and outcome.report_html is not None and job.report_path:
            outcome = self._write_report(job, outcome)
        with self._lock:
            if slot.ref is not ref:
                return
            slot.job, slot.ref, slot.future = None, None, None
            slot.dead = isinstance(failure, ActorDied)
            self._dispatch()
        if future.done():  # settled by restart() or shutdown() meanwhile
            return
        if failure is not None:
            future.set_exception(failure)
        else:
            future.set_result(outcome)

    def _write_report(self, job: GradingJob, outcome: JobResult) -> JobResult:
        """Write the report the actor rendered, whole."""
        try:
            write_atomic(job.report_path, outcome.report_html)
            return outcome
        except Exception as exc:  # as run_job: a report that cannot be written makes the job an error
            return JobResult(job.student, error=describe_failure(exc), worker_s=outcome.worker_s)

    # --------------------------------------------------------------------------- recovery
    def restart(self) -> None:
        """After an actor died: the batch gave up every job in flight and runs them again one at a time.

        The queue is dropped, the actors still busy with given-up jobs are ended, and they
        and the dead ones are replaced (ready and checked before this returns)."""
        if not self._started:
            return  # nothing started yet: the next job starts the actors
        given_up: list[Future] = []
        with self._lock:
            given_up += [q.future for q in self._queue]
            self._queue.clear()
            keep, ending = [], []
            for slot in self._slots:
                if slot.job is None and not slot.dead:
                    keep.append(slot)
                    continue
                if slot.future is not None:
                    given_up.append(slot.future)
                ending.append(replace(slot))  # as it stands, for _end_actors once the lock is released
                slot.job, slot.ref, slot.future, slot.dead = None, None, None, True
            self._slots = keep
        self._end_actors(ending)
        for future in given_up:
            if not future.done():
                future.set_exception(ExecutorBroken("given up after a grading actor died"))
        missing = self.jobs - len(keep)
        if missing > 0:
            self._add_actors(missing)

    def shutdown(self, cancel: bool = False) -> None:
        """End every actor (and with it its sandbox workers); `cancel`: without waiting for the jobs handed
        over. A Ray instance this executor started is stopped; one it joined is left running."""
        if not cancel:
            with self._lock:
                handed = [q.future for q in self._queue] + [s.future for s in self._slots if s.future is not None]
            wait(handed)
        self._stop.set()
        self._wake.set()
        if self._collector is not None:
            self._collector.join(timeout=30)
            self._collector = None
        with self._lock:
            pending = [q.future for q in self._queue] + [s.future for s in self._slots if s.future is not None]
            self._queue.clear()
            ending, self._slots = self._slots, []
        self._end_actors(ending)
        for future in pending:
            if not future.cancel() and not future.done():  # a running one cannot be cancelled: it fails
                future.set_exception(ExecutorBroken("the executor was shut down"))
        self._started = False
        self._stop.clear()
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False
