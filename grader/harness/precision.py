"""Precision measured, not guessed: a wrong result's errors in units of its dtype's rounding.

When a result is out of tolerance and no catalogued mistake reproduces it, the check asks
this module whether the errors look like arithmetic done in too little precision. Every
error is measured against a float64 oracle (the reference run on float64 copies of the
inputs, or the test's expected value, which is within half a unit of it) and divided by the
dtype's rounding unit `eps` times the size of the row it sits in (the largest |oracle| along
the last axis), so a float32 result that is right to float32's rounding measures about 1,
and one rounded to float16 somewhere about 2^13. From that profile:

* `precision_overflow`: values that are inf or NaN where the oracle is finite, while the
  largest score the inputs make is beyond what exp() can take in that dtype (float32:
  e^88.7; float16: e^11.1): an exponential of an unshifted score overflowed; subtract each
  row's maximum first (§10);
* `precision_float16_accumulation`: errors of many float16 units that one factor per row
  almost entirely explains: each row was divided by a sum that was accumulated in float16;
* `precision_float16_softmax`: errors about float16's (or bfloat16's) rounding, scattered
  element by element: the weights themselves were computed in the lower precision.

Errors far below float16's rounding are not float16's (a float64 call computed in float32 is
described by grader.harness.differences), and errors of whole units are a logic mistake.

Each finding carries its numbers (`PrecisionProfile`), and the reference, computed right,
never shows one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from grader.harness.catalogue import Diagnosis

EPS = {torch.float64: 2.0 ** -52, torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}
LOWER = (("float16", torch.float16), ("bfloat16", torch.bfloat16))  # the precisions a result may betray
FINE_UNITS = 64.0  # errors within this many units of the dtype's own rounding are not a precision problem
SAME_PRECISION = (1 / 64, 8.0)  # p90 error within these units of a lower precision: its rounding
MIN_SLICE = 2  # one value alone always fits a factor of its own
ROW_FACTOR_SHARE = 0.25  # residual after one factor per row at most this share of the error: a per-row sum
SECTION = "§10"


@dataclass(frozen=True)
class PrecisionProfile:
    """A result's errors against the float64 oracle, in units of `eps` × the row's size."""

    dtype: str
    eps: float
    compared: int  # finite values compared
    median_units: float
    p90_units: float
    max_units: float
    nonfinite: int  # inf or NaN where the oracle is finite
    largest_score: float | None  # the largest |score| the inputs make (None when it cannot be told)
    row_factor_p90_units: float | None  # p90 error left after the best single factor per slice (along the
    # best axis); None when no axis is long enough to tell
    row_factor_max: float  # the largest |factor − 1| of a slice, in units of eps

    def to_dict(self) -> dict:
        return asdict(self)

    def units_of(self, dtype: torch.dtype) -> float:
        """The p90 error in units of another dtype's rounding."""
        return self.p90_units * self.eps / EPS[dtype]


def _quantile(values: torch.Tensor, q: float) -> float:
    return float(torch.quantile(values, q)) if values.numel() else 0.0


SCORE_BUDGET = 1 << 25  # multiply-adds spent on the largest score at most: beyond, it is not told


def largest_score(args: tuple, kwargs: dict) -> float | None:
    """The largest |score| the inputs make: for queries and keys (two tensors with the same last
    dimension), max |q·k| times the scale (sm_scale=, else 1/√d); for a single tensor input,
    its largest magnitude; otherwise unknown (also when the scores would cost more than
    SCORE_BUDGET multiply-adds: a long sequence's are never materialised to explain a failure)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if len(tensors) >= 2 and tensors[0].dim() >= 2 and tensors[1].dim() >= 2 and \
            tensors[0].shape[-1] == tensors[1].shape[-1]:
        if tensors[0].numel() * tensors[1].shape[-2] > SCORE_BUDGET:
            return None
        q, k = (t.detach().cpu().double() for t in tensors[:2])
        if k.dim() == q.dim() and k.shape[:-2] != q.shape[:-2]:  # grouped heads: repeat k's heads
            try:
                k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
            except (RuntimeError, ZeroDivisionError, IndexError):
                return None
        scale = kwargs.get("sm_scale")
        scale = 1.0 / math.sqrt(q.shape[-1]) if not isinstance(scale, (int, float)) else float(scale)
        try:
            scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # [..., Lq, Lk]
        except RuntimeError:
            return None
        scores = scores[torch.isfinite(scores)]
        return float(scores.abs().max()) if scores.numel() else None
    if len(tensors) == 1:
        values = tensors[0].detach().cpu().double()
        values = values[torch.isfinite(values)]
        return float(values.abs().max()) if values.numel() else None
    return None


def _per_slice_factor(a: torch.Tensor, o: torch.Tensor, eps: float) -> tuple[float | None, float]:
    """How much of the error one factor per slice explains, along the axis where it explains most (a
    softmax normalises along its `dim`): the p90 error left after a ≈ c · o in each slice, in units of
    eps × the slice's size, and the largest |c − 1| in units of eps."""
    best = (math.inf, 0.0)
    for axis in range(a.dim()):
        sa, so = a.movedim(axis, -1), o.movedim(axis, -1)  # [..., slice]
        # only slices with enough values that count: a handful fits one factor whatever their errors
        both = torch.isfinite(sa) & torch.isfinite(so)
        both &= ((both & (so != 0)).sum(-1, keepdim=True) >= MIN_SLICE)
        if not bool(both.any()):
            continue
        size = torch.where(torch.isfinite(so), so.abs(), 0.0).amax(-1, keepdim=True).clamp(min=1e-300)
        dot = torch.where(both, sa * so, 0.0).sum(-1, keepdim=True)
        norm = torch.where(both, so * so, 0.0).sum(-1, keepdim=True)
        factor = torch.where(norm > 0, dot / norm.clamp(min=1e-300), 1.0)  # [..., 1]
        left = torch.where(both, (sa - factor * so).abs() / (eps * size), 0.0)[both]
        found = (_quantile(left, 0.9), float(((factor - 1.0).abs() / eps).max()))
        if found[0] < best[0]:
            best = found
    return best if math.isfinite(best[0]) else (None, 0.0)  # no slice long enough: not told apart


def measure(actual: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype,
            score: float | None = None) -> PrecisionProfile | None:
    """The profile of `actual` (a result of `dtype`) against the float64 `oracle` of the same shape."""
    if dtype not in EPS or not isinstance(actual, torch.Tensor) or actual.shape != oracle.shape or \
            actual.dim() == 0 or actual.numel() == 0:
        return None
    a, o = actual.detach().cpu().double(), oracle.detach().cpu().double()
    rows_a, rows_o = a.reshape(-1, a.shape[-1]), o.reshape(-1, o.shape[-1])  # [rows, last axis]
    oracle_finite = torch.isfinite(rows_o)
    nonfinite = int((~torch.isfinite(rows_a) & oracle_finite).sum())
    both = torch.isfinite(rows_a) & oracle_finite
    size = torch.where(oracle_finite, rows_o.abs(), 0.0).amax(-1, keepdim=True).clamp(min=1e-300)  # [rows, 1]
    eps = EPS[dtype]
    units = torch.where(both, (rows_a - rows_o).abs() / (eps * size), 0.0)  # [rows, last axis]
    compared = units[both]
    residual, factor_off = _per_slice_factor(a, o, eps)
    return PrecisionProfile(
        dtype=str(dtype).removeprefix("torch."), eps=eps, compared=int(compared.numel()),
        median_units=_quantile(compared, 0.5), p90_units=_quantile(compared, 0.9),
        max_units=float(compared.max()) if compared.numel() else 0.0, nonfinite=nonfinite,
        largest_score=score, row_factor_p90_units=residual, row_factor_max=factor_off)


def _overflow(profile: PrecisionProfile, dtype: torch.dtype) -> Diagnosis | None:
    limit = math.log(torch.finfo(dtype).max)
    if not profile.nonfinite or profile.largest_score is None or profile.largest_score <= limit:
        return None
    return Diagnosis(
        "precision_overflow", "overflow at large scores: the row maximum is not subtracted", SECTION,
        f"{profile.nonfinite} value(s) are inf or NaN where the exact result is finite, and the largest score "
        f"these inputs make is {profile.largest_score:.4g}: e^{profile.largest_score:.4g} is beyond "
        f"{profile.dtype}'s range (its largest exponential is e^{limit:.4g}), so an exponential overflowed. "
        f"Subtract each row's maximum score before exp (softmax(x) = softmax(x − max x)): every exponential "
        f"is then at most 1.", source="precision")


def _lower_precision(profile: PrecisionProfile, dtype: torch.dtype) -> Diagnosis | None:
    if profile.nonfinite or profile.p90_units <= FINE_UNITS:
        return None
    low, high = SAME_PRECISION
    found = next(((name, lower) for name, lower in LOWER
                  if EPS[lower] > EPS[dtype] and low <= profile.units_of(lower) <= high), None)
    if found is None:
        return None
    name, lower = found
    numbers = (f"the errors are {profile.median_units:.3g} (median) and {profile.p90_units:.3g} (90th percentile) "
               f"units of {profile.dtype}'s rounding (eps = 2^{round(math.log2(profile.eps))}), that is "
               f"{profile.units_of(lower):.2g} units of {name}'s (eps = 2^{round(math.log2(EPS[lower]))})")
    # One factor per row explains the errors when what it leaves is the dtype's own rounding: scattered
    # float16 errors leave hundreds of units however short the rows, a float16 sum leaves about one.
    by_row = (profile.row_factor_p90_units is not None
              and profile.row_factor_p90_units <= min(FINE_UNITS, ROW_FACTOR_SHARE * profile.p90_units))
    if by_row:
        return Diagnosis(
            f"precision_{name}_accumulation", f"a sum accumulated in {name}", SECTION,
            f"Measured against a float64 result, {numbers}; one factor per row explains almost all of it "
            f"(what is left is {profile.row_factor_p90_units:.3g} units; a row's factor is off by up to "
            f"{profile.row_factor_max:.3g} units). Every value of a row is divided by the same wrong number: "
            f"the sum of the exponentials (the softmax's denominator, or a running sum) was accumulated in "
            f"{name}. Accumulate it in {profile.dtype} (or float32).", source="precision")
    return Diagnosis(
        f"precision_{name}_softmax", f"the softmax runs in {name}", SECTION,
        f"Measured against a float64 result, {numbers}, scattered value by value: the weights were computed in "
        f"{name} (a .half() or a {name} tensor on the way). Keep the exponentials and their sum in the input's "
        f"dtype ({profile.dtype}); round only the final result if you must.", source="precision")


def explain(actual: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype, args: tuple = (),
            kwargs: dict | None = None) -> tuple[Diagnosis | None, PrecisionProfile | None]:
    """The precision finding for a wrong result (if its errors show one) and the profile behind it."""
    profile = measure(actual, oracle, dtype, largest_score(args, kwargs or {}))
    if profile is None:
        return None, None
    return _overflow(profile, dtype) or _lower_precision(profile, dtype), profile


def _to_float64(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().cpu().double()
    if isinstance(value, (tuple, list)):
        return type(value)(_to_float64(v) for v in value)
    return value


def oracle(reference: Callable | None, args: tuple, kwargs: dict, expected: torch.Tensor,
           item: int | None = None) -> torch.Tensor:
    """The float64 result: `reference` on float64 copies of the inputs when it runs so, else the
    expected value (computed by the test, within half a unit of its dtype of the oracle)."""
    if reference is not None:
        try:
            with torch.no_grad():
                value = reference(*_to_float64(args), **_to_float64(kwargs))
            if item is not None and isinstance(value, (tuple, list)):
                value = value[item]
            if isinstance(value, torch.Tensor) and value.dtype == torch.float64 and value.shape == expected.shape:
                return value
        except Exception:  # a reference that takes no float64 inputs: the expected value will do
            pass
    return expected.detach().cpu().double()
