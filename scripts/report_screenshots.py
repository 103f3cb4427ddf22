"""Render one feedback report per assignment for a submission that fails several tasks, and take
a headless-Chromium screenshot of each into docs/.

    PYTHONPATH=. python scripts/report_screenshots.py [assignment ...]

The submission is the reference with a few catalogued mistakes swapped in and code from
tests/fixtures (SHOWCASE: a raised exception, a heatmap, a softmax-equivalent ALiBi, a real
Triton kernel with a tile-dependent bug), so that the pictures show failures grouped by cause,
each cause once with the tests it explains.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from grader.authoring.validate import reference_workspace
from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.harness.reference import load_reference
from grader.pipeline.grading import GradeRequest, grade, open_submission
from grader.pipeline.record import HtmlReport
from tests.browser import screenshot

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

# assignment → (mutant ids swapped into the reference, {student file: fixture file appended to it})
SHOWCASE: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "assignment1": (("scores_k_T_batched", "sdpa_mask_fill_zero", "softmax_no_max_subtraction"), {}),
    # the BLOOM / fairseq ALiBi (+m·j): softmax-equivalent, not the contract's values
    "assignment2": (("mha_mask_inverted", "rope_interleaved"),
                    {"positions.py": "assignment2_alibi_bloom/positions.py"}),
    # a real Triton kernel with 16-wide tiles and unmasked tail keys, instead of the reference's
    "assignment3": (("gqa_tiled_heads", "window_attention_too_wide"), {"flash.py": "triton_kernels/tail_keys_16.py"}),
}


def failing_workspace(assignment: Assignment, target: Path, tasks: int = 3) -> Path:
    """The reference with SHOWCASE's mistakes (else the first mutant of `tasks` tasks) swapped in."""
    manifest = assignment.manifest
    _, mutants = load_reference(assignment)
    wanted, patches = SHOWCASE.get(assignment.id, ((), {}))
    chosen = [m for m in mutants if m.id in wanted]
    if not chosen:
        seen: set[str] = set()
        for mutant in mutants:
            task = manifest.task_for_function(mutant.function)
            if task and task.id not in seen and len(chosen) < tasks:
                seen.add(task.id)
                chosen.append(mutant)
    workspace = reference_workspace(assignment, target, chosen)
    for filename, fixture in patches.items():
        if fixture.startswith("triton_kernels/"):  # a whole kernel file replaces the reference's
            shutil.copyfile(FIXTURES / fixture, workspace / filename)
        else:  # its definitions replace the reference's when appended
            with open(workspace / filename, "a", encoding="utf-8") as fh:
                fh.write("\n\n" + (FIXTURES / fixture).read_text(encoding="utf-8"))
    return workspace


def main(assignments: list[str]) -> None:
    course = Course(ROOT)
    for assignment_id in assignments or course.assignment_ids():
        assignment = Assignment.load(course, assignment_id)
        with tempfile.TemporaryDirectory() as temp:
            workspace = failing_workspace(assignment, Path(temp) / "student")
            result = grade(assignment, open_submission(assignment, workspace, student="sample-student"),
                           GradeRequest(allow_weak_sandbox=True))
            html = Path(temp) / "report.html"
            HtmlReport(html, course.templates_dir).deliver(result, None)
            png = ROOT / "docs" / f"report-{assignment_id}.png"
            screenshot(html, png, width=1000, height=2400)
            print(f"{assignment_id}: {result.score.total:g}/{result.score.max_points:g} → {png}")


if __name__ == "__main__":
    import os

    import torch

    if not torch.cuda.is_available():  # this script's edge: Triton's interpreter for the kernels
        os.environ.setdefault("TRITON_INTERPRET", "1")
    main(sys.argv[1:])
