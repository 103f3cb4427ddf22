"""What the `grade` command prints: the grade table, batch progress and summary.

Rendering for a terminal only (rich); student text is made printable first.
"""

from __future__ import annotations

from collections.abc import Iterable

from grader.core.records import FAILED, GRADER_ERROR, HANDIN_PROBLEM, PENDING, GradeResult
from grader.core.text import printable
from grader.pipeline.batch import BatchSummary
from grader.render.presentation import (
    NOT_ATTEMPTED,
    by_task_order,
    not_attempted_ids,
    status_words,
    task_order,
    unjudged,
    unjudged_points,
)


def print_terminal(result: GradeResult, console=None, show_passed: bool = False) -> None:
    """One line per task, then one block per (task, cause) of the failures: the diagnosis or the
    measured problem once, and the tests it explains (rich, coloured when a TTY).

    Every text from the result goes through printable() first: a submission's
    messages and names must not move the cursor or draw on the terminal.
    """
    from rich.console import Console
    from rich.markup import escape as markup_escape
    from rich.table import Table

    def escape(text: object) -> str:
        return markup_escape(printable(str(text)))

    console = console or Console()
    score = result.score
    skipped = not_attempted_ids(result)
    table = Table(title=f"{escape(result.assignment_title)} — {escape(result.student)}", title_justify="left")
    for column in ("task", "score", "tests", "status"):
        table.add_column(column, justify="right" if column in ("score", "tests") else "left")
    for task in task_order(score.tasks):  # the required tasks, then the bonus tasks
        if task.task_id in skipped:  # an optional task left out: neutral, no colour
            colour, status = "dim", NOT_ATTEMPTED
        else:
            colour = {"graded": "green" if task.earned >= task.points else
                      ("yellow" if task.earned > 0 else "red"),
                      "pending": "cyan", "forbidden": "red", "no_tests": "magenta"}[task.status]
            status = status_words(task.status, result.mode) if task.status != "graded" else (
                "ok" if task.earned >= task.points else "partial" if task.earned else "failed")
        label = task.title + (" (bonus)" if task.bonus else "")
        table.add_row(escape(label), f"{task.earned:g}/{task.points:g}",
                      f"{task.passed}/{task.passed + task.failed}"
                      + (f" +{task.pending} pending" if task.pending else ""),
                      f"[{colour}]{escape(status)}[/{colour}]")
    console.print(table)
    for task in task_order(score.tasks):
        if task.status == "forbidden":
            console.print(f"[red]✗ {escape(task.title)}[/red]: {escape(task.reason)}")
    from grader.render.report import crashed_inputs, failure_groups

    groups = by_task_order(failure_groups(result.outcomes), lambda g: g.task, score.tasks)
    for group in groups:
        if group.task in skipped:
            continue
        count = len(group.outcomes)
        head = f"[red]✗[/red] [bold]{escape(str(group.task))}[/bold] · "
        if group.diagnosis:
            section = group.diagnosis.get("section", "")
            head += f"most likely: [bold]{escape(group.title)}[/bold]" + (f" (lecture {escape(section)})"
                                                                           if section else "")
        else:
            head += f"[bold]{escape(group.title)}[/bold]"
        console.print(head + f" — {count} test{'s' if count != 1 else ''}")
        if group.diagnosis:
            for line in printable(str(group.diagnosis.get("explanation", ""))).splitlines():
                console.print(f"    {escape(line)}")
            if group.variants:
                console.print(f"    reproduced with {escape(group.variants)}")
            if group.diagnosis.get("handout"):
                console.print(f"    see also {escape(group.diagnosis['handout'])}")
        for line in printable(group.detail()).splitlines():
            console.print(f"    {escape(line)}")
        crashed = crashed_inputs(group)
        if len(crashed) > 1:
            console.print(f"    ended the process on: {escape(printable('; '.join(crashed)))}")
        names = [o.name for o in group.outcomes]
        console.print(f"    [dim]{'test' if count == 1 else 'tests'}: {escape(', '.join(names))}[/dim]")
    left_out = [t for t in task_order(score.tasks) if t.task_id in skipped]
    if left_out:
        console.print("[dim]Bonus " + ("task" if len(left_out) == 1 else "tasks") + f" {NOT_ATTEMPTED} (optional): "
                      + escape(", ".join(f"{t.title} ({t.points:g} points)" for t in left_out)) + "[/dim]")
    for outcome in result.outcomes:  # what a kernel did, counted on the CPU: feedback, no points
        for finding in (outcome.detail or {}).get("behaviour", {}).get("findings", []):
            title = escape(printable(str(finding.get("title", ""))))
            console.print(f"[yellow]![/yellow] [bold]{escape(str(outcome.task))}[/bold] · what your kernel did: "
                          f"{title} (no points; the report shows the counts)")
    if show_passed:
        for outcome in result.outcomes:
            if outcome.status == PENDING:
                console.print(f"[cyan]…[/cyan] {escape(outcome.name)}: {escape(outcome.message)}")
    waiting = unjudged(result)
    line = f"[bold]Total: {score.total:g} / {score.max_points:g}[/bold]"
    if score.late_penalty:
        line += f"  (late {score.late_days} day(s): -{score.late_penalty:g})"
    owed = unjudged_points(waiting)
    if owed:
        kinds = list(dict.fromkeys(item.what for item in waiting if not item.bonus))
        line += f"  ({owed:g} points pending: {' and '.join(kinds)}, judged elsewhere; see below)"
    console.print(line)
    for item in waiting:
        console.print(f"[cyan]…[/cyan] {escape(item.line())}")
    console.print(f"[dim]seed {result.seed} · sandbox: {escape(result.isolation_level)} · "
                  f"{result.duration_s:.1f} s[/dim]")
    for gap in result.sandbox_gaps:
        console.print(f"[yellow]note:[/yellow] {escape(gap)}", soft_wrap=True)  # one line, whatever the width


CHECK_TELLS = ("What grade check tells: which public tests pass and, for each failure, what differs, where, "
               "by how much and within which tolerance; any forbidden API in your source; how much of the "
               "quiz is answered.")
CHECK_CANNOT = ("What it cannot tell: your grade. grade submit runs the hidden tests (every rule again, on "
                "more inputs), marks the quiz, and names the most likely mistake behind a failure with the "
                "lecture section on it; the hidden tests, the quiz key and that catalogue of mistakes are "
                "the instructors'.")


def check_exit_status(result: GradeResult) -> int:
    """`grade check`'s exit status: 0 iff no selected public test failed and at least one ran."""
    if any(o.status == FAILED for o in result.outcomes) or all(o.status == PENDING for o in result.outcomes):
        return 1
    return 0


def print_check_summary(result: GradeResult, console=None) -> None:
    """`grade check`'s last lines: the public tests' count (of one task with --task), the quiz's
    completeness, and what check can and cannot tell compared with grade submit."""
    from rich.console import Console
    from rich.markup import escape

    console = console or Console()
    judged = [o for o in result.outcomes if o.status != PENDING]
    passed = sum(o.status == "passed" for o in judged)
    scope = (f"task {result.score.tasks[0].task_id}" if len(result.score.tasks) == 1
             else result.assignment_id)
    console.print(f"Public tests of {escape(printable(scope))}: {passed} of {len(judged)} passed.")
    for outcome in result.outcomes:
        if outcome.name == "quiz::answered":
            blank, questions = outcome.detail.get("unanswered", []), outcome.detail.get("questions", 0)
            state = ("every question has an answer" if not blank else
                     f"{questions - len(blank)} of {questions} answered; blank: {', '.join(blank)}")
            console.print(f"Quiz: {escape(printable(state))} (check does not mark answers).")
    console.print(f"[dim]{CHECK_TELLS}[/dim]")
    console.print(f"[dim]{CHECK_CANNOT}[/dim]")


class RichProgress:
    """A progress bar with counts and ETA on stderr (silent when stderr is not a terminal)."""

    def __init__(self, console=None):
        from rich import progress as bar
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.progress = bar.Progress(bar.TextColumn("[bold]{task.description}"), bar.BarColumn(),
                                     bar.MofNCompleteColumn(), bar.TextColumn("{task.fields[counts]}"),
                                     bar.TimeElapsedColumn(), bar.TextColumn("ETA"), bar.TimeRemainingColumn(),
                                     console=self.console, disable=not self.console.is_terminal)
        self.task = None

    def __enter__(self) -> RichProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, event: str, student: str, summary: BatchSummary) -> None:
        counts = (f"graded {len(summary.graded)} · skipped {len(summary.skipped)} · "
                  f"hand-in problems {len(summary.errors_of(HANDIN_PROBLEM))} · "
                  f"grader errors {len(summary.errors_of(GRADER_ERROR))}")
        if summary.stale:
            counts += f" · stale {len(summary.stale)}"
        if self.task is None:
            self.task = self.progress.add_task(f"grading {summary.assignment_id}", total=summary.total,
                                               counts=counts)
        if event == "planned":  # the ETA should count only real grading, not instant skips
            self.progress.reset(self.task, total=int(student), completed=0, counts=counts)
            return
        self.progress.update(self.task, advance=1 if event in ("graded", "error") else 0, counts=counts)


def _stdout_is_a_terminal() -> bool:
    import sys

    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class ActivityProgress:
    """One line on stderr while something runs: a spinner, what it is doing, how many are done and the
    time so far (silent when stderr is not a terminal). `step(text)` names what runs now; `done(text)`
    counts one more finished item (a validation check, say)."""

    def __init__(self, description: str, console=None, total: int | None = None):
        from rich import progress as bar
        from rich.console import Console

        self.console = console or Console(stderr=True)
        columns = [bar.SpinnerColumn(), bar.TextColumn("[bold]{task.description}"),
                   bar.TextColumn("{task.fields[step]}")]
        if total is not None:
            columns += [bar.BarColumn(), bar.MofNCompleteColumn()]
        else:
            columns += [bar.TextColumn("{task.completed} done")]
        columns += [bar.TimeElapsedColumn()]
        # Lines printed to stdout meanwhile go above the bar only when stdout is that terminal too;
        # a redirected stdout (grade validate > log) keeps every line it is given.
        self.progress = bar.Progress(*columns, console=self.console, transient=True,
                                     disable=not self.console.is_terminal,
                                     redirect_stdout=_stdout_is_a_terminal(), redirect_stderr=False)
        self.task = self.progress.add_task(printable(description), total=total, step="")

    def __enter__(self) -> ActivityProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def step(self, text: str) -> None:
        from rich.markup import escape

        self.progress.update(self.task, step=escape(printable(text)), refresh=True)

    __call__ = step  # grade(progress=...) calls it with each step

    def done(self, text: str = "") -> None:
        from rich.markup import escape

        self.progress.update(self.task, advance=1, step=escape(printable(text)), refresh=True)


def print_summary(summary: BatchSummary, console=None) -> None:
    """The end-of-batch table: graded, skipped, errors, mean score."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"Batch {summary.assignment_id}: {summary.total} submission(s)", title_justify="left")
    table.add_column("")
    table.add_column("count", justify="right")
    mean = summary.mean_score
    rows: Iterable[tuple[str, str]] = (
        ("graded", str(len(summary.graded))),
        ("skipped (already graded)", str(len(summary.skipped))),
        ("of the graded, regraded (stale: the grading changed)", str(len(summary.stale))),
        ("hand-in problems (not readable as a submission)", str(len(summary.errors_of(HANDIN_PROBLEM)))),
        ("grader errors", str(len(summary.errors_of(GRADER_ERROR)))),
        ("mean score of this run", "-" if mean is None else f"{mean:.2f} / {summary.max_points:g}"),
        ("time", f"{summary.elapsed_s:.1f} s"),
    )
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)
    print_batch_students(summary, console)
    for student, error in sorted(summary.errors.items()):
        what = "hand-in problem" if summary.error_kinds.get(student) == HANDIN_PROBLEM else "grader error"
        console.print(f"[red]✗ {escape(printable(student))}[/red] ({what}): {escape(printable(error))}")
    if summary.ignored:
        ignored = printable(", ".join(summary.ignored))
        console.print(f"[yellow]ignored (not a folder, .zip or .ipynb):[/yellow] {escape(ignored)}")


def print_batch_students(summary: BatchSummary, console=None) -> None:
    """One row per entry of the run: the student, their total as it stands, late days and penalty, and
    what changed since the grading that counted before (pipeline.batch.StudentLine)."""
    rows = [(line.student, "-" if line.total is None else f"{line.total:g} / {summary.max_points:g}",
             f"{line.late_days} day(s): -{line.late_penalty:g}" if line.late_days else "",
             line.change) for line in summary.lines]
    _table(f"Students of this run ({summary.assignment_id})", ("student", "total", "late", "changed"), rows,
           console, empty="no entries")


def _table(title: str, columns: tuple[str, ...], rows: list[tuple], console=None, empty: str = "none") -> None:
    """A rich table on a terminal; elsewhere the title, then the header and each row tab-separated."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    if not rows:
        console.print(f"{escape(printable(title))}: {escape(empty)}")
        return
    if not console.is_terminal:  # a pipe or a file: one tab-separated line per row, for scripts
        lines = [printable(title)]  # written as they are: rich would expand the tabs into spaces
        for line in (columns, *rows):
            lines.append("\t".join(printable("" if cell is None else str(cell)).replace("\t", " ").replace("\n", " ")
                                   for cell in line))
        console.file.write("".join(f"{line}\n" for line in lines))
        console.file.flush()
        return
    table = Table(title=escape(printable(title)), title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(printable("" if cell is None else str(cell))) for cell in row))
    console.print(table)


def print_overrides(records: list, console=None) -> None:
    """Overrides (storage.gradebook.OverrideRecord), with their audit."""
    rows = [(str(r.id), r.student_id, r.task_id or "total", f"{r.points:g}",
             f"{r.total_before:g} → {r.total_after:g}", r.reason, f"{r.author}, {r.created_at}",
             "active" if r.active else f"cleared {r.cleared_at} by {r.cleared_by}: {r.cleared_reason}")
            for r in records]
    _table("Score overrides", ("#", "student", "task", "points", "total before → after", "reason", "by, when",
                               "state"), rows, console, empty="none")


def print_extensions(records: dict, console=None) -> None:
    """student → storage.gradebook.ExtensionRecord."""
    rows = [(student, r.describe(), r.assignment_id or "every assignment (roster)", r.reason,
             f"{r.author}, {r.granted_at}") for student, r in sorted(records.items())]
    _table("Extensions", ("student", "extension", "for", "reason", "by, when"), rows, console, empty="none")


def print_history(gradings: list, console=None, lowered: dict | None = None) -> None:
    """storage.gradebook.Grading rows, oldest first per student; `lowered`: student → the overrides below
    what their current grading earns (render.standing.Lowered), said on that row."""
    lowered = lowered or {}

    def state(g) -> str:
        if not g.current:
            return f"replaced {g.replaced_at}: {g.replaced_because}" if g.replaced_at else g.replaced_because or ""
        return "; ".join(["current", *(item.staff_line() for item in lowered.get(g.student_id, ()))])

    rows = [(g.student_id, g.graded_at, f"{g.total:g} / {g.max_points:g}", g.sha256[:12], state(g))
            for g in gradings]
    _table("Gradings", ("student", "graded", "total", "files", "state"), rows, console, empty="none")


def print_replay(replay, console=None) -> None:
    """`grade replay`'s account (grader.pipeline.replay.Replay): what was replayed and how, each test
    whose verdict or points differ, the totals, and what could explain a difference."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def text(value: object) -> str:
        return escape(printable(str(value)))

    console = console or Console()
    record, result = replay.record, replay.result
    console.print(f"Replayed {text(record.student_id)}'s grading of {text(record.assignment_id)} from "
                  f"{text(record.graded_at)}: files {text(record.sha256[:12])}, seed {result.seed}, "
                  f"sandbox {text(result.isolation_level)}.")
    if replay.tests:
        table = Table(title="Tests that differ", title_justify="left")
        for column in ("test", "recorded", "replayed", "points then", "points now"):
            table.add_column(column, justify="right" if column.startswith("points") else "left", overflow="fold")
        for change in replay.tests:
            table.add_row(text(change.name) + (" [dim](timed: measured again)[/dim]" if change.timed else ""),
                          text(change.recorded or "not run"), text(change.replayed or "not run"),
                          "–" if change.recorded_points is None else f"{change.recorded_points:g}",
                          "–" if change.replayed_points is None else f"{change.replayed_points:g}")
        console.print(table)
    same_total = replay.recorded_total == replay.replayed_total
    console.print(f"Total: recorded {replay.recorded_total:g}, replayed {replay.replayed_total:g} / "
                  f"{result.score.max_points:g}" + ("" if same_total else "  [red](differs)[/red]"))
    if replay.stands is not None and replay.replay_stands is not None:
        stands, again = replay.stands, replay.replay_stands
        console.print(f"As it stands (extension and overrides applied): {stands.total:g} now; the replay would "
                      f"stand at {again.total:g}" + ("" if stands.total == again.total else "  [red](differs)[/red]"))
        for override in again.score.overrides:
            console.print(f"  override of {text(override.task or 'the total')}: {override.points:g} (computed "
                          f"{override.computed if override.computed is not None else 0:g}; {text(override.reason)}, "
                          f"{text(override.author)})")
        if stands.extension:
            console.print(f"  extension: {text(stands.extension.describe())} ({text(stands.extension.reason)})")
    for name, (then, now) in replay.versions.items():
        console.print(f"[yellow]version differs:[/yellow] {text(name)} {text(then or 'none')} then, "
                      f"{text(now or 'none')} now")
    if replay.fingerprint_changed:
        console.print("[yellow]what grades this assignment changed since this grading[/yellow] (the manifest, "
                      "hidden tests, reference, catalogue, quiz key or the grader's version: its fingerprint "
                      "differs, or the record predates fingerprints)")
    if replay.level_changed:
        console.print(f"[yellow]sandbox level differs:[/yellow] {text(replay.recorded_level)} then, "
                      f"{text(result.isolation_level)} now (this host cannot give the recorded one)")
    if replay.identical:
        console.print("[green]Identical:[/green] every test's verdict and points, and the total, are as recorded.")
    else:
        console.print(f"[red]Different:[/red] {len(replay.tests)} test(s) differ"
                      + ("" if same_total else ", and the total") + ".")
    for line in replay.said:
        console.print(text(line))


def print_roster(entries: list, extensions: dict, graded: dict[str, list[str]],
                 everyone: list[str] | None = None, console=None) -> None:
    """The roster (storage.gradebook.RosterEntry rows), with each student's roster extension and the
    assignments graded; `everyone`: every known id, those not on the roster marked so."""
    rows = [(e.id, e.name or "", e.email or "", e.section or "",
             extensions[e.id].describe() if e.id in extensions else "", ", ".join(graded.get(e.id, [])) or "none",
             "") for e in entries]
    on_roster = {e.id for e in entries}
    for student in sorted(set(everyone or ()) - on_roster):
        rows.append((student, "", "", "", "", ", ".join(graded.get(student, [])) or "none", "not on the roster"))
    _table(f"Roster: {len(entries)} student(s)", ("id", "name", "email", "section", "extension", "graded", "note"),
           sorted(rows), console, empty="no roster imported (grade roster import ROSTER.csv)")


class ValidateOutput:
    """What `grade validate` prints for one assignment: its name, one line per finished check (on a terminal
    or in a pipe, never wrapped), what is about to run, and a summary; a spinner on a terminal's stderr."""

    def __init__(self, assignment_id: str, console=None):
        from rich.console import Console

        self.assignment_id = assignment_id
        self.console = console or Console(soft_wrap=True, highlight=False)  # one line per check, in a pipe too
        self.activity = ActivityProgress(f"validating {assignment_id}")
        self.started = 0.0

    def __enter__(self) -> ValidateOutput:
        import time

        self.started = time.perf_counter()
        self.console.print(f"[bold]{self.assignment_id}[/bold]")
        self.activity.__enter__()
        self.activity.step("consistency checks")
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.activity.__exit__(kind, value, traceback)
        if kind is not None and issubclass(kind, KeyboardInterrupt):  # Ctrl-C or SIGTERM (GradeGroup): say so
            self.interrupted()

    def verdict(self, verdict) -> None:
        from rich.markup import escape

        mark = "[green]✓[/green]" if verdict.ok else "[red]✗[/red]"
        task = f" [{printable(verdict.task)}]" if verdict.task else ""
        when = " (cached)" if verdict.cached else (f" ({verdict.seconds:.1f} s)" if verdict.seconds else "")
        self.console.print(f"  {mark} {escape(printable(verdict.subject))}{escape(task)}: "
                           f"{escape(printable(verdict.detail))}[dim]{escape(when)}[/dim]")
        self.activity.done(verdict.subject)

    def announce(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(f"  [dim]{escape(printable(text))}[/dim]")
        self.activity.step(text)

    def interrupted(self) -> None:
        self.console.print(f"[red]interrupted[/red]: {self.assignment_id} not validated; no grading is left running")

    def summary(self, verdicts: list) -> int:
        """The last line; how many checks failed."""
        import time

        failed = sum(not v.ok for v in verdicts)
        self.console.print(f"[bold]{self.assignment_id}[/bold]: {len(verdicts) - failed} check(s) passed, {failed} "
                           f"failed, in {time.perf_counter() - self.started:.1f} s")
        return failed
