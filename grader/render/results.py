"""Gradescope's results.json from a GradeResult (format: CLI.md).

Failing tests carry their teaching message; hidden tests never show inputs or
code. Tests that could not be judged here (timing without a GPU) are listed
with no status and 0 of their points, and named pending in their output.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from grader.core.records import PENDING, GradeResult
from grader.core.scoring import test_scores
from grader.core.text import printable_data


def _output(outcome, task_status: str, task_reason: str) -> str:
    parts = []
    if task_status == "forbidden":
        parts.append(f"Task earns 0: {task_reason}.")
    if outcome.status == PENDING:
        parts.append(f"Pending: {outcome.message}")
    elif outcome.message:
        parts.append(outcome.message)
    if outcome.detail.get("detail"):
        parts.append(str(outcome.detail["detail"]))
    return "\n".join(parts)


def gradescope_results(result: GradeResult) -> dict:
    """Gradescope's results.json as a dict; every string made printable (grader/text.py)."""
    points = result.score.tests or test_scores(result.score.tasks, result.outcomes)  # older records: fractions
    tasks = {t.task_id: t for t in result.score.tasks}
    tests = []
    for number, (outcome, allocated) in enumerate(zip(result.outcomes, points, strict=True), start=1):
        task = tasks.get(outcome.task)
        forbidden = task is not None and task.status == "forbidden"
        entry = {
            "name": f"{outcome.task} · {outcome.name}" if outcome.task else outcome.name,
            "number": str(number),
            "score": allocated.score,
            "max_score": allocated.max_score,
            "output": _output(outcome, task.status if task else "", task.reason if task else ""),
            "visibility": "visible",
            "tags": [t for t in (outcome.task, outcome.kind) if t],
        }
        if outcome.status != PENDING:
            entry["status"] = "failed" if forbidden else outcome.status
        tests.append(entry)
    score = result.score
    lines = [f"{result.assignment_title}: {score.total:g} / {score.max_points:g} points."]
    if score.late_penalty:
        lines.append(f"Late by {score.late_days} day(s): -{score.late_penalty:g} points.")
    if score.pending_points:
        lines.append(f"{score.pending_points:g} points pending (not judged here).")
    lines.append(f"Input seed {result.seed}; sandbox: {result.isolation_level}"
                 + (" (below the course's required level: graded with --allow-weak-sandbox)."
                    if result.sandbox_override else "."))
    return printable_data({"score": score.total, "execution_time": round(result.duration_s, 3),
                           "output": " ".join(lines), "tests": tests, "visibility": "visible",
                           "stdout_visibility": "hidden"})


def write_json_atomic(path: str | Path, data: dict) -> Path:
    """Write JSON through a temporary file and a rename: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".results-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
    os.replace(temp, path)
    return path


def write_gradescope(result: GradeResult, path: str | Path) -> Path:
    return write_json_atomic(path, gradescope_results(result))
