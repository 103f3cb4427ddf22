"""The `check` object that tests use, exercised directly with an in-process runner."""

from __future__ import annotations

import pytest
import torch

from grader.core.manifest import parse_manifest
from grader.harness.catalogue import Mutant
from grader.harness.runners import InProcessRunner
from grader.harness.testing import Check, GradingContext, StudentProblem

STUDENT = '''
import torch

def masked(x, mask=None):
    return x if mask is None else x.masked_fill(~mask, 0.0)

def ignores_mask(x, mask=None):
    return x

def halves(x):
    return x / 2
'''


def reference_masked(x, mask=None):
    return x if mask is None else x.masked_fill(~mask, 0.0)


@pytest.fixture
def make_check(tmp_path):
    (tmp_path / "s.py").write_text(STUDENT)
    manifest = parse_manifest({"id": "a", "files": ["s.py"], "tasks": [
        {"id": "t", "points": 1, "functions": ["masked", "ignores_mask", "halves"],
         "sections": ["§13"]}]})
    mutant = Mutant("half", "halves", "divides by two", "§9", "Multiply, do not divide.",
                    lambda x: x / 2)

    def build(reference):
        context = GradingContext(runner=InProcessRunner(tmp_path, ("s.py",)), manifest=manifest,
                                 reference=reference, mutants=[mutant], seed=7)
        return Check(context, "test::node", "t")

    return build


def test_mask_keyword_reaches_student_and_reference(make_check):
    check = make_check({"masked": reference_masked, "ignores_mask": reference_masked})
    x, mask = check.randn(3, 3), torch.eye(3, dtype=torch.bool)
    check.close("masked", x, mask=mask)
    with pytest.raises(AssertionError, match="ignores_mask"):
        check.close("ignores_mask", x, mask=mask)


def test_diagnosis_and_section_in_the_message(make_check):
    check = make_check({"halves": lambda x: x * 2})
    with pytest.raises(AssertionError) as info:
        check.close("halves", check.randn(4))
    assert "Likely cause: divides by two" in str(info.value) and "§9" in str(info.value)
    assert check.record["diagnosis"]["id"] == "half"


def test_missing_function_is_a_student_problem(make_check):
    check = make_check({})
    with pytest.raises(StudentProblem) as info:
        check.call("nope", 1)
    assert info.value.kind == "missing"


def test_seeded_inputs_are_reproducible(make_check):
    assert torch.equal(make_check({}).randn(5), make_check({}).randn(5))


def test_numbers_can_be_diagnosed():
    from grader.harness.differences import outputs_match

    assert outputs_match(1024, 1024) and not outputs_match(1024, 2048)
    assert not outputs_match(torch.ones(1), 1.0) and not outputs_match(True, 1)
