"""The course staff's commands on recorded grades: the roster, overrides, extensions, the grading
history, the class report and the exports (contract: docs/CLI.md). Thin, as grader.cli.main: parse,
call the library, print through grader.cli.console. Registered on the `grade` group by
grader/cli/__init__.py."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from grader.cli.main import (
    gradebook_option,
    interpret_kernels_without_gpu,
    iso_datetime,
    library_errors,
    load_assignment,
    main,
    pass_course,
    weak_sandbox_option,
)
from grader.core.course import Course


def _existing_gradebook(course: Course, gradebook_path: str | None):
    from grader.core.errors import GradebookError
    from grader.storage.gradebook import Gradebook

    path = course.gradebook_path(gradebook_path)
    if not path.is_file():
        raise GradebookError(f"no gradebook at {path} (grade some submissions first, or pass --gradebook)")
    return Gradebook(path)


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


@roster.command("list")
@click.option("--everyone", is_flag=True, help="Also every id known from a grading or an error, not on the roster.")
@gradebook_option
@pass_course
@library_errors
def roster_list(course: Course, everyone: bool, gradebook_path: str | None) -> None:
    """The roster: each student's id, name, email, section, extension and the assignments graded."""
    from grader.cli.console import print_roster

    with _existing_gradebook(course, gradebook_path) as book:
        print_roster(book.roster(), book.extensions_for_every_assignment(), book.graded_assignments(),
                     [s["id"] for s in book.students()] if everyone else None)


# ------------------------------------------------------------------ staff decisions
def staff_option(command):
    return click.option("--by", "author", default=None,
                        help="Who decides (recorded; default: $GRADE_STAFF, else your login name).")(command)


@main.command()
@click.argument("assignment")
@click.argument("student")
@click.option("--task", "task_id", default=None, help="The task whose points are set (with --points).")
@click.option("--points", type=float, default=None, help="A task's points, with --task.")
@click.option("--total", type=float, default=None, help="The total's points (the last word), instead of a task's.")
@click.option("--reason", required=True, help="Why (recorded, and shown in the student's report).")
@click.option("--clear", is_flag=True, help="End the override of --task, or without --task the total's.")
@click.option("--all-tasks", is_flag=True, help="With --clear: clear every override of this student.")
@staff_option
@gradebook_option
@pass_course
@library_errors
def override(course: Course, assignment: str, student: str, task_id: str | None, points: float | None,
             total: float | None, reason: str, clear: bool, all_tasks: bool, author: str | None,
             gradebook_path: str | None) -> None:
    """Set a student's score by hand, with a reason: a task's points (--task ID --points X) or the
    total (--total X).

    Audited (who, when, why, the total before and after), applied to the latest grading,
    so it survives regrades; shown in grade report and the exports. --clear ends it (kept in the audit)."""
    from grader.cli.console import print_overrides
    from grader.pipeline.staff import OverrideRequest, apply_override

    request = OverrideRequest.from_options(task_id, points, total, clear, all_tasks)
    with _existing_gradebook(course, gradebook_path) as book:
        records = apply_override(load_assignment(course, assignment), book, student, request, reason, author)
    if request.clear:
        click.echo(f"cleared {len(records)} override(s) of {student} in {assignment}")
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
        granted = grant_extension(load_assignment(course, assignment), book, student, reason, days=days, hours=hours,
                                  until=until, author=author)
        print_extensions({student: granted.record})
        replaced = granted.replacement_line(assignment)
        if replaced:
            click.echo(replaced)


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
    from grader.render.standing import standings

    manifest = load_assignment(course, assignment).manifest
    with _existing_gradebook(course, gradebook_path) as book:
        lowered = {s: standing.lowered for s, standing in standings(manifest, book).items()
                   if standing.lowered and student in (None, s)}
        print_history(book.history(assignment, student), lowered=lowered)


@main.command()
@click.argument("assignment")
@click.argument("student")
@click.option("--files", "files", default=None,
              help="Replay the grading of these files (a sha256 prefix, as grade history shows it; "
                   "default: the student's latest submission).")
@click.option("--record", is_flag=True,
              help="Record the replay as a new grading of the same files (the earlier one kept in the history) "
                   "and write the student's report again. Without it nothing is written.")
@weak_sandbox_option
@gradebook_option
@pass_course
@library_errors
def replay(course: Course, assignment: str, student: str, files: str | None, record: bool,
           allow_weak_sandbox: bool, gradebook_path: str | None) -> None:
    """Grade a recorded submission again exactly as it was graded (its stored files, seed, dates, device and
    sandbox level) and show what differs: each test's verdict and points, and the total.

    Exit 0 when the replay is identical, 1 when anything differs (said with what could explain it:
    versions, a changed hidden test or reference, the sandbox level, timing measured again)."""
    from grader.cli.console import ActivityProgress, print_replay
    from grader.pipeline.replay import recording_sinks
    from grader.pipeline.replay import replay as replay_grading

    interpret_kernels_without_gpu()
    assigned = load_assignment(course, assignment)
    with _existing_gradebook(course, gradebook_path) as book, \
            ActivityProgress(f"replaying {assignment} for {student}") as activity:
        replayed = replay_grading(assigned, book, student, files=files, allow_weak_sandbox=allow_weak_sandbox,
                                  sinks=recording_sinks(assigned, book, student) if record else (), progress=activity)
    print_replay(replayed)
    if not replayed.identical:
        sys.exit(1)


def everyone_option(command):
    return click.option("--everyone", is_flag=True,
                        help="Also the students graded but not on the roster (default: the roster's students; "
                             "without a roster, everyone graded).")(command)


def _say_export(done, assignment: str) -> None:
    """What an export did (grader.render.exports.ExportDone): the table itself on stdout, the rest on stderr."""
    if done.folder is not None:
        click.echo(f"{len(done.written)} results.json file(s) under {done.folder}")
    elif done.table is not None:
        click.echo(done.table, nl=False)
    else:
        click.echo(f"{done.fmt}: {done.written[0]}", err=True)
    _say_left_out(done.left_out, assignment, "grade export")
    if done.without_email:
        click.echo(f"{len(done.without_email)} row(s) have no email address ({', '.join(done.without_email)}): in "
                   f"Moodle, map 'ID number' or 'Username' to the user, or import a roster with their emails", err=True)


def _say_left_out(left_out: tuple[str, ...], assignment: str, command: str) -> None:
    if left_out:
        click.echo(f"left out {len(left_out)} id(s) graded or recorded for {assignment} but not on the roster: "
                   f"{', '.join(left_out)} ({command} --everyone lists them)", err=True)


@main.command()
@click.argument("assignment")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file (default: <course>/.grade/reports/ASSIGNMENT-class.html).")
@everyone_option
@gradebook_option
@pass_course
@library_errors
def report(course: Course, assignment: str, out: str | None, everyone: bool, gradebook_path: str | None) -> None:
    """The instructor's class report (HTML, staff only) from the gradebook: the roster's students."""
    from grader.render.class_report import write_class_report
    from grader.render.exports import left_out

    assigned = load_assignment(course, assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        path = write_class_report(assigned, book, out, everyone=everyone)
        _say_left_out(left_out(assigned, book, everyone), assignment, "grade report")
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
@everyone_option
@gradebook_option
@pass_course
@library_errors
def export(course: Course, assignment: str, fmt: str, out: str | None, column: str | None, everyone: bool,
           gradebook_path: str | None) -> None:
    """Grades for a spreadsheet or LMS, or per-student Gradescope results.json files (as they stand:
    extensions and overrides applied), for the roster's students."""
    from grader.render.exports import export_grades

    with _existing_gradebook(course, gradebook_path) as book:
        done = export_grades(load_assignment(course, assignment), book, fmt, out, column, everyone)
    _say_export(done, assignment)
