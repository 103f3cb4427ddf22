"""What differs between a result and the expected one, measured: words for the student and the
numbers behind them, with the same tolerance the verdict used (grader.core.records keeps both in
the TestOutcome), and whether two results match at all (`outputs_match`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from grader.core.tolerances import tolerance_for


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


@dataclass(frozen=True)
class Difference:
    """What differs between a result and the expected one: words for the student (`text`),
    a stable `key` and a short `summary` that name the kind of difference (failures are
    grouped by them), and the numbers behind them (`data`)."""

    text: str
    key: str
    summary: str
    data: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"key": self.key, "summary": self.summary, "text": self.text, **self.data}

    def within(self, item: int) -> Difference:
        """The same difference, found in item `item` of a returned tuple."""
        return Difference(f"item {item} of the result: {self.text}", self.key,
                          f"{self.summary} (item {item} of the result)", {**self.data, "item": item})


SUMMARIES = {
    "values": "values out of tolerance",
    "values:nan": "NaN in the output",
    "values:inf": "unexpected ±inf in the output",
    "values:float32_precision": "float32 precision on a float64 call",
    "values:row_constant": "every row off by a constant of its own (a softmax would ignore it)",
    "values:masked_region": "errors only in the masked-out region",
    "values:above_diagonal": "errors only above the diagonal (the future)",
    "values:diagonal": "errors only on the diagonal",
    "entries": "wrong entries",
}


def _index_text(flat_index: int, shape: torch.Size) -> str:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size)
        flat_index //= size
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def row_shifts(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor | None:
    """Per-row offsets c (shape [..., rows]) when actual = expected + c along the last axis, within
    (rtol, atol), and some c is not 0; None otherwise (or for fewer than 2 dims or columns).

    A softmax over the last axis cannot tell such results apart: softmax(x + c) = softmax(x)."""
    if actual.dim() < 2 or actual.shape[-1] < 2 or actual.shape != expected.shape:
        return None
    a, e = actual.detach().cpu().double(), expected.detach().cpu().double()
    finite = torch.isfinite(a)
    if not torch.equal(finite, torch.isfinite(e)) or not torch.equal(a[~finite], e[~finite]):
        return None  # infinities (masked scores) must sit at the same places with the same signs
    count = finite.sum(-1)  # [..., rows]
    if not bool((count >= 2).any()):
        return None  # no row with two comparable values: nothing to tell
    difference = torch.where(finite, a - e, 0.0)
    shift = difference.sum(-1) / count.clamp(min=1)  # [..., rows]
    residual = torch.where(finite, a - shift.unsqueeze(-1) - e, 0.0)  # [..., rows, cols]
    if not bool((residual.abs() <= atol + rtol * e.abs().where(finite, 0.0)).all()):
        return None
    moved = (shift.abs() > atol + rtol * e.abs().where(finite, 0.0).amax(-1)) & (count >= 2)
    return shift if bool(moved.any()) else None


def _shift_words(shift: torch.Tensor) -> str:
    flat = shift.reshape(-1)
    if bool((flat - flat[0]).abs().max() <= 1e-12 * max(1.0, float(flat[0].abs()))):
        return f"the same constant, {float(flat[0]):+.4g}, everywhere"
    moved = [i for i in range(flat.numel()) if abs(float(flat[i])) > 0][:3]
    shown = ", ".join(f"row {_index_text(i, shift.shape)} by {float(flat[i]):+.4g}" for i in moved)
    return f"a constant of its own ({shown}, …)"


def _float32_accurate(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype,
                      bad: torch.Tensor) -> bool:
    """A float64 result that fails float64's tolerance yet meets float32's everywhere:
    computed (in part) in float32. `actual`, `expected`: float64 copies; `bad`: out of tolerance."""
    if dtype != torch.float64 or not bool(bad.any()):
        return False
    rtol32, atol32 = tolerance_for(torch.float32)
    return bool(torch.isclose(actual, expected, rtol=rtol32, atol=atol32, equal_nan=False).all())


def measure_difference(actual: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor | None = None,
                       rtol: float | None = None, atol: float | None = None) -> Difference:
    """What differs between two same-shaped tensors (how much, where, what pattern), judged
    with (rtol, atol): the tolerance of the verdict (the dtype's default when None), which the
    text names."""
    default = tolerance_for(expected.dtype)
    rtol, atol = (default[0] if rtol is None else rtol), (default[1] if atol is None else atol)
    a = actual.detach().cpu().double()
    e = expected.detach().cpu().double()
    parts, patterns = [], []
    nan, inf = int(torch.isnan(a).sum()), int(torch.isinf(a).sum() - torch.isinf(e).sum())
    if nan:
        parts.append(f"{nan} NaN value(s) in your output")
        patterns.append("nan")
    if inf > 0:
        parts.append(f"{inf} unexpected ±inf value(s)")
        patterns.append("inf")
    finite = torch.isfinite(a) & torch.isfinite(e)
    both_inf_same = torch.isinf(a) & torch.isinf(e) & (a == e)
    diff = torch.where(finite, (a - e).abs(), torch.where(both_inf_same, 0.0, math.inf))
    data: dict = {"rtol": rtol, "atol": atol, "total": int(a.numel())}
    if diff.numel() == 0:
        return Difference("; ".join(parts) or "empty tensors", "values", SUMMARIES["values"], data)
    worst = int(torch.argmax(torch.nan_to_num(diff, nan=math.inf)))
    max_err = float(diff.reshape(-1)[worst])
    index = _index_text(worst, a.shape)
    parts.append(f"max abs error {max_err:.3g} at {index} "
                 f"(yours {float(a.reshape(-1)[worst]):.4g}, expected {float(e.reshape(-1)[worst]):.4g})")
    bad = ~torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=False)
    within = f" (rtol={rtol:g}, atol={atol:g})" if (rtol or atol) else ""
    parts.append(f"{int(bad.sum())} of {bad.numel()} values out of tolerance{within}")
    data.update(max_abs_error=max_err if math.isfinite(max_err) else None, worst_index=index,
                out_of_tolerance=int(bad.sum()))
    if not nan and inf <= 0 and _float32_accurate(a, e, expected.dtype, bad):
        parts.append("every value is as close as float32 arithmetic gets, but this call is float64: part "
                     "of your computation runs in float32 (a .float(), a float32 tensor made inside, or "
                     "softmax(..., dtype=torch.float32)); keep the input's dtype throughout")
        patterns.append("float32_precision")
    shift = None if nan else row_shifts(a, e, rtol, atol)
    if shift is not None:
        parts.append(f"every row is off by {_shift_words(shift)}: a softmax over the last axis ignores "
                     f"such a shift (softmax(x + c) = softmax(x)), so attention built from these values "
                     f"would be the same, but the values asked for are not")
        patterns.append("row_constant")
        data["row_shifts"] = [round(float(s), 6) for s in shift.reshape(-1)[:64]]
    if a.dim() >= 2:
        rows = bad.reshape(-1, a.shape[-2], a.shape[-1]).any(dim=0).any(dim=-1)  # (Lq,)
        cols = bad.reshape(-1, a.shape[-2], a.shape[-1]).any(dim=0).any(dim=-2)  # (Lk,)
        bad_rows = [i for i, r in enumerate(rows.tolist()) if r]
        bad_cols = [j for j, c in enumerate(cols.tolist()) if c]
        n_rows, n_cols = a.shape[-2], a.shape[-1]
        if bad_rows and len(bad_rows) < n_rows:
            where = _span_words(bad_rows, n_rows, "row", "first token", "last token")
            parts.append(f"wrong rows: {where}")
        if bad_cols and len(bad_cols) < n_cols:
            parts.append(f"wrong columns: {_span_words(bad_cols, n_cols, 'column', 'first key', 'last key')}")
        if a.shape[-2] == a.shape[-1] and a.shape[-1] > 1:
            square = bad.reshape(-1, n_rows, n_cols).any(dim=0)  # (L, L)
            upper = torch.triu(torch.ones_like(square), diagonal=1)
            diagonal = torch.eye(n_rows, dtype=torch.bool)
            if square[upper].any() and not square[~upper].any():
                parts.append("all errors are above the diagonal (the future / masked region)")
                patterns.append("above_diagonal")
            elif square[diagonal].any() and not square[~diagonal].any():
                parts.append("all errors are on the diagonal")
                patterns.append("diagonal")
    if mask is not None and _broadcasts_to(mask.shape, bad.shape):
        masked = ~mask.cpu().expand_as(bad)
        if bad[masked].any() and not bad[~masked].any():
            parts.append("all errors are in the masked-out region")
            patterns.append("masked_region")
    data["patterns"] = patterns
    order = ("nan", "inf", "float32_precision", "row_constant", "masked_region", "above_diagonal", "diagonal")
    key = next((f"values:{p}" for p in order if p in patterns), "values")
    return Difference("; ".join(parts), key, SUMMARIES[key], data)


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
