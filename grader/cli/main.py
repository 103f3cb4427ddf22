"""The `grade` command (contract: docs/CLI.md). Thin: parse, call the library,
map GraderError to a one-line message and its exit code."""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from pathlib import Path

import click

from grader.core.compat import parse_iso
from grader.core.course import Course, find_course
from grader.core.errors import GraderError, SandboxRefused
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
        except GraderError as exc:
            raise GradeCommandError(exc) from exc

    return wrapper


def iso_datetime(_ctx, _param, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = parse_iso(value)
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 date-time: {value!r}") from exc
    if parsed.tzinfo is None:
        raise click.BadParameter("give a time zone, e.g. 2026-12-14T23:59:00+00:00")
    return parsed


pass_course = click.make_pass_decorator(Course)


def load_assignment(course: Course, assignment_id: str):
    """The command's Assignment, built once here (grader.core.assignment) and passed down."""
    from grader.core.assignment import Assignment

    return Assignment.load(course, assignment_id)


def interpret_kernels_without_gpu() -> None:
    """At the edge of a command that grades: without a GPU, Triton's interpreter runs the kernels, which
    Triton decides when it is first imported, so it is switched on before anything imports it."""
    import os

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


@click.group()
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
    from grader.cli.console import print_check_summary, print_terminal
    from grader.core.course import refuse_another_copy
    from grader.core.records import FAILED, PENDING
    from grader.pipeline.grading import GradeRequest, open_submission
    from grader.pipeline.record import ResultsJson, grade_and_record

    interpret_kernels_without_gpu()
    assigned = load_assignment(course, course.default_assignment(assignment))
    refuse_another_copy(course, assigned.manifest.files, workspace)
    submission = open_submission(assigned, workspace, student=SELF_CHECK_STUDENT)
    click.echo(f"checking {Path(submission.source).resolve()}: the public tests of {assigned.id} "
               f"from {course.describe()}")
    result, _ = grade_and_record(assigned, submission, GradeRequest(mode="check", only_task=task_id, seed=seed))
    print_terminal(result)
    print_check_summary(result)
    if json_path:
        from grader.pipeline.record import deliver

        for line in deliver(result, submission, [ResultsJson(Path(json_path), assigned.manifest)]):
            click.echo(line)
    if any(o.status == FAILED for o in result.outcomes) or all(o.status == PENDING for o in result.outcomes):
        sys.exit(1)  # exit 0 iff every selected public test ran and passed


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
    from grader.cli.console import ActivityProgress, print_terminal
    from grader.core.student_ids import check_student_id
    from grader.pipeline.grading import GradeRequest, grade, open_submission
    from grader.pipeline.record import GradebookRow, HtmlReport, ResultsJson, deliver
    from grader.pipeline.staff import recorded_due_date
    from grader.storage.gradebook import Gradebook

    if student is not None:
        check_student_id(student, "--student", fix="pass the student's id")
    interpret_kernels_without_gpu()
    assigned = load_assignment(course, assignment)
    submission = open_submission(assigned, workspace, student=student, submitted_at=submitted_at)
    html = Path(html_path) if html_path else course.report_path(submission.student, assignment)
    book_path = course.gradebook_path(gradebook_path)
    request = GradeRequest(mode="submit", seed=seed, timing_device=timing_device,
                           allow_weak_sandbox=allow_weak_sandbox, protected=(str(book_path), str(html)),
                           due=recorded_due_date(book_path, submission.student, assigned))
    with ActivityProgress(f"grading {assignment} for {submission.student}") as activity:
        result = grade(assigned, submission, request, progress=activity)
    print_terminal(result)
    sinks = [*([ResultsJson(Path(json_path), assigned.manifest)] if json_path else []),
             HtmlReport(html, course.templates_dir)]
    for line in deliver(result, submission, sinks):
        click.echo(line)
    if not no_record:
        with Gradebook(book_path) as book:
            for line in deliver(result, submission, [GradebookRow(book)]):
                click.echo(line)


# ------------------------------------------------------------------ running a class
def _existing_gradebook(course: Course, gradebook_path: str | None):
    from grader.core.errors import GradebookError
    from grader.storage.gradebook import Gradebook

    path = course.gradebook_path(gradebook_path)
    if not path.is_file():
        raise GradebookError(f"no gradebook at {path} (grade some submissions first, or pass --gradebook)")
    return Gradebook(path)


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
    (student,submitted_at) dates the submissions for the late policy."""
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


@main.group()
def roster() -> None:
    """The class list in the gradebook."""


@roster.command("import")
@click.argument("csv_path", type=click.Path(exists=True, dir_okay=False))
@gradebook_option
@pass_course
@library_errors
def roster_import(course: Course, csv_path: str, gradebook_path: str | None) -> None:
    """Add or update students from a CSV with columns id,name,email[,extension_days].

    extension_days: extra days on every assignment (blank: none), e.g. for an accommodation."""
    from grader.storage.gradebook import Gradebook
    from grader.storage.roster import read_roster

    rows = read_roster(csv_path)
    with Gradebook(course.gradebook_path(gradebook_path)) as book:
        count = book.import_roster(rows)
    click.echo(f"{count} student(s) imported into {course.gradebook_path(gradebook_path)}")
    extended = sum(1 for row in rows if row.get("extension_days"))
    if extended:
        click.echo(f"{extended} with an extension on every assignment (extension_days)")


# ------------------------------------------------------------------ staff decisions
def staff_option(command):
    return click.option("--by", "author", default=None,
                        help="Who decides (recorded; default: $GRADE_STAFF, else your login name).")(command)


@main.command()
@click.argument("assignment")
@click.argument("student")
@click.option("--points", type=float, default=None, help="The points to give (the task's, or the total's).")
@click.option("--task", "task_id", default=None, help="Override this task's points (default: the total).")
@click.option("--reason", required=True, help="Why (recorded, and shown in the student's report).")
@click.option("--clear", is_flag=True, help="Clear the override of --task (or of the total) instead.")
@click.option("--all-tasks", is_flag=True, help="With --clear: clear every override of this student.")
@staff_option
@gradebook_option
@pass_course
@library_errors
def override(course: Course, assignment: str, student: str, points: float | None, task_id: str | None,
             reason: str, clear: bool, all_tasks: bool, author: str | None, gradebook_path: str | None) -> None:
    """Set a student's score by hand, with a reason: a task's points (--task) or the total.

    Audited (who, when, why, the total before and after), applied to the latest grading,
    so it survives regrades; shown in grade report and the exports. --clear ends it (kept in the audit)."""
    from grader.cli.console import print_overrides
    from grader.pipeline.staff import clear_override, set_override

    if clear == (points is not None):
        raise click.UsageError("give --points X to set an override, or --clear to end one")
    if all_tasks and not clear:
        raise click.UsageError("--all-tasks goes with --clear")
    with _existing_gradebook(course, gradebook_path) as book:
        if clear:
            records = clear_override(load_assignment(course, assignment), book, student, reason, task_id=task_id,
                                     every_task=all_tasks, author=author)
            click.echo(f"cleared {len(records)} override(s) of {student} in {assignment}")
        else:
            records = [set_override(load_assignment(course, assignment), book, student, points, reason,
                                    task_id=task_id, author=author)]
        print_overrides(records)


@main.command()
@click.argument("assignment")
@click.argument("student", required=False)
@click.option("--all", "include_cleared", is_flag=True, help="Cleared overrides too.")
@gradebook_option
@pass_course
@library_errors
def overrides(course: Course, assignment: str, student: str | None, include_cleared: bool,
              gradebook_path: str | None) -> None:
    """List the score overrides of an assignment (or of one student)."""
    from grader.cli.console import print_overrides

    course.assignment_dir(assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        print_overrides(book.overrides(assignment, student, include_cleared=include_cleared))


@main.command()
@click.argument("assignment")
@click.argument("student")
@click.option("--days", type=float, default=None, help="Extra days past the deadline (fractions allowed).")
@click.option("--hours", type=float, default=None, help="Extra hours past the deadline.")
@click.option("--until", callback=iso_datetime, default=None,
              help="A deadline of the student's own (ISO 8601 with a zone) instead.")
@click.option("--reason", required=True, help="Why (recorded).")
@click.option("--clear", is_flag=True, help="End the student's extension for this assignment instead.")
@staff_option
@gradebook_option
@pass_course
@library_errors
def extension(course: Course, assignment: str, student: str, days: float | None, hours: float | None,
              until: datetime | None, reason: str, clear: bool, author: str | None,
              gradebook_path: str | None) -> None:
    """Give a student more time on one assignment; the late policy uses it everywhere
    (submit, batch, report, exports), for grades already recorded too."""
    from grader.cli.console import print_extensions
    from grader.pipeline.staff import end_extension, grant_extension
    from grader.storage.gradebook import Gradebook

    with Gradebook(course.gradebook_path(gradebook_path)) as book:
        if clear:
            if days is not None or hours is not None or until is not None:
                raise click.UsageError("--clear takes no --days, --hours or --until")
            end_extension(load_assignment(course, assignment), book, student, reason, author=author)
            click.echo(f"ended the extension of {student} for {assignment}")
            return
        record = grant_extension(load_assignment(course, assignment), book, student, reason, days=days, hours=hours,
                                 until=until, author=author)
        print_extensions({student: record})


@main.command()
@click.argument("assignment")
@gradebook_option
@pass_course
@library_errors
def extensions(course: Course, assignment: str, gradebook_path: str | None) -> None:
    """List the extensions that apply to an assignment (its own, and the roster's for every assignment)."""
    from grader.cli.console import print_extensions

    course.assignment_dir(assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        print_extensions(book.extensions(assignment))


@main.command()
@click.argument("assignment")
@click.argument("student", required=False)
@gradebook_option
@pass_course
@library_errors
def history(course: Course, assignment: str, student: str | None, gradebook_path: str | None) -> None:
    """Every grading of an assignment (or of one student), oldest first; the latest counts."""
    from grader.cli.console import print_history

    course.assignment_dir(assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        print_history(book.history(assignment, student))


@main.command()
@click.argument("assignment")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file (default: <course>/.grade/reports/ASSIGNMENT-class.html).")
@gradebook_option
@pass_course
@library_errors
def report(course: Course, assignment: str, out: str | None, gradebook_path: str | None) -> None:
    """The instructor's class report (HTML, staff only) from the gradebook."""
    from grader.render.class_report import write_class_report

    assigned = load_assignment(course, assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        path = write_class_report(assigned, book, out)
    click.echo(f"class report: {path}")


@main.command()
@click.argument("assignment")
@click.option("--format", "fmt", type=click.Choice(["csv", "canvas", "moodle", "gradescope"]), required=True,
              help="csv: one row per student; canvas, moodle: their grade-import CSV; "
                   "gradescope: OUT/STUDENT/results.json.")
@click.option("--out", type=click.Path(), default=None,
              help="CSV file (default: stdout) or folder (default: <course>/.grade/exports/ASSIGNMENT-gradescope).")
@click.option("--column", default=None,
              help="canvas, moodle: the grade column's name (default: the assignment's title; for an existing "
                   "Canvas assignment write it as Canvas does, 'Title (12345)').")
@gradebook_option
@pass_course
@library_errors
def export(course: Course, assignment: str, fmt: str, out: str | None, column: str | None,
           gradebook_path: str | None) -> None:
    """Grades for a spreadsheet or LMS, or per-student Gradescope results.json files (as they stand:
    extensions and overrides applied)."""
    from grader.render.exports import export_gradescope, export_table, gradescope_folder, write_csv

    assigned = load_assignment(course, assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        if fmt == "gradescope":
            folder = gradescope_folder(assigned, out)
            written = export_gradescope(assigned, book, folder)
            click.echo(f"{len(written)} results.json file(s) under {folder}")
        elif out is None:
            click.echo(export_table(assigned, book, fmt, column), nl=False)
        else:
            click.echo(f"{fmt}: {write_csv(assigned, book, out, fmt, column)}", err=True)


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
@pass_course
@library_errors
def autograder_gradescope(course: Course, assignment: str, out: str | None, timeout_minutes: int | None) -> None:
    """A Gradescope autograder zip: setup.sh, run_autograder, the grader and this assignment."""
    from grader.ship.autograder import build_autograder

    bundle = build_autograder(load_assignment(course, assignment), out, timeout_minutes=timeout_minutes)
    click.echo(f"autograder: {bundle}")


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
@pass_course
@library_errors
def release(course: Course, assignment: str, out: str | None) -> None:
    """The student bundle from assignments/ASSIGNMENT alone; exit 3 if anything instructor-only would ship."""
    from grader.ship.release import release as build_release

    bundle = build_release(load_assignment(course, assignment), out)
    click.echo(f"{len(bundle.files)} file(s) checked: nothing from reference/ or kernels/")
    click.echo(f"zip: {bundle.zip_path}")
    click.echo(f"notebook: {bundle.notebook_path}")


@main.command("new")
@click.argument("assignment")
@click.option("--tasks", required=True, help="The tasks, comma-separated (each starts with one function of its name).")
@click.option("--module", default=None, help="The students' file (default: ASSIGNMENT.py).")
@click.option("--title", default=None, help="The assignment's title (default: from its id).")
@pass_course
@library_errors
def new(course: Course, assignment: str, tasks: str, module: str | None, title: str | None) -> None:
    """Write a new assignment that grade validate accepts as it stands (docs/AUTHORING.md)."""
    from grader.pipeline.scaffold import new_assignment

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
    from grader.cli.console import ValidateOutput
    from grader.cli.interrupts import sigterm_interrupts
    from grader.pipeline.validate import DEFAULT_SEEDS, ValidateOptions
    from grader.pipeline.validate import validate as run_validation

    interpret_kernels_without_gpu()
    if (tasks or mutant_ids) and not assignment:
        raise click.UsageError("--task and --mutant need the ASSIGNMENT they belong to")
    options = ValidateOptions(jobs=jobs, seeds=seeds or DEFAULT_SEEDS, tasks=tasks, mutant_ids=mutant_ids,
                              use_cache=not no_cache, checks_only=checks_only)
    failures = 0
    with sigterm_interrupts():
        for assignment_id in [assignment] if assignment else course.assignment_ids():
            with ValidateOutput(assignment_id) as output:
                try:
                    verdicts = run_validation(load_assignment(course, assignment_id), progress=output.verdict,
                                              options=options, announce=output.announce)
                except KeyboardInterrupt:
                    output.interrupted()
                    sys.exit(130)
                failures += output.summary(verdicts)
    if failures:
        raise click.ClickException(f"{failures} validation check(s) failed")


if __name__ == "__main__":  # pragma: no cover
    main()
