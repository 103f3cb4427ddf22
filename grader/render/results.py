"""Gradescope's results.json from a GradeResult (format: docs/CLI.md, docs/GRADESCOPE.md).

Gradescope's specification (gradescope-autograders.readthedocs.io, "Autograder
Specifications") is followed field by field:
- `tests` in task order (grader.render.presentation: the required tasks in the
  manifest's order, then the bonus tasks), each test keeping its place inside its
  task, numbered "task.test";
- a bonus task not attempted says so first in each of its tests' output, as an
  optional task left out, not as a failure to explain;
- per-test `score`/`max_score` exactly as scoring allocated them
  (`Score.tests`); nothing here computes a point;
- per-test `visibility` from the manifest's `[gradescope]` table: hidden tests
  and public ones each get their own (`visible` unless the course says otherwise);
- a test not judged here (timing without a GPU) carries no score, no max_score and
  no status, so Gradescope shows it as neither passed nor failed, and its output
  says it is pending, what it is worth, and who judges it, where and when;
- `output_format`/`test_output_format` "md": every text is Markdown with each
  character Markdown could act on escaped, so a student's exception message
  renders as the text it is (no link, image or HTML);
- `leaderboard`: the kernel speed of each verified timing test (lower is better);
- `extra_data`: seed, sandbox level, versions and the deadline applied.
Failing tests carry their teaching message; hidden tests never show inputs or code.
"""

from __future__ import annotations

import json
import re

from grader.core.manifest import Manifest
from grader.core.records import PENDING, GradeResult, Score, TestOutcome, TestScore
from grader.core.scoring import POINT_DECIMALS, test_scores
from grader.core.text import printable_data
from grader.render.presentation import NOT_ATTEMPTED, Unjudged, not_attempted_ids, task_order, unjudged, unjudged_points

OUTPUT_FORMAT = "md"  # Gradescope renders the top-level and test outputs as (basic) Markdown
DEFAULT_VISIBILITY = {"hidden": "visible", "visible": "visible"}  # outcome visibility → Gradescope's
# What Markdown acts on anywhere in a line (links, images, HTML, code, emphasis, tables, entities, math;
# an underscore only at a word's edge), and what it acts on at a line's start (lists, headings).
_ACTIVE = re.compile(r"[\\`*\[\]<>|~&$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_LIST_OR_HEADING = re.compile(r"^(?:[-+#]|\d+(?=[.)]))")


def _escape_line(line: str) -> str:
    line = _ACTIVE.sub(lambda m: "\\" + m.group(0), line.strip())
    start = _LIST_OR_HEADING.match(line)
    if start is None:
        return line
    if start.group(0)[0].isdigit():  # "1." or "1)": escape the mark after the number
        return start.group(0) + "\\" + line[start.end():]
    return "\\" + line


def markdown_text(text: str) -> str:
    """`text` as Markdown that renders as exactly that text (every character Markdown would act on
    escaped), each line its own paragraph."""
    return "\n\n".join(line for line in map(_escape_line, text.splitlines()) if line)


def _points(value: float) -> str:
    return f"{value:g}"


def _output(outcome: TestOutcome, allocated: TestScore, task_status: str, task_reason: str,
            skipped: bool = False, waiting: Unjudged | None = None) -> str:
    parts = []
    if skipped:
        parts.append(f"**Bonus task {NOT_ATTEMPTED}** (optional; nothing of it is written yet).")
    if task_status == "forbidden":
        parts.append(f"**Task earns 0:** {markdown_text(task_reason + '.')}")
    if outcome.status == PENDING:
        who = f" {markdown_text(waiting.who[0].upper() + waiting.who[1:] + '.')}" if waiting else ""
        parts.append(f"**Pending** (worth {_points(allocated.max_score)} points, not judged here): "
                     f"{markdown_text(outcome.message)}{who}")
    elif outcome.message:
        parts.append(markdown_text(outcome.message))
    if outcome.detail.get("detail"):
        parts.append(markdown_text(str(outcome.detail["detail"])))
    return "\n\n".join(parts)


def _visibility(manifest: Manifest | None) -> dict[str, str]:
    if manifest is None:
        return dict(DEFAULT_VISIBILITY)
    return {"hidden": manifest.gradescope.hidden_tests, "visible": manifest.gradescope.public_tests}


def _leaderboard(result: GradeResult) -> list[dict]:
    """One entry per verified GPU timing: the student's time over the reference's (lower is better)."""
    entries = []
    for outcome in result.outcomes:
        timing = outcome.detail.get("timing")
        if outcome.status == PENDING or not isinstance(timing, dict) or "ratio" not in timing:
            continue
        if not timing.get("verified", False) or timing.get("cpu_timed", False):
            continue
        label = outcome.name.split("::")[-1]
        entries.append({"name": f"{label}: time / reference", "value": round(float(timing["ratio"]), 3),
                        "order": "asc"})
        median = (timing.get("student") or {}).get("median_ms")
        if median is not None:
            entries.append({"name": f"{label}: ms", "value": round(float(median), 4), "order": "asc"})
    return entries


def score_sentences(score: Score, lead: str) -> list[str]:
    """The total after `lead` (e.g. the assignment's title) and the late penalty, in words:
    the opening of every summary a student reads outside the report."""
    lines = [f"{lead}: {score.total:g} / {score.max_points:g} points."]
    if score.late_penalty:
        lines.append(f"Late by {score.late_days} day(s): -{score.late_penalty:g} points.")
    return lines


def _summary(result: GradeResult) -> str:
    score = result.score
    lines = score_sentences(score, result.assignment_title)
    if score.due_at:
        extended = f" (extended by {score.extension_s / 3600:g} h for you)" if score.extension_s else ""
        lines.append(f"Due {score.due_at}{extended}.")
    waiting = unjudged(result)
    if unjudged_points(waiting):
        lines.append(f"{unjudged_points(waiting):g} points pending (not judged here):")
        lines += [f"{item.line()}." for item in waiting]
    lines.append(f"Input seed {result.seed}; sandbox: {result.isolation_level}"
                 + (" (below the course's required level: graded with --allow-weak-sandbox)."
                    if result.sandbox_override else "."))
    return "\n".join(lines)


def gradescope_results(result: GradeResult, manifest: Manifest | None = None) -> dict:
    """Gradescope's results.json as a dict; every string made printable (grader/core/text.py).

    `manifest` gives the visibility of hidden and public tests (default: both visible)."""
    points = result.score.tests or test_scores(result.score.tasks, result.outcomes)  # records from before tests
    visibility = _visibility(manifest)
    tasks = {t.task_id: t for t in task_order(result.score.tasks)}  # the required tasks, then the bonus ones
    order = {task_id: index for index, task_id in enumerate(tasks)}
    skipped = not_attempted_ids(result)
    waiting = {item.task_id: item for item in unjudged(result)}
    pairs = list(zip(result.outcomes, points, strict=True))
    pairs.sort(key=lambda pair: order.get(pair[0].task, len(order)))  # stable: each task keeps its order
    tests = []
    counters: dict[int, int] = {}
    for outcome, allocated in pairs:
        task = tasks.get(outcome.task)
        task_number = order.get(outcome.task, len(order)) + 1
        counters[task_number] = counters.get(task_number, 0) + 1
        entry = {
            "name": f"{outcome.task} · {outcome.name}" if outcome.task else outcome.name,
            "number": f"{task_number}.{counters[task_number]}",
            "output": _output(outcome, allocated, task.status if task else "", task.reason if task else "",
                              outcome.task in skipped, waiting.get(outcome.task)),
            "output_format": OUTPUT_FORMAT,
            "visibility": visibility.get(outcome.visibility, visibility["hidden"]),
            "tags": [t for t in (outcome.task, outcome.kind) if t],
        }
        if outcome.status == PENDING:
            entry["extra_data"] = {"pending": True, "max_score": allocated.max_score}
        else:
            forbidden = task is not None and task.status == "forbidden"
            entry.update(score=allocated.score, max_score=allocated.max_score,
                         status="failed" if forbidden else str(outcome.status))
        tests.append(entry)
    score = result.score
    data = {"score": round(score.total, POINT_DECIMALS), "execution_time": round(result.duration_s, 3),
            "output": markdown_text(_summary(result)), "output_format": OUTPUT_FORMAT,
            "test_output_format": OUTPUT_FORMAT, "tests": tests, "visibility": "visible",
            "stdout_visibility": "hidden",
            "extra_data": {"assignment": result.assignment_id, "mode": result.mode, "seed": result.seed,
                           "sandbox_level": result.isolation_level, "sandbox_override": result.sandbox_override,
                           "versions": dict(result.versions), "submission_sha256": result.submission_sha256,
                           "submitted_at": result.submitted_at, "due_at": score.due_at,
                           "extension_s": score.extension_s, "late_days": score.late_days,
                           "late_penalty": score.late_penalty, "graded_at": result.graded_at}}
    leaderboard = _leaderboard(result)
    if leaderboard:
        data["leaderboard"] = leaderboard
    return printable_data(data)


def results_text(data: dict) -> str:
    """results.json's text (Gradescope reads it as JSON)."""
    return json.dumps(data, indent=2)
