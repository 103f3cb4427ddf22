"""The `grade` command (contract: docs/CLI.md). Thin: parse, call the library,
map GraderError to a one-line message and its exit code."""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from pathlib import Path

import click

from grader.course import Course, find_course
from grader.errors import GraderError


class GradeCommandError(click.ClickException):
    def __init__(self, error: GraderError):
        super().__init__(str(error))
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
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 date-time: {value!r}") from exc
    if parsed.tzinfo is None:
        raise click.BadParameter("give a time zone, e.g. 2026-12-14T23:59:00+00:00")
    return parsed


pass_course = click.make_pass_decorator(Course)


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


def gradebook_option(command):
    return click.option("--gradebook", "gradebook_path", default=None, type=click.Path(dir_okay=False),
                        help="SQLite gradebook (default: <course>/.grade/gradebook.sqlite or $GRADE_GRADEBOOK).")(command)


@main.command("list")
@pass_course
@library_errors
def list_assignments(course: Course) -> None:
    """Assignments, their tasks, points and deadlines."""
    from grader.manifest import load_manifest

    for assignment_id in course.assignment_ids():
        manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
        deadline = manifest.deadline.isoformat() if manifest.deadline else "no deadline"
        click.echo(f"{manifest.id}  {manifest.title}  ({manifest.max_points:g} points, due {deadline})")
        for task in manifest.tasks:
            extra = " bonus" if task.bonus else ""
            click.echo(f"    {task.id:<32} {task.points:>6g}{extra}  [{task.kind}] {task.section_text}")


@main.command()
@click.argument("assignment")
@click.option("--workspace", type=click.Path(exists=True), default=None,
              help="Folder, .zip or .ipynb with your files (default: assignments/ASSIGNMENT).")
@click.option("--task", "task_id", default=None, help="Only this task's public tests.")
@click.option("--seed", type=int, default=None, help="Input seed (default: fresh).")
@pass_course
@library_errors
def check(course: Course, assignment: str, workspace: str | None, task_id: str | None,
          seed: int | None) -> None:
    """Student self-check: the public tests, in the sandbox. Never records a grade."""
    from grader.grading import grade, open_submission
    from grader.outcomes import FAILED
    from grader.report import print_terminal

    submission = open_submission(course, assignment, workspace)
    result = grade(course, assignment, submission, mode="check", only_task=task_id, seed=seed)
    print_terminal(result)
    if any(o.status == FAILED for o in result.outcomes) or not result.outcomes:
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
@gradebook_option
@pass_course
@library_errors
def submit(course: Course, assignment: str, workspace: str | None, student: str | None,
           json_path: str | None, html_path: str | None, submitted_at: datetime | None,
           no_record: bool, seed: int | None, gradebook_path: str | None) -> None:
    """The official grade of one submission (exit 0 whenever grading completed)."""
    from grader.gradebook import Gradebook
    from grader.grading import grade, open_submission
    from grader.report import print_terminal, write_html
    from grader.results import write_gradescope

    submission = open_submission(course, assignment, workspace, student=student,
                                 submitted_at=submitted_at)
    result = grade(course, assignment, submission, mode="submit", seed=seed)
    print_terminal(result)
    if json_path:
        write_gradescope(result, json_path)
        click.echo(f"results.json: {json_path}")
    html = Path(html_path) if html_path else course.reports_dir / result.student / f"{assignment}.html"
    write_html(result, html, course.templates_dir)
    click.echo(f"report: {html}")
    if not no_record:
        with Gradebook(course.gradebook_path(gradebook_path)) as book:
            book.record(result, submission)
        click.echo(f"recorded in {course.gradebook_path(gradebook_path)}")


if __name__ == "__main__":  # pragma: no cover
    main()
