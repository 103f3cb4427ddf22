"""Misconception diagnosis: which known wrong version does a wrong output match?

When a student's output is wrong, the trusted process runs the catalogue's mutants of that
function (grader.harness.catalogue) on the same inputs and names the one that matches; when
the student's call raised, it names the mutant that raises the same exception (type and
message) on those inputs. A mutant whose bug depends on a tile size is tried at each size it
declares (`vary=`), and the diagnosis says which sizes reproduced the student's output.

Triton's own exceptions are explained by grader.harness.triton_api; when nothing matches,
grader.harness.differences says what it can measure.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable

import torch

from grader.harness.catalogue import Diagnosis, Mutant
from grader.harness.differences import outputs_match

MESSAGE_CAP = 2000  # the sandbox worker sends at most this much of an exception's message
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"\d+")


def normalised_message(text: str, *, digits: bool = True) -> str:
    """An exception message without what varies between two runs of the same mistake on the
    same inputs: memory addresses, torch's "(Triggered internally at ...)" notes, layout.
    `digits=False` also replaces every number by '#' (the same mistake on other shapes)."""
    text = _ADDRESS.sub("0x?", _TRIGGERED.sub("", str(text)[:MESSAGE_CAP]))
    if not digits:
        text = _NUMBER.sub("#", text)
    return " ".join(text.split())


def same_exception(raised: dict, exc: BaseException) -> bool:
    """Whether `exc` (raised by a mutant here) is the exception the student's call raised
    (`raised`: the worker's summary, {"type", "message", ...}): same type, same message."""
    return (raised.get("type") == type(exc).__name__
            and normalised_message(raised.get("message", "")) == normalised_message(str(exc)))


def _bound(fn: Callable, values: dict) -> Callable:
    """`fn` with some of its module-level names bound to other values (a tile size, say), without
    touching the module: a copy of the function over a copy of its globals."""
    if not values:
        return fn
    bound = types.FunctionType(fn.__code__, {**fn.__globals__, **values}, fn.__name__, fn.__defaults__,
                               fn.__closure__)
    bound.__kwdefaults__ = fn.__kwdefaults__
    return bound


def _same_form(a, b) -> bool:
    """Whether two results have the same structure and every tensor the same dtype (a float mask is not the
    boolean one, however equal their values)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_form(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b)


def diagnose(mutants: list[Mutant], function: str, args: tuple, kwargs: dict,
             actual=None, rtol: float | None = None, atol: float | None = None, *,
             raised: dict | None = None, expected=None) -> Diagnosis | None:
    """The mutant of `function` that reproduces the student, tried at each of its variants.

    For a value (`actual`): the first mutant whose output on these inputs matches it. For an
    exception (`raised`, the worker's summary of what the student's call raised): the mutant
    that raises the same exception, if exactly one does; when several do (say every emulation
    fails on inputs none of them supports), the exception tells nothing and none is named.

    `expected` (the reference's value on these inputs): a mutant variant whose output matches it
    cannot be told from a correct answer on these inputs, so it is never the hint for them (a
    scale mistake on a test whose scale is 1)."""
    found: list[Diagnosis] = []
    for candidate in mutants:
        if candidate.function != function:
            continue
        matched = []
        for variant in candidate.variants():
            try:
                with torch.no_grad():
                    produced = _bound(candidate.fn, variant)(*args, **kwargs)
            except Exception as exc:
                if raised is not None and same_exception(raised, exc):
                    matched.append(variant)
                continue
            if expected is not None and _same_form(produced, expected) and \
                    outputs_match(produced, expected, rtol, atol, equal_nan=True):
                continue  # this variant is right on these inputs: it explains nothing here
            if raised is None and outputs_match(actual, produced, rtol, atol, equal_nan=True):
                matched.append(variant)
        if not matched:
            continue
        # every variant agreeing means these inputs cannot tell them apart: name none
        telling = candidate.vary and len(matched) < len(candidate.variants())
        found.append(Diagnosis(candidate.id, candidate.title, candidate.section, candidate.explanation,
                               matched="exception" if raised is not None else "values",
                               variants=tuple(matched) if telling else ()))
        if raised is None:
            break
    if raised is not None and len(found) != 1:
        return None
    return found[0] if found else None
