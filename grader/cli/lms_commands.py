"""The staff's LMS commands: the tool's key, grades back, the roster from the LMS (docs/LMS.md)."""

from __future__ import annotations

import json

import click

from grader.cli.class_commands import roster
from grader.cli.main import gradebook_option, library_errors, main, pass_course
from grader.core.course import Course

VIA = click.option("--via", type=click.Choice(["lti", "canvas"]), default=None,
                   help="LTI 1.3 services, or Canvas's REST API (default: LTI where course.toml sets it up).")


@main.group()
def lms() -> None:
    """The link to the course's LMS (course.toml's [lms] table)."""


@lms.command("key")
@pass_course
@library_errors
def lms_key(course: Course) -> None:
    """Make the tool's key (once) and print its public JWKS, for the tool's registration in the LMS."""
    from grader.lms.config import load
    from grader.lms.keys import load_key, make_key, public_jwks

    config = load(course.root)
    if config.lti is None:
        raise click.ClickException("course.toml [lms] has no LTI 1.3 settings (issuer, client_id, ...)")
    made = make_key(config.lti.tool_key)
    click.echo(f"{'made' if made else 'kept'} the tool's key {config.lti.tool_key} (keep it secret; never commit it)",
               err=True)
    click.echo(json.dumps(public_jwks(load_key(config.lti.tool_key)), indent=2))


@lms.command("push")
@click.argument("assignment")
@click.option("--student", default=None, help="Only this student's grade.")
@click.option("--dry-run", is_flag=True, help="List what would be sent; send nothing.")
@VIA
@gradebook_option
@pass_course
@library_errors
def lms_push(course: Course, assignment: str, student: str | None, dry_run: bool, via: str | None,
             gradebook_path: str | None) -> None:
    """Send each changed grade of ASSIGNMENT to the LMS (only what differs from what it holds)."""
    from grader.cli.class_commands import _existing_gradebook
    from grader.core.assignment import Assignment
    from grader.lms.config import load
    from grader.lms.passback import push, target_for

    config = load(course.root)
    assigned = Assignment.load(course, assignment)
    with _existing_gradebook(course, gradebook_path) as book:
        report = push(assigned, book, target_for(config, book, via), dry_run=dry_run, student=student)
    for line in report.lines(dry_run):
        click.echo(line)
    if report.failed:
        raise SystemExit(1)


@roster.command("sync")
@VIA
@gradebook_option
@pass_course
@library_errors
def roster_sync(course: Course, via: str | None, gradebook_path: str | None) -> None:
    """Fill the roster from the LMS's member list; extensions and sections are kept."""
    from grader.lms.config import load
    from grader.lms.roster_sync import lms_members, sync
    from grader.storage.gradebook import Gradebook

    config = load(course.root)
    with Gradebook(course.gradebook_path(gradebook_path)) as book:
        members, platform, match = lms_members(config, book, via)
        report = sync(book, members, platform, match)
    for line in report.lines():
        click.echo(line)
