"""Feedback that never contradicts itself: each line of a failure is true of the student's code.

* a result that is constant on a test's inputs but depends on them (a naive softmax whose overflow was
  guarded to 0) is a wrong value, not a placeholder; a result measured not to depend on the inputs is;
* a mistake that equals the reference on a test's inputs is never that test's hint;
* a failure that is only a dtype, a shape or a device says exactly that, with no other cause;
* the kernel panel reads its counts in the light of the verdict: a wrong output is never "nothing to change".
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from grader.core.course import Course
from grader.core.records import TestOutcome
from grader.harness.reference import load_reference
from grader.harness.runners import InProcessRunner
from grader.harness.testing import Check, GradingContext, StudentProblem
from grader.render.behaviour import behaviour_view
from tests.conftest import ROOT, assignment_of


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


@pytest.fixture(scope="module")
def catalogue(course):
    """{assignment id: (reference functions, mutants)}, loaded once."""
    return {a: load_reference(assignment_of(course, a)) for a in ("assignment1", "assignment2")}


@pytest.fixture
def student(tmp_path, course, catalogue):
    """A Check over a student file written from `source`, with an assignment's real reference and catalogue."""

    def build(assignment: str, filename: str, source: str, task: str) -> Check:
        folder = tmp_path / assignment
        folder.mkdir(exist_ok=True)
        (folder / filename).write_text(textwrap.dedent(source))
        reference, mutants = catalogue[assignment]
        manifest = assignment_of(course, assignment).manifest
        context = GradingContext(runner=InProcessRunner(folder, (filename,)), manifest=manifest,
                                 reference=reference, mutants=mutants, seed=5)
        return Check(context, f"test::{task}", task)

    return build


NAIVE_SOFTMAX = """
import torch

def softmax(x, dim=-1):
    e = torch.exp(x)
    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0)  # 0/0 and inf/inf guarded
"""

PLACEHOLDER_SOFTMAX = """
import torch

def softmax(x, dim=-1):
    return torch.zeros_like(x)
"""


def test_a_naive_softmax_zeroed_by_overflow_is_not_called_a_placeholder(student):
    check = student("assignment1", "attention.py", NAIVE_SOFTMAX, "softmax")
    scores = check.randn(2, 3, 6) * 10 + 400.0  # every exp overflows: the guarded result is all zeros
    with pytest.raises(StudentProblem) as info:
        check.close("softmax", scores)
    text = str(info.value)
    assert "all zeros on these inputs" in text, text
    assert "placeholder" not in text and "does not depend on the inputs" not in text, text
    assert check.record["problem"]["key"] == "values:constant_here"
    assert info.value.kind == "wrong"


def test_a_result_that_never_depends_on_the_inputs_is_still_a_placeholder(student):
    check = student("assignment1", "attention.py", PLACEHOLDER_SOFTMAX, "softmax")
    with pytest.raises(StudentProblem) as info:
        check.close("softmax", check.randn(2, 3, 6) * 10 + 400.0)
    assert "placeholder" in str(info.value) and info.value.kind == "degenerate"
    assert check.record["problem"]["key"] == "degenerate:constant"


ROPE_FLOAT32 = """
import torch
from reference.assignment2.positions import apply_rope as _right

def apply_rope(x, positions, base=10000.0, scale=1.0):
    return _right(x.float(), positions, base, scale)  # right values, returned in float32
"""


def test_a_float16_rope_returned_in_float32_says_only_the_dtype(student, catalogue):
    reference, _ = catalogue["assignment2"]
    assert "apply_rope" in reference
    check = student("assignment2", "positions.py", ROPE_FLOAT32, "rope")
    x = check.randn(1, 2, 8, 16, dtype=torch.float16)
    positions = torch.arange(8)
    with pytest.raises(AssertionError) as info:
        check.close("apply_rope", x, positions)
    text = str(info.value)
    assert "Only the dtype is wrong" in text and "Likely cause" not in text, text
    assert check.record["problem"]["key"] == "only:dtype" and "diagnosis" not in check.record


def test_a_mutant_equal_to_the_reference_on_the_inputs_is_never_the_hint(catalogue):
    from grader.harness.diagnose import diagnose

    reference, mutants = catalogue["assignment1"]
    scores = torch.randn(2, 4, 4)
    # with d_k = 1, "multiplied by sqrt(d_k)" and "divided by sqrt(d_k)" are the same thing
    right = reference["scale_scores"](scores, 1)
    wrong = scores * 3.0  # a mistake nothing in the catalogue makes
    assert diagnose(mutants, "scale_scores", (scores, 1), {}, right, expected=right) is None
    multiplied = next(m for m in mutants if m.id == "scale_multiplied")
    assert torch.allclose(multiplied.fn(scores, 1), right)
    assert diagnose(mutants, "scale_scores", (scores, 1), {}, wrong, expected=right) is None
    # where the mutant differs from the reference it is still found
    d4 = reference["scale_scores"](scores, 4)
    found = diagnose(mutants, "scale_scores", (scores, 4), {}, multiplied.fn(scores, 4), expected=d4)
    assert found is not None and found.mutant_id == "scale_multiplied"


def _probe(output_right: bool) -> dict:
    return {"n": 40, "n_kv": 40, "causal": False, "key_tiles": 1, "key_tiles_per_program": [1],
            "keys_visible_per_program": [40], "widest_key_tile": 64, "multiply_adds": 1, "widest_tile": 64,
            "rescales": 1, "bytes_stored": 1, "outside_loads": 0, "outside_stores": 0, "output_right": output_right}


@pytest.mark.parametrize(("status", "right", "expected"), [
    ("passed", True, "passed"), ("failed", False, "failed"), ("failed", True, "failed")])
def test_the_kernel_panel_reads_its_counts_in_the_light_of_the_verdict(status, right, expected):
    outcome = TestOutcome(name="test_what_the_kernel_does_as_n_grows", task="flash_forward", status=status,
                          kind="" if status == "passed" else "wrong", message="",
                          detail={"behaviour": {"measured": True, "probes": [_probe(right), _probe(True)],
                                                "findings": []}})
    view = behaviour_view(outcome)
    assert view["verdict"]["status"] == expected
    assert ("Nothing to change" in view["verdict"]["text"]) == (expected == "passed")
