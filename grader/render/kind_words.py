"""Why a test failed, in words: one row per `Kind`, for one test and for a whole task.

`label` names one test's failure (the student's report, the JSON feedback); `every_test`
says why a task earned nothing when all its tests failed that way (the class report).
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.core.records import Kind


@dataclass(frozen=True)
class KindWords:
    label: str  # one test failed this way
    every_test: str  # every test of a task failed this way


KIND_WORDS: dict[Kind, KindWords] = {
    Kind.WRONG: KindWords("wrong result", "wrong result in every test"),
    Kind.RAISED: KindWords("raised an exception", "raised an exception in every test"),
    Kind.NOT_IMPLEMENTED: KindWords("not implemented", "not implemented (still raises NotImplementedError)"),
    Kind.TIMEOUT: KindWords("timed out", "timed out"),
    Kind.CRASHED: KindWords("crashed", "crashed the sandbox worker"),
    Kind.FORBIDDEN: KindWords("forbidden API", "called a forbidden API"),
    Kind.MISSING: KindWords("function missing", "function missing"),
    Kind.IMPORT_FAILED: KindWords("module failed to import", "module failed to import"),
    Kind.UNSUPPORTED: KindWords("unsupported return type", "returned something that is not a tensor"),
    Kind.BUDGET: KindWords("time budget used up", "ran out of the time budget"),
    Kind.DISK: KindWords("write budget used up", "wrote files up to the write budget"),
    Kind.TEST_ERROR: KindWords("result unusable", "unusable result"),
    Kind.NOT_RUN: KindWords("not run here", "not run"),
    Kind.DEGENERATE: KindWords("placeholder result", "a placeholder result (constant, NaN or an input handed back)"),
}


def kind_label(kind: str) -> str:
    """One test's failure in words (a kind this grader does not know is shown as it is)."""
    words = KIND_WORDS.get(kind)  # a Kind is a str: a plain string finds its row too
    return words.label if words else str(kind)


def every_test_failed(kind: str) -> str:
    """Why a task earned nothing when every one of its tests failed this way."""
    words = KIND_WORDS.get(kind)
    return words.every_test if words else str(kind).replace("_", " ")
