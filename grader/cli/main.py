"""The `grade` command (contract: docs/CLI.md). Thin: parse, call the library,
map GraderError to a one-line message and its exit code.

Ctrl-C and SIGTERM stop any command within seconds: while a command runs, both
raise `Stopped` where the command is, after the workers of every grading pool
it runs were ended (grader.pipeline.local_pool.stop_every_pool), so every
cleanup on the way out runs (a sandbox is closed, a gradebook write rolled
back) and the command exits 130 (SIGINT) or 143 (SIGTERM) with one line saying
so. A second signal while it stops ends the process at once.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from datetime import datetime
from pathlib import Path

import click

from grader.core.compat import NoTimeZone, parse_zoned
from grader.core.course import Course, find_course
from grader.core.errors import GraderError, OptionsConflict, SandboxRefused
from grader.core.text import one_line

SELF_CHECK_STUDENT = "self-check"  # `grade check` records nothing, so it needs no real student id


class GradeCommandError(click.ClickException):
    def __init__(self, error: GraderError):
        super().__init__(one_line(str(error), 2000))  # one line, nothing a terminal would act on
        self.exit_code = error.exit_code


def library_errors(command):
    """Turn GraderError into a one-line ClickException with the right exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except OptionsConflict as exc:
            raise click.UsageError(str(exc)) from exc
        except GraderError as exc:
            raise GradeCommandError(exc) from exc

    return wrapper


STOP_SIGNALS = {signal.SIGINT: ("SIGINT (Ctrl-C)", 130), signal.SIGTERM: ("SIGTERM", 143)}


class Stopped(KeyboardInterrupt):
    """A command stopped by a signal (see the module docstring)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class StoppedBySignal(click.ClickException):
    def __init__(self, signum: int):
        name, self.exit_code = STOP_SIGNALS.get(signum, (f"signal {signum}", 128 + signum))
        super().__init__(f"stopped by {name}: nothing more was graded; what was recorded before stays "
                         f"recorded (run the command again to continue)")


def _end_pools() -> None:
    """End every grading pool of this process. None imported, or a signal that came while it was still
    being imported (a half-made module): no pool exists yet, and there is nothing to end."""
    stop_every_pool = getattr(sys.modules.get("grader.pipeline.local_pool"), "stop_every_pool", None)
    if stop_every_pool is not None:
        stop_every_pool()


def _stop(signum: int, _frame) -> None:
    if _stop.requested:  # a second signal while stopping: end the process now
        _end_pools()
        os._exit(STOP_SIGNALS.get(signum, ("", 128 + signum))[1])
    _stop.requested = True
    _end_pools()
    raise Stopped(signum)


_stop.requested = False


class GradeGroup(click.Group):
    """The command group: while a command runs, Ctrl-C and SIGTERM stop it (see the module docstring)."""

    def invoke(self, ctx: click.Context):
        previous = {}
        try:
            for signum in STOP_SIGNALS:
                previous[signum] = signal.signal(signum, _stop)
        except ValueError:  # not the main thread: signals stay as they are
            pass
        _stop.requested = False
        try:
            return super().invoke(ctx)
        except Stopped as exc:
            raise StoppedBySignal(exc.signum) from None
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def iso_datetime(_ctx, _param, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_zoned(value)
    except NoTimeZone as exc:
        raise click.BadParameter("give a time zone, e.g. 2026-12-14T23:59:00+00:00") from exc
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 date-time: {value!r}") from exc


pass_course = click.make_pass_decorator(Course)


def load_assignment(course: Course, assignment_id: str):
    """The command's Assignment, built once here (grader.core.assignment) and passed down."""
    from grader.core.assignment import Assignment

    return Assignment.load(course, assignment_id)


def interpret_kernels_without_gpu() -> None:
    """At the edge of a command that grades: without a GPU, Triton's interpreter runs the kernels, which
    Triton decides when it is first imported, so it is switched on before anything imports it."""
    import os

    from grader.sandbox.isolation import no_gpu_here

    if no_gpu_here():  # without asking torch (a batch's parent never imports it)
        os.environ.setdefault("TRITON_INTERPRET", "1")
        return
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def grading_assignment(course: Course, assignment_id: str):
    """For a command that grades one submission: its Assignment, with the template worker its sandbox
    forks from started at once (it imports torch while this command imports the grader) and Triton's
    interpreter switched on without a GPU."""
    from grader.sandbox.template import Zygote

    assigned = load_assignment(course, assignment_id)
    Zygote.warm(assigned.settings.sandbox.uid_range, assigned.switches)
    interpret_kernels_without_gpu()
    return assigned


@click.group(cls=GradeGroup)
@click.option("--course", "course_dir", type=click.Path(file_okay=False), default=None,
              help="Course root (default: $GRADE_COURSE, else the nearest parent with assignments/).")
@click.version_option(package_name="attention-course-grader")
@click.pass_context
def main(ctx: click.Context, course_dir: str | None) -> None:
    """Grade attention-course assignments: self-checks, official grades, class reports."""
    try:
        ctx.obj = find_course(course_dir)
    except GraderError as exc:
        if ctx.invoked_subcommand is not None:
            raise GradeCommandError(exc) from exc


def weak_sandbox_option(command):
    return click.option(
        "--allow-weak-sandbox", is_flag=True,
        help="Grade even where the sandbox lacks a layer the course requires (recorded in the result).",
    )(command)


def gradebook_option(command):
    return click.option(
        "--gradebook", "gradebook_path", default=None, type=click.Path(dir_okay=False),
        help="SQLite gradebook (default: <course>/.grade/gradebook.sqlite or $GRADE_GRADEBOOK).",
    )(command)


@main.command("list")
@pass_course
@library_errors
def list_assignments(course: Course) -> None:
    """Assignments, their tasks, points and deadlines."""
    for assignment_id in course.assignment_ids():
        manifest = load_assignment(course, assignment_id).manifest
        deadline = manifest.deadline.isoformat() if manifest.deadline else "no deadline"
        click.echo(f"{manifest.id}  {manifest.title}  ({manifest.max_points:g} points, due {deadline})")
        for task in manifest.tasks:
            extra = " bonus" if task.bonus else ""
            click.echo(f"    {task.id:<32} {task.points:>6g}{extra}  [{task.kind}] {task.section_text}")


@main.command("sandbox")
@pass_course
@library_errors
def sandbox_command(course: Course) -> None:
    """The sandbox level this host gives a worker, layer by layer, and whether the course accepts it.

    Starts one real worker to confirm every layer. Exit 0 when an official grade is
    possible here, 4 when it is not (with the reason and the override flag)."""
    from grader.core.settings import load_settings
    from grader.pipeline.policy import inspect_host
    from grader.sandbox.isolation import SandboxSwitches

    report = inspect_host(course, load_settings(course.root), SandboxSwitches.from_environment())
    for line in report.lines:
        click.echo(line)
    if report.refusal:
        raise GradeCommandError(SandboxRefused(report.refusal))


@main.command()
@click.argument("assignment", required=False)
@click.option("--workspace", type=click.Path(exists=True), default=None,
              help="Folder, .zip or .ipynb with your files (default: assignments/ASSIGNMENT, or the "
                   "unzipped bundle you are in).")
@click.option("--task", "task_id", default=None, help="Only this task's public tests.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the results here, in Gradescope's results.json format (as grade submit).")
@pass_course
@library_errors
def check(course: Course, assignment: str | None, workspace: str | None, task_id: str | None,
          seed: int | None, json_path: str | None) -> None:
    """Student self-check: the public tests, in the sandbox. Never records a grade.

    ASSIGNMENT may be left out inside an unzipped bundle (or a course with one assignment)."""
    assigned = grading_assignment(course, course.default_assignment(assignment))
    from grader.cli.console import check_exit_status, print_check_summary, print_terminal
    from grader.core.course import refuse_another_copy
    from grader.pipeline.grading import GradeRequest, open_submission
    from grader.pipeline.record import ResultsJson, grade_and_record

    refuse_another_copy(course, assigned.manifest.files, workspace)
    submission = open_submission(assigned, workspace, student=SELF_CHECK_STUDENT)
    click.echo(f"checking {Path(submission.source).resolve()}: the public tests of {assigned.id} "
               f"from {course.describe()}")
    result, said = grade_and_record(assigned, submission, GradeRequest(mode="check", only_task=task_id, seed=seed),
                                    [ResultsJson(Path(json_path), assigned.manifest)] if json_path else [])
    print_terminal(result)
    print_check_summary(result)
    for line in said:
        click.echo(line)
    if check_exit_status(result):
        sys.exit(1)


@main.command()
@click.argument("assignment")
@click.option("--workspace", type=click.Path(exists=True), default=None,
              help="Folder, .zip or .ipynb (default: assignments/ASSIGNMENT).")
@click.option("--student", default=None, help="Student id (default: the workspace's name).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write Gradescope's results.json here.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="HTML report path (default: <course>/.grade/reports/STUDENT/ASSIGNMENT.html).")
@click.option("--submitted-at", callback=iso_datetime, default=None,
              help="Submission time (ISO 8601 with zone) for the late policy.")
@click.option("--no-record", is_flag=True, help="Do not write the gradebook.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh, printed).")
@click.option("--timing-device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
              help="Where kernels are timed: the GPU when there is one; 'cpu' for tests and demonstrations "
                   "(the report marks those points as CPU-timed).")
@weak_sandbox_option
@gradebook_option
@pass_course
@library_errors
def submit(course: Course, assignment: str, workspace: str | None, student: str | None,
           json_path: str | None, html_path: str | None, submitted_at: datetime | None,
           no_record: bool, seed: int | None, timing_device: str, allow_weak_sandbox: bool,
           gradebook_path: str | None) -> None:
    """The official grade of one submission (exit 0 whenever grading completed).

    A student's extension recorded in the gradebook (grade extension, or the roster) applies."""
    from grader.core.student_ids import check_student_id

    if student is not None:
        check_student_id(student, "--student", fix="pass the student's id")
    assigned = grading_assignment(course, assignment)
    from grader.cli.console import ActivityProgress, print_terminal
    from grader.pipeline.grading import GradeRequest, open_submission
    from grader.pipeline.record import submit_and_record
    from grader.pipeline.staff import after_grading

    submission = open_submission(assigned, workspace, student=student, submitted_at=submitted_at)
    request = GradeRequest(mode="submit", seed=seed, timing_device=timing_device, allow_weak_sandbox=allow_weak_sandbox)
    with ActivityProgress(f"grading {assignment} for {submission.student}") as activity:
        result, said, warnings = submit_and_record(
            assigned, submission, request, progress=activity, record=not no_record,
            report=Path(html_path) if html_path else course.report_path(submission.student, assignment),
            gradebook=course.gradebook_path(gradebook_path), results=Path(json_path) if json_path else None,
            after=lambda book: after_grading(assigned, book, submission.student))
    print_terminal(result)
    click.echo("\n".join(said))
    for line in warnings:
        click.echo(f"Warning: {line}", err=True)


# ------------------------------------------------------------------ running a class
@main.command()
@click.argument("assignment")
@click.argument("submissions_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once (default: the number of CPUs, at most 8; with --executor "
                   "ray, one per slot of the cluster).")
@click.option("--force", is_flag=True, help="Regrade everything, even files already graded.")
@click.option("--no-reports", is_flag=True, help="Do not write each student's HTML report.")
@click.option("--seed", type=int, default=None,
              help="Fix every student's input seed (derived from this one; default: fresh for each).")
@click.option("--executor", "executor_kind", type=click.Choice(["local", "ray"]), default=None,
              help="Where submissions are graded: a process pool here (local, the default) or actors on "
                   "a Ray cluster (ray; docs/RAY.md).")
@click.option("--address", default=None,
              help="With --executor ray: 'auto' (the cluster this machine is in) or HOST:PORT "
                   "(default: start Ray on this machine).")
@click.option("--node-course", default=None,
              help="With --executor ray: the course folder's path on the nodes (default: the same as here).")
@weak_sandbox_option
@gradebook_option
@pass_course
@library_errors
def batch(course: Course, assignment: str, submissions_dir: str, jobs: int | None, force: bool,
          no_reports: bool, seed: int | None, executor_kind: str | None, address: str | None,
          node_course: str | None, allow_weak_sandbox: bool, gradebook_path: str | None) -> None:
    """Grade a class: each entry of SUBMISSIONS_DIR (folder, .zip, .ipynb) is one student.

    Resumable: files already graded are skipped. Optional SUBMISSIONS_DIR/timestamps.csv
    (student,submitted_at) dates the submissions for the late policy. Ends with the counts and
    one row per student: total, late, and what changed since the last grading."""
    from grader.cli.console import RichProgress, print_summary
    from grader.pipeline.batch import run_batch
    from grader.storage.gradebook import Gradebook

    interpret_kernels_without_gpu()
    assigned = load_assignment(course, assignment)
    with Gradebook(course.gradebook_path(gradebook_path)) as book, RichProgress() as progress:
        summary = run_batch(assigned, submissions_dir, book, jobs=jobs,
                            force=force, write_reports=not no_reports, progress=progress,
                            allow_weak_sandbox=allow_weak_sandbox, executor_kind=executor_kind,
                            address=address, node_course=node_course, seed=seed)
    print_summary(summary)


def force_option(command):
    return click.option("--force", is_flag=True,
                        help="Ship even though the last grade validate failed or is stale (said, with why).")(command)


@main.group()
def autograder() -> None:
    """Autograder bundles for hosted graders."""


@autograder.command("gradescope")
@click.argument("assignment")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Zip to write (default: <course>/.grade/autograder/ASSIGNMENT.zip).")
@click.option("--timeout-minutes", type=int, default=None,
              help="The autograder timeout set for the assignment on Gradescope (default: Gradescope's, "
                   "10); refused if the assignment's budget does not fit in it.")
@force_option
@pass_course
@library_errors
def autograder_gradescope(course: Course, assignment: str, out: str | None, timeout_minutes: int | None,
                          force: bool) -> None:
    """A Gradescope autograder zip: setup.sh, run_autograder, the grader and this assignment.

    Refused (exit 5) when the assignment's last complete grade validate failed or its files changed since."""
    from grader.authoring.validated import shipping_check
    from grader.ship.autograder import build_autograder

    assigned = load_assignment(course, assignment)
    warning = shipping_check(assigned, "the autograder", force=force)
    bundle = build_autograder(assigned, out, timeout_minutes=timeout_minutes)
    click.echo(f"autograder: {bundle}")
    if warning:
        click.echo(warning, err=True)


@autograder.command("run")
@click.argument("assignment")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh).")
@pass_course
@library_errors
def autograder_run(course: Course, assignment: str, seed: int | None) -> None:
    """Inside Gradescope (run_autograder): grade $GRADE_AUTOGRADER_HOME/submission (default
    /autograder) with its submission_metadata.json, and write results/results.json there."""
    from grader.ship.autograder import AutograderPaths, record_failure, run_gradescope

    interpret_kernels_without_gpu()
    paths = AutograderPaths.from_environment()
    try:
        built = load_assignment(course, assignment)
    except GraderError as exc:  # a broken manifest or settings: the student still gets a results.json
        status = record_failure(paths, exc)
    else:
        status = run_gradescope(built, paths, seed=seed)
    click.echo(f"results.json: {paths.results}")
    if status:
        sys.exit(status)


@main.command()
@click.argument("assignment")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for ASSIGNMENT.zip and ASSIGNMENT.ipynb (default: <course>/.grade/release).")
@force_option
@pass_course
@library_errors
def release(course: Course, assignment: str, out: str | None, force: bool) -> None:
    """The student bundle from assignments/ASSIGNMENT alone; exit 3 if anything instructor-only would ship,
    exit 5 if the assignment's last complete grade validate failed or its files changed since."""
    from grader.authoring.validated import shipping_check
    from grader.ship.release import release as build_release

    assigned = load_assignment(course, assignment)
    warning = shipping_check(assigned, "the student bundle", force=force)
    bundle = build_release(assigned, out)
    click.echo(f"{len(bundle.files)} file(s) checked: nothing from reference/ or course_kernels/")
    click.echo(f"zip: {bundle.zip_path}")
    click.echo(f"notebook: {bundle.notebook_path}")
    if warning:
        click.echo(warning, err=True)
    click.echo(f"its README installs the grader with: {bundle.install}"
               + ("" if bundle.install_configured else " (the default; course.toml's [release] install sets "
                                                       "your course's own)"))


@main.command("new")
@click.argument("assignment")
@click.option("--tasks", required=True, help="The tasks, comma-separated (each starts with one function of its name).")
@click.option("--module", default=None, help="The students' file (default: ASSIGNMENT.py).")
@click.option("--title", default=None, help="The assignment's title (default: from its id).")
@pass_course
@library_errors
def new(course: Course, assignment: str, tasks: str, module: str | None, title: str | None) -> None:
    """Write a new assignment that grade validate accepts as it stands (docs/AUTHORING.md)."""
    from grader.authoring.scaffold import new_assignment

    made = new_assignment(course, assignment, [t.strip() for t in tasks.split(",") if t.strip()], module, title)
    click.echo("\n".join([*(f"  {name}" for name in made.files), f"{assignment}: {len(made.files)} files written. "
                          f"Next: grade validate {assignment}, then replace each task's placeholder."]))


@main.command()
@click.argument("assignment", required=False)
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Gradings run at once (default: this machine's cores).")
@click.option("--seeds", type=click.IntRange(1, 20), default=None,
              help="Seeds each hidden grading runs under; a test whose verdict differs between them is named (2).")
@click.option("--task", "tasks", multiple=True, help="Only the mutants of this task (repeatable).")
@click.option("--mutant", "mutant_ids", multiple=True, help="Only this mutant (repeatable).")
@click.option("--no-cache", is_flag=True, help="Grade everything again, even what is unchanged since the last run.")
@click.option("--checks-only", is_flag=True, help="Only the consistency checks (seconds; nothing is graded).")
@pass_course
@library_errors
def validate(course: Course, assignment: str | None, jobs: int | None, seeds: int | None, tasks: tuple[str, ...],
             mutant_ids: tuple[str, ...], no_cache: bool, checks_only: bool) -> None:
    """Instructor self-test: consistency checks, then reference full marks, stubs zero, every mutant caught and
    diagnosed, no hidden test passed by a placeholder or depending on the seed (docs/AUTHORING.md)."""
    from grader.authoring.validate import DEFAULT_SEEDS, ValidateOptions
    from grader.authoring.validate import validate as run_validation
    from grader.cli.console import ValidateOutput

    interpret_kernels_without_gpu()
    if (tasks or mutant_ids) and not assignment:
        raise click.UsageError("--task and --mutant need the ASSIGNMENT they belong to")
    options = ValidateOptions(jobs=jobs, seeds=seeds or DEFAULT_SEEDS, tasks=tasks, mutant_ids=mutant_ids,
                              use_cache=not no_cache, checks_only=checks_only)
    failures = 0
    for assignment_id in [assignment] if assignment else course.assignment_ids():
        with ValidateOutput(assignment_id) as output:  # says so when stopped (Ctrl-C, SIGTERM)
            failures += output.summary(run_validation(load_assignment(course, assignment_id), options=options,
                                                      progress=output.verdict, announce=output.announce))
    if failures:
        raise click.ClickException(f"{failures} validation check(s) failed")


if __name__ == "__main__":  # pragma: no cover
    main()
