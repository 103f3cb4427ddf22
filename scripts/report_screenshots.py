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

from grader.core.course import Course
from grader.core.manifest import load_manifest
from grader.harness.diagnose import load_reference
from grader.pipeline.grading import grade, open_submission
from grader.pipeline.validate import reference_workspace
from grader.render.report import write_html
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


def failing_workspace(course: Course, assignment_id: str, target: Path, tasks: int = 3) -> Path:
    """The reference with SHOWCASE's mistakes (else the first mutant of `tasks` tasks) swapped in."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    _, mutants = load_reference(course.root, manifest)
    wanted, patches = SHOWCASE.get(assignment_id, ((), {}))
    chosen = [m for m in mutants if m.id in wanted]
    if not chosen:
        seen: set[str] = set()
        for mutant in mutants:
            task = manifest.task_for_function(mutant.function)
            if task and task.id not in seen and len(chosen) < tasks:
                seen.add(task.id)
                chosen.append(mutant)
    workspace = reference_workspace(course, manifest, target, chosen)
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
        with tempfile.TemporaryDirectory() as temp:
            workspace = failing_workspace(course, assignment_id, Path(temp) / "student")
            result = grade(course, assignment_id, open_submission(course, assignment_id, workspace,
                                                                  student="sample-student"),
                           allow_weak_sandbox=True)
            html = write_html(result, Path(temp) / "report.html", course.templates_dir)
            png = ROOT / "docs" / f"report-{assignment_id}.png"
            screenshot(html, png, width=1000, height=2400)
            print(f"{assignment_id}: {result.score.total:g}/{result.score.max_points:g} → {png}")


if __name__ == "__main__":
    main(sys.argv[1:])
