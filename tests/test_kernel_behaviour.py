"""What a FlashAttention kernel does, counted through Triton's interpreter (grader.sandbox.kernel_counts)
and read by grader.harness.kernel_behaviour, as the hidden test test_flash_behaviour records it:

* the reference kernel's counts say nothing to change (and show its block skipping: 10 of 16 key
  tiles at N = 200, causal);
* each count diagnosis fires on a kernel that has the mistake: a causal loop that visits every key
  tile, a kernel that scores whole rows at once, the catalogue's kernel without a rescale;
* counts that disagree with what the trusted side knows are not used;
* graded for real, in the kernel worker, a kernel without block skipping keeps all its points and
  its report shows the finding, the plot with its text alternative, and the counts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.core.course import Course
from grader.harness.kernel_behaviour import Probe, behaviour, check_counts
from grader.harness.reference import course_imports, load_reference
from grader.harness.runners import InProcessRunner
from grader.harness.suite import run_suite
from grader.harness.testing import GradingContext
from grader.render.report import render_html
from tests.conftest import FIXTURES, ROOT, assignment_of, grade_workspace

KERNELS = FIXTURES / "triton_kernels"
BEHAVIOUR_TEST = "test_flash_behaviour.py"


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


def _kernel_file(tmp_path: Path, text: str) -> Path:
    workspace = tmp_path / "student"
    workspace.mkdir(exist_ok=True)
    (workspace / "flash.py").write_text(text)
    return workspace


def _behaviour_in_process(course: Course, workspace: Path, tmp_path: Path):
    """The hidden behaviour test alone, run in this process on `workspace`'s kernel (plain pytest's way)."""
    assignment = assignment_of(course, "assignment3")
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copyfile(assignment.hidden_tests / BEHAVIOUR_TEST, tests / BEHAVIOUR_TEST)
    with course_imports(course.root):
        reference, mutants = load_reference(assignment)
        context = GradingContext(runner=InProcessRunner(workspace, assignment.manifest.files,
                                                        assignment.manifest.contract, assignment.contract_module),
                                 manifest=assignment.manifest, reference=reference, mutants=mutants, seed=11,
                                 hidden=True)
        outcomes, errors = run_suite(tests, context, only_task="flash_forward")
    assert not errors and len(outcomes) == 1
    return outcomes[0]


@pytest.mark.slow
def test_the_reference_kernel_has_nothing_to_change(course, tmp_path):
    workspace = _kernel_file(tmp_path, (ROOT / "reference" / "assignment3" / "flash.py").read_text())
    outcome = _behaviour_in_process(course, workspace, tmp_path)
    assert outcome.status == "passed"
    recorded = outcome.detail["behaviour"]
    assert recorded["measured"] and recorded["findings"] == []
    by = {(p["n"], p["causal"]): p for p in recorded["probes"]}
    assert by[(200, False)]["key_tiles_per_program"] == [4, 4, 4, 4]  # 64-key tiles, 64-row blocks
    assert by[(200, True)]["key_tiles_per_program"] == [1, 2, 3, 4]  # it stops at each block's last row
    assert by[(200, False)]["widest_tile"] == 64 * 64 and by[(200, True)]["rescales"] == 10
    assert all(p["outside_loads"] == p["outside_stores"] == 0 for p in recorded["probes"])


def _no_rescale_kernel(course: Course) -> str:
    """The reference kernel with the catalogue's flash_no_rescale patch (what `grade validate` grades)."""
    assignment = assignment_of(course, "assignment3")
    with course_imports(course.root):
        _, mutants = load_reference(assignment)
    text = (ROOT / "reference" / "assignment3" / "flash.py").read_text()
    for old, new in next(m for m in mutants if m.id == "flash_no_rescale").patch:
        text = text.replace(old, new)
    return text


@pytest.mark.slow
@pytest.mark.parametrize("kernel, finding, passes", [
    ("no_block_skipping", "kernel_no_causal_block_skipping", True),
    ("whole_row_scores", "kernel_scores_held_whole", True),
    ("flash_no_rescale", "kernel_no_rescale", False),
])
def test_each_count_diagnosis_fires_on_its_kernel(course, tmp_path, kernel, finding, passes):
    text = _no_rescale_kernel(course) if kernel == "flash_no_rescale" else (KERNELS / f"{kernel}.py").read_text()
    outcome = _behaviour_in_process(course, _kernel_file(tmp_path, text), tmp_path)
    recorded = outcome.detail["behaviour"]
    assert recorded["measured"]
    assert [f["id"] for f in recorded["findings"]] == [finding]
    assert recorded["findings"][0]["section"] == "§24"
    # the output decides the test; the counts are feedback
    assert outcome.status == ("passed" if passes else "failed")
    if not passes:
        assert outcome.diagnosis["id"] == "flash_no_rescale"
    by = {(p["n"], p["causal"]): p for p in recorded["probes"]}
    if kernel == "no_block_skipping":
        assert by[(200, True)]["key_tiles"] == by[(200, False)]["key_tiles"] == 16
    if kernel == "whole_row_scores":
        assert all(p["key_tiles_per_program"] == [1] * p["programs"] for p in recorded["probes"])
        assert {p["widest_tile"] for p in recorded["probes"]} == {64 * 512}
    if kernel == "flash_no_rescale":
        assert all(p["rescales"] == 0 for p in recorded["probes"])


def _counts(grid: list[int], out_stored: int) -> dict:
    """One launch record as grader.sandbox.kernel_counts writes it: one program per row block."""
    programs = {f"{x},0,0": {"loads": {"0": [1, 64 * 16, 64 * 16], "1": [1, 64 * 16, 64 * 16]},
                             "stores": {"3": [1, out_stored // grid[0], 64 * 16]}, "outside_loads": 0,
                             "outside_stores": 0, "dots": 2, "dot_macs": 131072, "widest_dot": 4096,
                             "tile_exps": 1, "row_exps": 1} for x in range(grid[0])}
    return {"kernel": "_flash_fwd_kernel", "grid": grid, "arguments": [], "programs": programs,
            "programs_dropped": 0}


def test_counts_that_disagree_with_what_the_grader_knows_are_not_used():
    right = Probe(100, 100, 16, 1, False, _counts([2, 1, 1], 1600), True, 1600)
    assert check_counts(right) is None
    too_few_stores = Probe(100, 100, 16, 1, False, _counts([2, 1, 1], 800), True, 1600)
    assert "only 800 stores into Out" in check_counts(too_few_stores)
    other_grid = Probe(100, 100, 16, 2, False, _counts([2, 1, 1], 1600), True, 1600)  # B · H = 2
    assert "grid" in check_counts(other_grid)
    recorded = behaviour([right, too_few_stores])
    assert not recorded["measured"] and "not used" in recorded["reason"] and recorded["findings"] == []
    assert not behaviour([Probe(100, 100, 16, 1, False, {}, True, 1600)])["measured"]  # compiled: nothing counted


@pytest.mark.sandbox
def test_a_kernel_without_block_skipping_keeps_its_points_and_is_told(course, tmp_path):
    workspace = _kernel_file(tmp_path, (KERNELS / "no_block_skipping.py").read_text())
    result = grade_workspace(course, "assignment3", workspace, student="student", only_task="flash_forward",
                             allow_weak_sandbox=True, use_gpu=False)
    task = next(t for t in result.score.tasks if t.task_id == "flash_forward")
    assert task.earned == task.points  # the course's decision: feedback, no points (docs/AUTHORING.md)
    outcome = next(o for o in result.outcomes if o.name.startswith("test_flash_behaviour::"))
    recorded = outcome.detail["behaviour"]  # counted in the kernel worker, checked by the trusted side
    assert recorded["measured"], recorded["reason"]
    assert [f["id"] for f in recorded["findings"]] == ["kernel_no_causal_block_skipping"]
    page = render_html(result, ROOT / "templates")
    assert 'data-finding="kernel_no_causal_block_skipping"' in page and "What your kernel did" in page
    assert 'alt="Two line charts of what your kernel did at N = 40, 100, 200.' in page
    assert "key tiles loaded over the whole grid, 1, 4, 16 without the causal mask and 1, 4, 16 with it" in page
