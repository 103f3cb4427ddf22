"""Misconception diagnosis: which known wrong version does a wrong output match?

Each assignment's `reference/<id>/mutants.py` registers small trusted
functions with `@mutant(...)`. When a student's output is wrong, the trusted
process runs the mutants of that function on the same inputs and names the one
that matches. When none does, `describe_difference` says what it can measure.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.core.course import reference_functions
from grader.core.tolerances import tolerance_for


@dataclass(frozen=True)
class Mutant:
    """A known wrong version of one student function."""

    id: str
    function: str
    title: str
    section: str
    explanation: str
    fn: Callable

    def source(self) -> str:
        """The mutant's own source without its decorator (used by `grade validate`)."""
        lines = inspect.getsource(self.fn).splitlines()
        while lines and not lines[0].lstrip().startswith("def "):
            lines.pop(0)
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Diagnosis:
    mutant_id: str
    title: str
    section: str
    explanation: str

    def to_dict(self) -> dict:
        return {"id": self.mutant_id, "title": self.title, "section": self.section,
                "explanation": self.explanation}


_REGISTRY: list[Mutant] = []


def mutant(*, function: str, id: str, title: str, section: str, explanation: str):
    """Register a wrong version of `function`. Its body may use only torch, math,
    triton and the names the reference module of `function` defines."""

    def register(fn: Callable) -> Callable:
        _REGISTRY.append(Mutant(id, function, title, section, explanation, fn))
        return fn

    return register


def load_reference(course_root: Path, assignment_id: str, files: tuple[str, ...]) -> tuple[dict, list[Mutant]]:
    """The assignment's trusted reference functions and its misconception catalogue."""
    functions = reference_functions(course_root, assignment_id, files)
    if not functions:
        return {}, []
    return functions, load_mutants(f"reference.{assignment_id}.mutants")


def load_mutants(module_name: str) -> list[Mutant]:
    """Import `reference.<id>.mutants` and return what it registered."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:  # no catalogue for this assignment
            return []
        raise
    # The same module name may have been imported before from another course:
    # keep only what this very module object registered.
    return [m for m in _REGISTRY if m.fn.__globals__ is vars(module)]


def _flatten(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flatten(v)]
    return []


def outputs_match(actual, expected, rtol: float | None = None, atol: float | None = None,
                  equal_nan: bool = False) -> bool:
    """Same structure, shapes and values within tolerance. NaN matches NaN only with
    `equal_nan` (used to recognise a mutant that produces NaN where the student does)."""
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        if not isinstance(actual, int | float) or isinstance(actual, bool):
            return False
        r, t = (1e-9, 0.0) if rtol is None else (rtol, atol or 0.0)
        return abs(actual - expected) <= t + r * abs(expected)
    a, e = _flatten(actual), _flatten(expected)
    if len(a) != len(e) or not a:
        return False
    for x, y in zip(a, e, strict=True):
        if x.shape != y.shape:
            return False
        r, t = tolerance_for(y.dtype) if rtol is None else (rtol, atol or 0.0)
        x64, y64 = x.detach().cpu().double(), y.detach().cpu().double()
        if x.dtype == torch.bool or y.dtype == torch.bool:
            if not torch.equal(x.cpu().bool(), y.cpu().bool()):
                return False
            continue
        if not torch.allclose(x64, y64, rtol=r, atol=t, equal_nan=equal_nan):
            return False
    return True


def diagnose(mutants: list[Mutant], function: str, args: tuple, kwargs: dict,
             actual, rtol: float | None = None, atol: float | None = None) -> Diagnosis | None:
    """The first mutant of `function` whose output on these inputs matches `actual`."""
    for candidate in mutants:
        if candidate.function != function:
            continue
        try:
            with torch.no_grad():
                produced = candidate.fn(*args, **kwargs)
        except Exception:
            continue
        if outputs_match(actual, produced, rtol, atol, equal_nan=True):
            return Diagnosis(candidate.id, candidate.title, candidate.section,
                             candidate.explanation)
    return None


def _index_text(flat_index: int, shape: torch.Size) -> str:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size)
        flat_index //= size
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def describe_difference(actual: torch.Tensor, expected: torch.Tensor,
                        mask: torch.Tensor | None = None) -> str:
    """Words for what differs between two same-shaped tensors: how much and where."""
    a = actual.detach().cpu().double()
    e = expected.detach().cpu().double()
    parts = []
    nan, inf = int(torch.isnan(a).sum()), int(torch.isinf(a).sum() - torch.isinf(e).sum())
    if nan:
        parts.append(f"{nan} NaN value(s) in your output")
    if inf > 0:
        parts.append(f"{inf} unexpected ±inf value(s)")
    finite = torch.isfinite(a) & torch.isfinite(e)
    both_inf_same = torch.isinf(a) & torch.isinf(e) & (a == e)
    diff = torch.where(finite, (a - e).abs(), torch.where(both_inf_same, 0.0, math.inf))
    if diff.numel() == 0:
        return "; ".join(parts) or "empty tensors"
    worst = int(torch.argmax(torch.nan_to_num(diff, nan=math.inf)))
    max_err = float(diff.reshape(-1)[worst])
    parts.append(f"max abs error {max_err:.3g} at {_index_text(worst, a.shape)} "
                 f"(yours {float(a.reshape(-1)[worst]):.4g}, expected {float(e.reshape(-1)[worst]):.4g})")
    rtol, atol = tolerance_for(expected.dtype)
    bad = ~torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=False)
    parts.append(f"{int(bad.sum())} of {bad.numel()} values out of tolerance")
    if a.dim() >= 2:
        rows = bad.reshape(-1, a.shape[-2], a.shape[-1]).any(dim=0).any(dim=-1)
        cols = bad.reshape(-1, a.shape[-2], a.shape[-1]).any(dim=0).any(dim=-2)
        bad_rows = [i for i, r in enumerate(rows.tolist()) if r]
        bad_cols = [j for j, c in enumerate(cols.tolist()) if c]
        n_rows, n_cols = a.shape[-2], a.shape[-1]
        if bad_rows and len(bad_rows) < n_rows:
            where = _span_words(bad_rows, n_rows, "row", "first token", "last token")
            parts.append(f"wrong rows: {where}")
        if bad_cols and len(bad_cols) < n_cols:
            parts.append(f"wrong columns: {_span_words(bad_cols, n_cols, 'column', 'first key', 'last key')}")
        if a.shape[-2] == a.shape[-1] and a.shape[-1] > 1:
            square = bad.reshape(-1, n_rows, n_cols).any(dim=0)
            upper = torch.triu(torch.ones_like(square), diagonal=1)
            diagonal = torch.eye(n_rows, dtype=torch.bool)
            if square[upper].any() and not square[~upper].any():
                parts.append("all errors are above the diagonal (the future / masked region)")
            elif square[diagonal].any() and not square[~diagonal].any():
                parts.append("all errors are on the diagonal")
    if mask is not None and _broadcasts_to(mask.shape, bad.shape):
        masked = ~mask.cpu().expand_as(bad)
        if bad[masked].any() and not bad[~masked].any():
            parts.append("all errors are in the masked-out region")
    return "; ".join(parts)


def _broadcasts_to(small: torch.Size, shape: torch.Size) -> bool:
    try:
        return torch.broadcast_shapes(small, shape) == shape
    except RuntimeError:
        return False


def _span_words(indices: list[int], size: int, noun: str, first: str, last: str) -> str:
    shown = ", ".join(str(i) for i in indices[:8]) + (" …" if len(indices) > 8 else "")
    extra = []
    if indices == [0]:
        extra.append(f"only the {first}")
    elif indices == [size - 1]:
        extra.append(f"only the {last}")
    text = f"{noun}s {shown} of {size}"
    return text + (f" ({extra[0]})" if extra else "")
