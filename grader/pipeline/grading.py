"""One submission, end to end: assignment → submission → static checks →
sandboxed suite → quiz → score. Returns a GradeResult; writes nothing.

Storage (gradebook) and rendering (results.json, HTML) are the next steps, taken by
grader.pipeline.record's sinks, so `grade check` runs the same pipeline without
recording.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

import torch

from grader import __version__
from grader.core.assignment import Assignment
from grader.core.compat import UTC
from grader.core.due import DueDate
from grader.core.errors import GraderError, SandboxFailed, SandboxRefused, UnknownTask
from grader.core.quiz import ANSWERS_FILE, answered_outcome, check_key, grade_quiz, load_key, load_questions
from grader.core.records import FileProblem, GradeResult, StaticFinding, TestOutcome
from grader.core.scoring import score
from grader.harness.device_lock import job_device_lock
from grader.harness.reference import course_imports, load_dependencies, load_reference, stub_sources
from grader.harness.runners import SandboxRunner
from grader.harness.suite import run_suite
from grader.harness.testing import GradingContext
from grader.harness.timing import environment
from grader.intake.gpu_compile import GpuCompile, compile_for_gpu, user_cache_dir
from grader.intake.kernels import KernelModule, kernel_module
from grader.intake.static_checks import check_sources
from grader.intake.submission import Submission, open_submission  # noqa: F401  (re-exported: one definition)
from grader.pipeline.policy import OVERRIDE_FLAG, refusal
from grader.sandbox.client import Sandbox, SandboxUnavailable
from grader.sandbox.forbidden import KERNEL_CODE

MODES = ("check", "submit")
TIMING_DEVICES = ("auto", "cuda", "cpu")
INTERPRET_ENV = "TRITON_INTERPRET"


@dataclass(frozen=True)
class GradeRequest:
    """How to grade one submission.

    `mode`: "submit" (the hidden tests: an official grade) or "check" (the public tests).
    `only_task`: that task alone (its points the whole). `seed`: the inputs' seed (default:
    fresh). `use_gpu`: default, whether torch sees one. `allow_weak_sandbox`: grade below the
    course's required sandbox level (recorded). `protected`: more paths the worker must not
    read (a gradebook outside the course, a report); the course root always is.
    `timing_device`: "auto" (the GPU when there is one, else timing tests are pending), "cuda",
    or "cpu" (tests and demonstrations: the report marks the points as CPU-timed). `due`: the
    dates the late policy holds the submission to (default: the manifest's deadline)."""

    mode: str = "submit"
    only_task: str | None = None
    seed: int | None = None
    use_gpu: bool | None = None
    allow_weak_sandbox: bool = False
    protected: tuple[str, ...] = ()
    timing_device: str = "auto"
    due: DueDate | None = None


def resolve_timing_device(choice: str, use_gpu: bool) -> str | None:
    """Where timing tests run: 'cuda', 'cpu', or None (pending)."""
    if choice not in TIMING_DEVICES:
        raise GraderError(f"timing device must be one of {', '.join(TIMING_DEVICES)}, not {choice!r}")
    if choice == "auto":
        return "cuda" if use_gpu else None
    if choice == "cuda" and not use_gpu:
        raise GraderError("--timing-device cuda needs a CUDA GPU, and there is none here")
    return choice


def runs_kernels(assignment: Assignment) -> bool:
    """Whether grading runs Triton kernels in this process (a kernel contract, or timing against course_kernels/)."""
    manifest = assignment.manifest
    return manifest.contract is not None or manifest.has_timing_task


def check_triton_mode(assignment: Assignment, use_gpu: bool) -> None:
    """Without a GPU the trusted side's kernels run in Triton's interpreter, which Triton chooses when it
    is first imported: the command that starts grading sets TRITON_INTERPRET=1 (grader.cli does);
    a library caller that did not is told so, before anything runs."""
    if use_gpu or not runs_kernels(assignment) or os.environ.get(INTERPRET_ENV) == "1":
        return
    raise GraderError(f"{assignment.id} runs Triton kernels and there is no GPU here: set {INTERPRET_ENV}=1 "
                      f"before Python starts (the grade command does this for you)")


def _static_outcomes(assignment: Assignment,
                     submission: Submission) -> tuple[list[StaticFinding], list[FileProblem]]:
    """Static findings over every submitted .py file (helpers the task files import included)."""
    sources = {name: submission.text(name) or "" for name in submission.files if name.endswith(".py")}
    others = tuple(name for name in submission.files if not name.endswith(".py"))
    findings, problems = check_sources(assignment.manifest, sources, others)
    return findings, [FileProblem("syntax", p.filename, p.message) for p in problems]


def _quiz_outcomes(assignment: Assignment, submission: Submission, mode: str) -> list[TestOutcome]:
    """The quiz: marked (submit, with the key), or `grade check`'s pending line of how many are answered."""
    quiz_tasks = [t for t in assignment.manifest.tasks if t.kind == "quiz"]
    if not quiz_tasks or not assignment.quiz_questions.is_file():
        if quiz_tasks and mode == "submit":
            return [TestOutcome(name="quiz", task=quiz_tasks[0].id, status="pending", kind="not_run",
                                message="the quiz key is not available here", visibility="visible")]
        return []
    questions = load_questions(assignment.quiz_questions)
    if mode == "check":
        return [answered_outcome(questions, submission.text(ANSWERS_FILE), quiz_tasks[0].id)]
    if not assignment.quiz_key.is_file():
        return [TestOutcome(name="quiz", task=quiz_tasks[0].id, status="pending", kind="not_run",
                            message="the quiz key is not available here", visibility="visible")]
    key = load_key(assignment.quiz_key)
    check_key(questions, key, assignment.quiz_key)
    return grade_quiz(questions, key, submission.text(ANSWERS_FILE), quiz_tasks[0].id)


def _check_quiz_key(assignment: Assignment) -> None:
    """ManifestError when the assignment's quiz key cannot mark every question (grader.core.quiz.check_key)."""
    if any(t.kind == "quiz" for t in assignment.manifest.tasks) and assignment.quiz_questions.is_file() \
            and assignment.quiz_key.is_file():
        check_key(load_questions(assignment.quiz_questions), load_key(assignment.quiz_key), assignment.quiz_key)


def _kernel_sandbox(assignment: Assignment, submission: Submission, sandbox: Sandbox, use_gpu: bool,
                    protected: tuple[str, ...]) -> tuple[Sandbox, KernelModule] | None:
    """The worker of a kernel contract: the student's vetted kernels and the course's launchers, and
    nothing else of the student's (grader.intake.kernels), within the submission's own budget."""
    contract = assignment.manifest.contract
    if contract is None:
        return None
    kernels = kernel_module(contract.file, submission.text(contract.file) or "", contract.kernels)
    launchers = assignment.contract_module.read_bytes()
    return Sandbox({contract.file: kernels.source.encode(), contract.module: launchers}, [contract.module],
                   limits=assignment.manifest.limits, use_gpu=use_gpu,
                   uid_range=assignment.settings.sandbox.uid_range, protected=protected,
                   deadline=sandbox.deadline, switches=assignment.switches), kernels


class _GpuCompileCheck:
    """The contract's vetted kernels compiled for a GPU (grader.intake.gpu_compile), in a thread of
    its own while the workers start; only a file whose every name resolved is compiled."""

    def __init__(self, assignment: Assignment, kernels: KernelModule):
        self.assignment = assignment
        self.kernels = kernels
        self.result: GpuCompile | None = None
        self.thread: threading.Thread | None = None
        if kernels.found and not kernels.problems:
            self.thread = threading.Thread(target=self._run, name="gpu-compile", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        contract = self.assignment.manifest.contract
        try:
            self.result = compile_for_gpu(contract.file, self.kernels.source, self.assignment.contract_module,
                                          user_cache_dir())
        except Exception as exc:  # noqa: BLE001 - a check that could not run is recorded, never a crash
            self.result = GpuCompile("skipped", f"{type(exc).__name__}: {exc}"[:300], (), 0)

    def findings(self) -> tuple[list[StaticFinding], str]:
        """kernel_code findings for every task of a kernel Triton refused, and the check in one line."""
        if self.thread is None:
            why = "no contract kernel" if not self.kernels.found else "a kernel's names did not resolve"
            return [], f"skipped: {why}"
        self.thread.join()
        result = self.result or GpuCompile("skipped", "the check did not finish", (), 0)
        manifest = self.assignment.manifest
        found = []
        for task in manifest.tasks:
            kernels = manifest.kernels_for(task)
            for problem in result.problems:
                if problem.kernel in kernels:
                    found.append(StaticFinding(task.id, problem.kernel, KERNEL_CODE, problem.line,
                                               f"{manifest.contract.file}: {problem.text}"))
        return found, result.summary()


def _sandbox_gate(isolation, assignment: Assignment, mode: str, allow_weak: bool) -> str | None:
    """None, or the note that records a weak sandbox; raises SandboxRefused for an official grade."""
    settings = assignment.settings.sandbox
    reason = refusal(isolation, settings)
    if reason is None or mode != "submit":
        return None
    if not allow_weak:
        raise SandboxRefused(reason)
    return (f"graded with {OVERRIDE_FLAG}: the sandbox was {isolation.level}, below the course's "
            f"requirement ({settings.required_text()})")


def grade(assignment: Assignment, submission: Submission, request: GradeRequest = GradeRequest(),
          progress: Callable[[str], None] | None = None) -> GradeResult:
    """Grade one submission as `request` says. Raises GraderError only when grading is impossible.

    `progress` is told each step as it starts (for a terminal's progress line). An official
    grade (mode "submit") carries the fingerprint of what graded it, for stale grades, and
    needs a sandbox level the course requires (grader.pipeline.policy): SandboxRefused
    otherwise, unless the request allows a weak sandbox, which the result records."""
    if request.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    started = time.perf_counter()
    manifest = assignment.manifest
    only_task = request.only_task
    if only_task is not None and not manifest.has_task(only_task):
        raise UnknownTask(f"{assignment.id} has no task {only_task!r} "
                          f"(tasks: {', '.join(t.id for t in manifest.tasks)})")
    step = progress or (lambda _step: None)
    official = request.mode == "submit"
    if official:
        _check_quiz_key(assignment)  # a key that cannot mark the quiz refuses before any work
    seed = request.seed if request.seed is not None else random.SystemRandom().randrange(1, 2**31)
    use_gpu = torch.cuda.is_available() if request.use_gpu is None else request.use_gpu
    timed_on = resolve_timing_device(request.timing_device, use_gpu)
    check_triton_mode(assignment, use_gpu)
    protected = (str(assignment.course.root), *request.protected)
    sandbox = Sandbox(submission.files, list(manifest.files), limits=manifest.limits, use_gpu=use_gpu,
                      uid_range=assignment.settings.sandbox.uid_range, protected=protected,
                      switches=assignment.switches)
    made = _kernel_sandbox(assignment, submission, sandbox, use_gpu, protected)
    kernels, vetted = made if made is not None else (None, None)
    compiled, compile_summary = None, ""
    job_lock = contextlib.ExitStack()
    try:
        job_lock.enter_context(job_device_lock("cuda" if use_gpu else None))  # all this job's GPU work
        _sandbox_gate(sandbox.isolation, assignment, request.mode, request.allow_weak_sandbox)  # before any work
        step("starting the sandbox; static checks")
        sandbox.start()  # the worker imports torch while we run the static checks
        if kernels is not None:
            kernels.start()
        if vetted is not None:
            compiled = _GpuCompileCheck(assignment, vetted)  # before any kernel runs
        findings, file_problems = _static_outcomes(assignment, submission)
        try:
            confirmed = sandbox.wait_ready()
        except SandboxUnavailable as exc:
            raise SandboxFailed(str(exc)) from exc
        weak = _sandbox_gate(confirmed, assignment, request.mode, request.allow_weak_sandbox)
        if compiled is not None:  # the workers have started meanwhile; no kernel has run yet
            step("compiling the kernels for a GPU")
            compile_findings, compile_summary = compiled.findings()
            findings += compile_findings
        with course_imports(assignment.course.root):
            reference, mutants = load_reference(assignment) if official else ({}, [])
            context = GradingContext(runner=SandboxRunner(sandbox), manifest=manifest,
                                     reference=reference, mutants=mutants, seed=seed,
                                     compositions=load_dependencies(assignment) if official else [],
                                     stub_sources=stub_sources(assignment) if official else {},
                                     device="cuda" if use_gpu else "cpu", hidden=official,
                                     timing_device=timed_on, zeroed_tasks=frozenset(f.task for f in findings),
                                     kernel_runner=(SandboxRunner(kernels, kernel_worker=True)
                                                    if kernels is not None else None))
            step("running the hidden tests" if official else "running the public tests")
            tests = assignment.hidden_tests if official else assignment.public_tests
            outcomes, errors = run_suite(tests, context, visibility="hidden" if official else "visible",
                                         only_task=only_task)
        if only_task is None or manifest.task(only_task).kind == "quiz":
            outcomes += _quiz_outcomes(assignment, submission, request.mode)
        student_output = "".join(sandbox.output_log + (kernels.output_log if kernels else []))[-16000:]
        isolation = sandbox.isolation
    finally:
        sandbox.close()
        if kernels is not None:
            kernels.close()
        job_lock.close()
    step("scoring")
    scored = manifest
    if only_task is not None:  # `grade check --task X`: X alone, its points the whole
        findings = [f for f in findings if f.task == only_task]
        scored = replace(manifest, tasks=(manifest.task(only_task),))
    file_problems = [FileProblem("missing", name) for name in submission.missing] + file_problems
    notes = [*submission.notes, *(p.describe() for p in file_problems if p.kind == "syntax"), *([weak] if weak else []),
             *isolation.gaps,
             *(f"test collection problem: {e}" for e in errors)]
    return GradeResult(
        assignment_id=manifest.id, assignment_title=manifest.title, student=submission.student,
        mode=request.mode, score=score(scored, outcomes, findings, submission.submitted_at, request.due),
        outcomes=tuple(outcomes), findings=tuple(findings),
        submission_sha256=submission.sha256, submission_form=submission.form,
        submitted_at=submission.submitted_at.isoformat() if submission.submitted_at else None,
        graded_at=datetime.now(UTC).isoformat(timespec="seconds"), seed=seed,
        isolation=isolation.description, isolation_level=isolation.level,
        sandbox_override=weak is not None, sandbox_gaps=isolation.gaps,
        duration_s=round(time.perf_counter() - started, 3),
        versions={"grader": __version__, **environment(),
                  **({"gpu_compile": compile_summary} if compile_summary else {})},
        notes=tuple(notes), student_output=student_output,
        fingerprint=assignment.fingerprint if official else "", file_problems=tuple(file_problems),
    )
