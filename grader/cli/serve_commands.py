"""The course server's commands: `grade serve` and `grade serve-link` (contract: docs/CLI.md). Thin, as
grader.cli.main: parse, call grader.serve, print. Registered on the `grade` group by grader/cli/__init__.py."""

from __future__ import annotations

import click

from grader.cli.main import (
    gradebook_option,
    interpret_kernels_without_gpu,
    library_errors,
    main,
    pass_course,
    weak_sandbox_option,
)
from grader.core.course import Course


@main.command("serve")
@click.option("--host", default=None, help="Address to listen on (default: 127.0.0.1, this machine only).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port (default: 8000; 0: any free one).")
@click.option("--executor", "executor_kind", type=click.Choice(["local", "ray"]), default=None,
              help="Where submissions are graded: a process pool here (local, the default) or actors on a Ray "
                   "cluster (ray; docs/RAY.md).")
@click.option("--address", default=None, help="With --executor ray: 'auto' or HOST:PORT of the cluster.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once (default: the number of CPUs, at most 8).")
@click.option("--assignment", "assignment_ids", multiple=True,
              help="Serve only this assignment (repeatable; default: every assignment of the course).")
@weak_sandbox_option
@gradebook_option
@pass_course
@library_errors
def serve_command(course: Course, host: str | None, port: int | None, executor_kind: str | None,
                  address: str | None, jobs: int | None, assignment_ids: tuple[str, ...],
                  allow_weak_sandbox: bool, gradebook_path: str | None) -> None:
    """The course server: students sign in with a link from `grade serve-link`, upload, watch their
    grading live and read their report; staff see the queues, regrade, read the class report."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(f"grade serve needs {exc.name}: python -m pip install -e . (it is a "
                                   f"dependency of the grader)") from exc
    from grader.serve.server import DEFAULT_HOST, DEFAULT_PORT, open_server, serve

    interpret_kernels_without_gpu()
    server = open_server(course, gradebook_path=course.gradebook_path(gradebook_path), executor_kind=executor_kind,
                         jobs=jobs, address=address, allow_weak_sandbox=allow_weak_sandbox,
                         assignment_ids=list(assignment_ids) or None)
    serve(server, host or DEFAULT_HOST, DEFAULT_PORT if port is None else port,
          ready=lambda url: click.echo(f"serving {course.root.name} on {url} (Ctrl-C stops)"))


@main.command("serve-link")
@click.argument("user", required=False)
@click.option("--staff", is_flag=True, help="A staff member's link (the queues, regrades, class reports).")
@click.option("--roster", "whole_roster", is_flag=True,
              help="A link for every student on the roster, one 'id,link' line each (for a mail merge).")
@click.option("--url", "base_url", default="http://127.0.0.1:8000", show_default=True,
              help="The server's address as students reach it.")
@gradebook_option
@pass_course
@library_errors
def serve_link(course: Course, user: str | None, staff: bool, whole_roster: bool, base_url: str,
               gradebook_path: str | None) -> None:
    """A signed sign-in link for USER (a student id), valid for course.toml's [serve] link_hours; with
    --roster, one for every student on the roster."""
    from grader.serve.server import sign_in_link

    if whole_roster == (user is not None):
        raise click.UsageError("give a USER or --roster (not both)")
    if user is not None:
        click.echo(sign_in_link(course, user, "staff" if staff else "student", base_url))
        return
    if staff:
        raise click.UsageError("--staff is for one USER")
    from grader.storage.gradebook import Gradebook

    with Gradebook(course.gradebook_path(gradebook_path)) as book:
        students = [entry.id for entry in book.roster()]
    if not students:
        raise click.ClickException("the roster is empty: import it first (grade roster import ROSTER.csv)")
    for student in students:
        click.echo(f"{student},{sign_in_link(course, student, 'student', base_url)}")
