"""Properties of attention as hidden tests (`check.holds`): each relation every correct answer has
catches a mistake that the comparisons with the reference on chosen inputs let through.

Each fixture (tests/fixtures/properties) is the reference with one function replaced by a version that
is right on every input the comparison tests draw and wrong on others. Through the real hidden suite,
in process: every comparison test of its task passes, exactly the property test fails, and its record
names the property and the lecture section, as data. The reference passes every property test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.core.course import Course
from tests.conftest import FIXTURES, ROOT, hidden_outcomes

pytestmark = pytest.mark.slow  # whole hidden suites in process (assignment 3's at L = 32768), about 40 s

PROPERTIES = FIXTURES / "properties"
APPENDED_TO = {"assignment1": "attention.py", "assignment3": "efficient.py"}

# fixture, assignment, task, the one test that must fail, the words its property starts with, section
CASES = [
    ("sdpa_key_blocks_averaged", "assignment1", "scaled_dot_product_attention",
     "test_reordering_key_value_pairs_changes_nothing", "reordering the key/value pairs", "§4, §10"),
    ("sdpa_query_blocks_tail_dropped", "assignment1", "scaled_dot_product_attention",
     "test_reordering_the_queries_reorders_the_outputs", "reordering the queries", "§10"),
    ("sdpa_outputs_clamped", "assignment1", "scaled_dot_product_attention",
     "test_scaling_the_values_scales_the_outputs", "values 10 times larger", "§6"),
    ("sdpa_long_path_forgets_the_mask", "assignment1", "scaled_dot_product_attention",
     "test_future_tokens_do_not_change_the_past", "with a causal mask, changing the keys", "§13"),
    ("gqa_decoding_path_unscaled", "assignment3", "gqa",
     "test_decoding_one_token_at_a_time_equals_the_full_causal_call", "decoding one token at a time", "§25, §13"),
    ("gqa_multi_head_path_divides_by_d", "assignment3", "gqa",
     "test_sharing_kv_heads_equals_multi_head_with_each_one_repeated", "grouped-query attention equals",
     "§25"),
    ("window_reaches_one_block_back", "assignment3", "sliding_window",
     "test_a_window_is_full_attention_with_the_band_mask", "sliding-window attention equals full", "§26"),
]


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


def _workspace(tmp_path: Path, assignment_id: str, fixture: str | None) -> Path:
    """The reference's files, with the fixture appended to the module it replaces a function of."""
    workspace = tmp_path / f"{assignment_id}-{fixture or 'reference'}"
    workspace.mkdir()
    for source in (ROOT / "reference" / assignment_id).glob("*.py"):
        if source.name not in ("__init__.py", "mutants.py"):
            text = source.read_text()
            if fixture and source.name == APPENDED_TO[assignment_id]:
                text += "\n\n" + (PROPERTIES / f"{fixture}.py").read_text()
            (workspace / source.name).write_text(text)
    return workspace


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("fixture, assignment_id, task, property_test, words, section", CASES,
                         ids=[case[0] for case in CASES])
def test_a_property_catches_what_the_comparisons_let_through(course, tmp_path, seed, fixture, assignment_id,
                                                             task, property_test, words, section):
    outcomes = hidden_outcomes(course, assignment_id, task, _workspace(tmp_path, assignment_id, fixture), seed)
    failed = {o.name.rsplit("::", 1)[-1]: o for o in outcomes if o.status == "failed"}
    assert list(failed) == [property_test], {name: o.message[:200] for name, o in failed.items()}
    problem = failed[property_test].problem
    assert problem["key"].startswith("property:") and problem["property"].startswith(words)
    assert problem["section"] == section and problem["difference"]["key"]  # what differed, measured
    message = failed[property_test].message
    assert message.startswith("A property every correct answer has does not hold: " + words)
    assert f"lecture {section}" in message
    assert sum(o.status == "passed" for o in outcomes) == len(outcomes) - 1


@pytest.mark.parametrize("assignment_id, tasks", [("assignment1", ["scaled_dot_product_attention"]),
                                                  ("assignment3", ["gqa", "sliding_window"])])
def test_the_reference_has_every_property(course, tmp_path, assignment_id, tasks):
    workspace = _workspace(tmp_path, assignment_id, None)
    names = {property_test for _, a, _, property_test, _, _ in CASES if a == assignment_id}
    for task in tasks:
        outcomes = hidden_outcomes(course, assignment_id, task, workspace, seed=3)
        assert all(o.status == "passed" for o in outcomes), [(o.name, o.message[:200]) for o in outcomes]
        names -= {o.name.rsplit("::", 1)[-1] for o in outcomes}
    assert not names  # every property test was run
