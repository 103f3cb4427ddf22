"""Real attention code from public repositories, graded through `grade submit` (benchmarks/corpus/).

Every correct entry earns full marks on the task it implements; every wrong one loses
points on the task it breaks, and each of its failures says what went wrong and cites
the lecture section. The upstream code is not part of this repository: these tests run
where its files are in the corpus's sources folder ($GRADE_CORPUS_SOURCES, or
benchmarks/corpus/sources/; see benchmarks/corpus/README.md) and are skipped elsewhere.
Each entry is graded once (a module-scoped fixture), two at a time.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("corpus_run", ROOT / "benchmarks" / "corpus" / "run.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["corpus_run"] = corpus
_spec.loader.exec_module(corpus)

SOURCES = corpus.sources_dir()
ENTRIES = {entry.id: entry for entry in corpus.load_entries()}
AVAILABLE = [entry for entry in ENTRIES.values() if corpus.available(entry, SOURCES)]

pytestmark = [pytest.mark.skipif(not AVAILABLE, reason=f"no corpus sources in {SOURCES} (benchmarks/corpus/README.md)"),
              pytest.mark.sandbox, pytest.mark.slow]  # each entry is graded by `grade submit` in a sandbox

# What the grader does not explain yet: a failure that raised in the student's own code names the
# error and the line, but no lecture section (grader/harness/testing.py, under work now).
@pytest.fixture(scope="module")
def rows() -> dict[str, list]:
    graded = corpus.run(AVAILABLE, SOURCES, jobs=2)
    by_entry: dict[str, list] = {}
    for row in graded:
        by_entry.setdefault(row.entry.id, []).append(row)
    return by_entry


@pytest.mark.parametrize("entry_id", list(ENTRIES))
def test_correct_code_earns_full_marks_and_wrong_code_loses_points_on_the_task_it_breaks(rows, entry_id):
    if entry_id not in rows:
        pytest.skip(f"{ENTRIES[entry_id].repo}/{ENTRIES[entry_id].path} is not in {SOURCES}")
    for row in rows[entry_id]:
        assert row.earned is not None, f"{entry_id} was not graded: {row.explanation}"
        if row.expected == "full":
            assert row.earned == row.points, (entry_id, row.task, row.earned, row.explanation)
        else:
            assert row.earned < row.points, (entry_id, row.task, row.earned, "expected to lose points")


@pytest.mark.parametrize("entry_id", list(ENTRIES))
def test_every_failure_of_wrong_code_is_explained_with_a_lecture_section(rows, entry_id):
    if entry_id not in rows:
        pytest.skip(f"{ENTRIES[entry_id].repo}/{ENTRIES[entry_id].path} is not in {SOURCES}")
    for row in rows[entry_id]:
        if row.expected == "loses":
            assert row.explained, (entry_id, row.task, row.explanation)
            assert row.explanation, (entry_id, row.task)


def test_no_third_party_code_is_kept_in_the_corpus_folder():
    folder = ROOT / "benchmarks" / "corpus"
    ours = {"run.py", "corpus.toml", "README.md"} | {p.name for p in (folder / "wrappers").glob("*.py")}
    kept = {p.name for p in folder.iterdir() if p.is_file()} | {p.name for p in (folder / "wrappers").iterdir()}
    assert kept <= ours, kept - ours
    for wrapper in (folder / "wrappers").glob("*.py"):  # a wrapper imports its upstream pieces, never holds them
        entry = ENTRIES[wrapper.stem]
        names = [p["name"] for p in entry.pieces if "name" in p]
        text = wrapper.read_text(encoding="utf-8")
        assert f"from corpus_{entry.id} import" in text, wrapper.name
        assert not any(f"def {name}(" in text or f"class {name}(" in text for name in names), wrapper.name
