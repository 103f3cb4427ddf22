"""Render one feedback report per assignment for a submission that fails
several tasks (the reference with one mutant per task swapped in), and take a
headless-Chromium screenshot of each into docs/.

    python scripts/report_screenshots.py [assignment ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grader.core.course import Course
from grader.core.manifest import load_manifest
from grader.harness.diagnose import load_reference
from grader.pipeline.grading import grade, open_submission
from grader.pipeline.validate import reference_workspace
from grader.render.report import write_html
from tests.browser import screenshot

ROOT = Path(__file__).resolve().parent.parent


def failing_workspace(course: Course, assignment_id: str, target: Path, tasks: int = 3) -> Path:
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    _, mutants = load_reference(course.root, assignment_id, manifest.files)
    chosen, seen = [], set()
    for mutant in mutants:
        task = manifest.task_for_function(mutant.function)
        if task and task.id not in seen and len(chosen) < tasks:
            seen.add(task.id)
            chosen.append(mutant)
    return reference_workspace(course, manifest, target, chosen)


def main(assignments: list[str]) -> None:
    course = Course(ROOT)
    for assignment_id in assignments or course.assignment_ids():
        with tempfile.TemporaryDirectory() as temp:
            workspace = failing_workspace(course, assignment_id, Path(temp) / "student")
            result = grade(course, assignment_id, open_submission(course, assignment_id, workspace,
                                                                  student="sample-student"))
            html = write_html(result, Path(temp) / "report.html", course.templates_dir)
            png = ROOT / "docs" / f"report-{assignment_id}.png"
            screenshot(html, png, width=1000, height=2400)
            print(f"{assignment_id}: {result.score.total:g}/{result.score.max_points:g} → {png}")


if __name__ == "__main__":
    main(sys.argv[1:])
