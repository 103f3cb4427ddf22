"""One submission, end to end: manifest → submission → static checks →
sandboxed suite → quiz → score. Returns a GradeResult; writes nothing.

Storage (gradebook) and rendering (results.json, HTML) are the caller's
next steps, so `grade check` can run the same pipeline without recording.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import torch

from grader import __version__
from grader.core.compat import UTC
from grader.core.course import Course
from grader.core.errors import GraderError, SandboxFailed, SandboxRefused, UnknownTask
from grader.core.fingerprint import grading_fingerprint
from grader.core.manifest import Manifest, load_manifest
from grader.core.quiz import ANSWERS_FILE, answered_outcome, grade_quiz, load_key, load_questions
from grader.core.records import GradeResult, StaticFinding, TestOutcome
from grader.core.scoring import score
from grader.core.settings import CourseSettings, load_settings
from grader.harness.diagnose import load_reference
from grader.harness.runners import SandboxRunner
from grader.harness.suite import run_suite
from grader.harness.testing import GradingContext
from grader.harness.timing import environment
from grader.intake.kernels import kernel_module
from grader.intake.static_checks import check_sources
from grader.intake.submission import Submission, load_submission
from grader.pipeline.policy import OVERRIDE_FLAG, refusal
from grader.sandbox.client import Sandbox, SandboxUnavailable

MODES = ("check", "submit")



def _static_outcomes(manifest: Manifest, submission: Submission) -> tuple[list[StaticFinding], list[str]]:
    """Static findings over every submitted .py file (helpers the task files import included)."""
    sources = {name: submission.text(name) or "" for name in submission.files if name.endswith(".py")}
    others = tuple(name for name in submission.files if not name.endswith(".py"))
    findings, problems = check_sources(manifest, sources, others)
    notes = [f"{p.filename}: syntax error: {p.message}" for p in problems]
    return findings, notes


def _quiz_outcomes(course: Course, manifest: Manifest, submission: Submission) -> list[TestOutcome]:
    quiz_tasks = [t for t in manifest.tasks if t.kind == "quiz"]
    if not quiz_tasks:
        return []
    questions_path = course.assignment_dir(manifest.id) / "quiz.toml"
    key_path = course.reference_for(manifest.id) / "quiz_key.toml"
    if not questions_path.is_file() or not key_path.is_file():
        return [TestOutcome(name="quiz", task=quiz_tasks[0].id, status="pending", kind="not_run",
                            message="the quiz key is not available here", visibility="visible")]
    return grade_quiz(load_questions(questions_path), load_key(key_path),
                      submission.text(ANSWERS_FILE), quiz_tasks[0].id)


def _quiz_answered(course: Course, manifest: Manifest, submission: Submission) -> list[TestOutcome]:
    """`grade check`'s quiz line: pending (no key here), with how many questions are answered."""
    quiz_tasks = [t for t in manifest.tasks if t.kind == "quiz"]
    questions_path = course.assignment_dir(manifest.id) / "quiz.toml"
    if not quiz_tasks or not questions_path.is_file():
        return []
    return [answered_outcome(load_questions(questions_path), submission.text(ANSWERS_FILE), quiz_tasks[0].id)]


def open_submission(course: Course, assignment_id: str, workspace: str | Path | None = None, *,
                    student: str | None = None,
                    submitted_at: datetime | None = None) -> Submission:
    """The submission at `workspace` (default: the assignment's own folder, i.e. the stubs)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    workspace = Path(workspace) if workspace else course.assignment_dir(assignment_id)
    return load_submission(workspace, manifest.files, student=student, submitted_at=submitted_at)


def _kernel_sandbox(course: Course, manifest: Manifest, submission: Submission, sandbox: Sandbox, use_gpu: bool,
                    settings: CourseSettings, protected: tuple[str, ...]) -> Sandbox | None:
    """The worker of a kernel contract: the student's vetted kernels and the course's launchers, and
    nothing else of the student's (grader.intake.kernels), within the submission's own budget."""
    contract = manifest.contract
    if contract is None:
        return None
    kernels = kernel_module(contract.file, submission.text(contract.file) or "", contract.kernels)
    launchers = (course.assignment_dir(manifest.id) / contract.module).read_bytes()
    return Sandbox({contract.file: kernels.source.encode(), contract.module: launchers}, [contract.module],
                   limits=manifest.limits, use_gpu=use_gpu, uid_range=settings.sandbox.uid_range,
                   protected=(str(course.root), *protected), deadline=sandbox.deadline)


TIMING_DEVICES = ("auto", "cuda", "cpu")


def resolve_timing_device(choice: str, use_gpu: bool) -> str | None:
    """Where timing tests run: 'cuda', 'cpu', or None (pending)."""
    if choice not in TIMING_DEVICES:
        raise GraderError(f"timing device must be one of {', '.join(TIMING_DEVICES)}, not {choice!r}")
    if choice == "auto":
        return "cuda" if use_gpu else None
    if choice == "cuda" and not use_gpu:
        raise GraderError("--timing-device cuda needs a CUDA GPU, and there is none here")
    return choice


def _sandbox_gate(isolation, settings: CourseSettings, mode: str, allow_weak: bool) -> str | None:
    """None, or the note that records a weak sandbox; raises SandboxRefused for an official grade."""
    reason = refusal(isolation, settings.sandbox)
    if reason is None or mode != "submit":
        return None
    if not allow_weak:
        raise SandboxRefused(reason)
    return (f"graded with {OVERRIDE_FLAG}: the sandbox was {isolation.level}, below the course's "
            f"requirement ({settings.sandbox.required_text()})")


def grade(course: Course, assignment_id: str, submission: Submission, *,
          mode: str = "submit", only_task: str | None = None, seed: int | None = None,
          use_gpu: bool | None = None, allow_weak_sandbox: bool = False,
          protected: tuple[str, ...] = (), timing_device: str = "auto",
          deadline: datetime | None = None, extension: timedelta | None = None,
          closes_at: datetime | None = None, progress: Callable[[str], None] | None = None) -> GradeResult:
    """Grade one submission. Raises GraderError only when grading is impossible.

    `progress` is told each step as it starts (for a terminal's progress line). The result
    carries the fingerprint of what graded it (grader.core.fingerprint), for stale grades.

    `deadline`, `extension` and `closes_at` go to the late policy (grader.core.scoring.score):
    a hosted grader's due date instead of the manifest's, this student's extra time, and when
    its late window closed.

    An official grade (mode "submit") needs a sandbox level the course requires
    (grader.pipeline.policy): SandboxRefused otherwise, unless `allow_weak_sandbox`, which
    the result records. `protected` adds paths the worker must not read (a
    gradebook outside the course, say); the course root always is. `timing_device`:
    "auto" (the GPU when there is one, else timing tests are pending), "cuda", or
    "cpu" (tests and demonstrations: the report marks the points as CPU-timed)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    started = time.perf_counter()
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    if only_task is not None and not manifest.has_task(only_task):
        raise UnknownTask(f"{assignment_id} has no task {only_task!r} "
                          f"(tasks: {', '.join(t.id for t in manifest.tasks)})")
    step = progress or (lambda _step: None)
    fingerprint = grading_fingerprint(course, assignment_id) if mode == "submit" else ""
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
    use_gpu = torch.cuda.is_available() if use_gpu is None else use_gpu
    timed_on = resolve_timing_device(timing_device, use_gpu)
    if not use_gpu:  # the reference's Triton kernels run here too: through the interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    settings = load_settings(course.root)
    sandbox = Sandbox(submission.files, list(manifest.files), limits=manifest.limits, use_gpu=use_gpu,
                      uid_range=settings.sandbox.uid_range, protected=(str(course.root), *protected))
    kernels = _kernel_sandbox(course, manifest, submission, sandbox, use_gpu, settings, protected)
    try:
        _sandbox_gate(sandbox.isolation, settings, mode, allow_weak_sandbox)  # refuse before any work
        step("starting the sandbox; static checks")
        sandbox.start()  # the worker imports torch while we run the static checks
        if kernels is not None:
            kernels.start()
        findings, notes = _static_outcomes(manifest, submission)
        try:
            confirmed = sandbox.wait_ready()
        except SandboxUnavailable as exc:
            raise SandboxFailed(str(exc)) from exc
        weak = _sandbox_gate(confirmed, settings, mode, allow_weak_sandbox)
        notes += [weak] if weak else []
        if mode == "submit":
            reference, mutants = load_reference(course.root, manifest)
            tests_dir = course.reference_for(assignment_id) / "tests"
            visibility = "hidden"
        else:
            reference, mutants = {}, []
            tests_dir = course.assignment_dir(assignment_id) / "tests"
            visibility = "visible"
        context = GradingContext(runner=SandboxRunner(sandbox), manifest=manifest,
                                 reference=reference, mutants=mutants, seed=seed,
                                 device="cuda" if use_gpu else "cpu", hidden=mode == "submit",
                                 timing_device=timed_on,
                                 kernel_runner=SandboxRunner(kernels) if kernels is not None else None)
        step("running the hidden tests" if mode == "submit" else "running the public tests")
        outcomes, errors = run_suite(tests_dir, context, visibility=visibility, only_task=only_task)
        notes += [f"test collection problem: {e}" for e in errors]
        if mode == "submit" and only_task in (None, "quiz"):
            outcomes += _quiz_outcomes(course, manifest, submission)
        elif mode == "check" and (only_task is None or manifest.task(only_task).kind == "quiz"):
            outcomes += _quiz_answered(course, manifest, submission)
        student_output = "".join(sandbox.output_log + (kernels.output_log if kernels else []))[-16000:]
        isolation = sandbox.isolation
    finally:
        sandbox.close()
        if kernels is not None:
            kernels.close()
    step("scoring")
    scored = manifest
    if only_task is not None:  # `grade check --task X`: X alone, its points the whole
        findings = [f for f in findings if f.task == only_task]
        scored = replace(manifest, tasks=(manifest.task(only_task),))
    result_score = score(scored, outcomes, findings, submission.submitted_at, deadline=deadline,
                         extension=extension, closes_at=closes_at)
    return GradeResult(
        assignment_id=manifest.id, assignment_title=manifest.title, student=submission.student,
        mode=mode, score=result_score, outcomes=tuple(outcomes), findings=tuple(findings),
        submission_sha256=submission.sha256, submission_form=submission.form,
        submitted_at=submission.submitted_at.isoformat() if submission.submitted_at else None,
        graded_at=datetime.now(UTC).isoformat(timespec="seconds"), seed=seed,
        isolation=isolation.description, isolation_level=isolation.level,
        sandbox_override=weak is not None,
        duration_s=round(time.perf_counter() - started, 3),
        versions={"grader": __version__, **environment()},
        notes=tuple(list(submission.notes) + notes), student_output=student_output,
        fingerprint=fingerprint,
    )
