"""Precision measured, not guessed (grader.harness.precision): a wrong result's errors against a float64
oracle, in units of its dtype's rounding, and what their profile says.

* each precision diagnosis fires on a fixture that has the mistake (tests/fixtures/precision: a softmax
  rounded through float16, one whose sum runs in a float16 total, attention that exponentiates
  unshifted scores), with its numbers, through the real check and hidden tests;
* the reference, and wrong-but-precise results (the catalogue's logic mistakes), get no precision
  diagnosis.
"""

from __future__ import annotations

import math
import types
from pathlib import Path

import pytest
import torch

from grader.core.course import Course
from grader.harness import precision
from grader.harness.reference import course_imports, load_reference
from tests.conftest import FIXTURES, ROOT, assignment_of, grade_workspace, hidden_outcomes

PRECISION = FIXTURES / "precision"
REFERENCE = ROOT / "reference" / "assignment1" / "attention.py"


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


def _module(fixture: str | None) -> types.ModuleType:
    """The reference's attention.py with a fixture's functions appended (how `grade validate` builds a
    mutant's workspace), as a module."""
    text = REFERENCE.read_text() + ("\n\n" + (PRECISION / f"{fixture}.py").read_text() if fixture else "")
    module = types.ModuleType(f"precision_{fixture}")
    exec(compile(text, f"{fixture}.py", "exec"), module.__dict__)  # noqa: S102  (course files, trusted)
    return module


def _softmax_profile(fixture: str | None, dtype=torch.float32, dim: int = -1):
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(1), dtype=torch.float64).mul(2.0).to(dtype)
    actual = _module(fixture).softmax(x, dim=dim)
    oracle = torch.softmax(x.double(), dim=dim)
    return precision.explain(actual, oracle, dtype, (x,), {"dim": dim})


def test_the_reference_is_as_precise_as_its_dtype_and_gets_no_diagnosis():
    for dtype in (torch.float32, torch.float64):
        found, profile = _softmax_profile(None, dtype)
        assert found is None and profile.nonfinite == 0
        assert profile.p90_units <= 4  # a few units of its own rounding
    q, k, v = (torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(i)) * 30 for i in range(3))
    out, _ = _module(None).scaled_dot_product_attention(q, k, v)
    exact, _ = _module(None).scaled_dot_product_attention(q.double(), k.double(), v.double())
    found, profile = precision.explain(out, exact, torch.float32, (q, k, v), {})
    assert found is None and profile.largest_score > 1000  # large scores, handled: nothing to say


@pytest.mark.parametrize("fixture, finding", [
    ("softmax_float16", "precision_float16_softmax"),
    ("softmax_float16_sum", "precision_float16_accumulation"),
])
@pytest.mark.parametrize("dim", [-1, 0])
def test_float16_rounding_is_told_from_float16_accumulation(fixture, finding, dim):
    found, profile = _softmax_profile(fixture, dim=dim)
    assert found is not None and found.mutant_id == finding and found.source == "precision"
    assert found.section == "§10"
    assert 64 < profile.p90_units and profile.units_of(torch.float16) <= 8  # float16's rounding, in float32
    assert "units of float32's rounding" in found.explanation and "float16's (eps = 2^-10)" in found.explanation
    if finding == "precision_float16_accumulation":
        assert profile.row_factor_p90_units <= 0.25 * profile.p90_units  # one factor per row explains it
    else:
        assert profile.row_factor_p90_units > 0.25 * profile.p90_units


def test_errors_far_below_float16s_rounding_are_not_called_float16():
    # a float64 call computed in float32 (grader.harness.differences names that one)
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 3
    in_float32 = torch.softmax(x.float(), dim=-1).double()
    found, profile = precision.explain(in_float32, torch.softmax(x, dim=-1), torch.float64, (x,), {})
    assert found is None and profile.p90_units > 64 and profile.units_of(torch.float16) < 1 / 64


def test_an_overflow_names_the_score_and_the_limit():
    q, k, v = (torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(i)) * (30 if i < 2 else 1)
               for i in range(3))
    out, _ = _module("attention_overflow").scaled_dot_product_attention(q, k, v)
    exact, _ = _module(None).scaled_dot_product_attention(q.double(), k.double(), v.double())
    found, profile = precision.explain(out, exact, torch.float32, (q, k, v), {})
    assert found.mutant_id == "precision_overflow" and profile.nonfinite > 0
    expected_score = float((q.double() @ k.double().transpose(-2, -1)).abs().max()) / math.sqrt(16)
    assert profile.largest_score == pytest.approx(expected_score)
    assert f"{expected_score:.4g}" in found.explanation and "e^88.72" in found.explanation
    assert "Subtract each row's maximum" in found.explanation


def test_logic_mistakes_are_not_called_precision(course):
    # the catalogue's wrong softmaxes and attentions: errors of whole units, not of rounding
    assignment = assignment_of(course, "assignment1")
    with course_imports(course.root):
        reference, mutants = load_reference(assignment)
    generator = torch.Generator().manual_seed(3)
    tried = 0
    for mutant in mutants:
        if mutant.function not in ("softmax", "scaled_dot_product_attention"):
            continue
        args = ((torch.randn(4, 7, generator=generator) * 3,) if mutant.function == "softmax" else
                (torch.randn(2, 5, 8, generator=generator), torch.randn(2, 5, 8, generator=generator),
                 torch.randn(2, 5, 4, generator=generator)))
        try:
            actual = mutant.fn(*args)
        except Exception:  # raises on these inputs: not a value to measure
            continue
        expected = reference[mutant.function](*args)
        item = None if mutant.function == "softmax" else 0
        if item is not None:
            actual, expected = actual[0], expected[0]
        if actual.shape != expected.shape:
            continue
        exact = precision.oracle(reference[mutant.function], args, {}, expected, item)
        found, _ = precision.explain(actual, exact, expected.dtype, args, {})
        assert found is None, (mutant.id, found)
        tried += 1
    assert tried >= 10


def _hidden_in_process(course: Course, fixture: str, task: str, tmp_path: Path, seed: int = 5):
    workspace = tmp_path / f"student-{seed}"
    workspace.mkdir()
    (workspace / "attention.py").write_text(REFERENCE.read_text() + "\n\n" + (PRECISION / f"{fixture}.py").read_text())
    return hidden_outcomes(course, "assignment1", task, workspace, seed)


@pytest.mark.parametrize("fixture, task, finding", [
    ("softmax_float16", "softmax", "precision_float16_softmax"),
    ("softmax_float16_sum", "softmax", "precision_float16_accumulation"),
    ("attention_overflow", "scaled_dot_product_attention", "precision_overflow"),
])
def test_each_precision_diagnosis_fires_through_the_hidden_tests(course, tmp_path, fixture, task, finding):
    outcomes = _hidden_in_process(course, fixture, task, tmp_path)
    failed = [o for o in outcomes if o.status == "failed"]
    assert failed and all((o.diagnosis or {}).get("id") == finding for o in failed), \
        [(o.name, o.diagnosis) for o in failed]
    for o in failed:
        measured = o.problem["precision"]  # the numbers, as data
        assert measured["dtype"] in ("float32", "float64")
        if finding == "precision_overflow":
            assert measured["nonfinite"] > 0 and measured["largest_score"] > 88.72
        else:
            assert measured["compared"] > 0 and measured["p90_units"] > 64 and measured["nonfinite"] == 0
    assert any(o.status == "passed" for o in outcomes)  # the rest of the function is right


@pytest.mark.sandbox
def test_a_float16_softmax_is_told_in_the_grade(course, tmp_path):
    workspace = tmp_path / "student"
    workspace.mkdir()
    (workspace / "attention.py").write_text(REFERENCE.read_text() + "\n\n" +
                                            (PRECISION / "softmax_float16.py").read_text())
    result = grade_workspace(course, "assignment1", workspace, student="student", only_task="softmax",
                             allow_weak_sandbox=True, use_gpu=False)
    failed = [o for o in result.outcomes if o.status == "failed"]
    assert failed and {o.diagnosis["id"] for o in failed} == {"precision_float16_softmax"}
    assert all("Likely cause: the softmax runs in float16" in o.message for o in failed)
    assert all(o.problem["precision"]["p90_units"] > 64 for o in failed)


@pytest.mark.parametrize("fixture, finding", [("softmax_float16", "precision_float16_softmax"),
                                              ("softmax_float16_sum", "precision_float16_accumulation")])
def test_the_precision_diagnosis_is_the_same_for_every_seed(course, tmp_path, fixture, finding):
    """Short slices (a 4 x 3 input softmaxed along its 4, rows with masked entries) cannot make scattered
    float16 errors look like one factor per row, whatever the draw."""
    for seed in range(1, 9):
        outcomes = _hidden_in_process(course, fixture, "softmax", tmp_path, seed=seed)
        found = {(o.diagnosis or {}).get("id") for o in outcomes if o.status == "failed"}
        assert found == {finding}, (seed, [(o.name, o.diagnosis and o.diagnosis["id"]) for o in outcomes])


def test_the_largest_score_of_a_long_sequence_is_not_computed():
    """Explaining a failure never materialises a long sequence's N x N scores (a sliding window at
    N = 32768 would need 8 GiB in float64): beyond the budget the largest score is not told."""
    short = torch.randn(1, 64, 16, dtype=torch.float64)
    assert precision.largest_score((short, short), {}) == pytest.approx(
        float((short @ short.transpose(-2, -1)).abs().max()) / 4)
    long = torch.zeros(1, 32768, 64)
    assert precision.largest_score((long, long), {}) is None
