"""Misconception diagnosis: which known wrong version does a wrong output match?

Each assignment's `reference/<id>/mutants.py` registers small trusted
functions with `@mutant(...)`. When a student's output is wrong, the trusted
process runs the mutants of that function on the same inputs and names the one
that matches; when the student's call raised, it names the mutant that raises
the same exception (type and message) on those inputs. A mutant whose bug
depends on a tile size is tried at each size it declares (`vary=`), and the
diagnosis says which sizes reproduced the student's output.

Exceptions of the Triton toolchain that a student cannot act on as written
(an API that Triton 3.9 removed, or that its CPU interpreter cannot run) are
recognised by `explain_exception` and explained as what to write instead.

When nothing matches, `measure_difference` says what it can measure, with the
same tolerance the verdict used, as words and as data (grader.core.records
keeps both in the TestOutcome).
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import math
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.core.course import reference_functions
from grader.core.manifest import Manifest
from grader.core.tolerances import tolerance_for
from grader.harness.contract import load_launchers

TRITON_HANDOUT = "the handout's section “Testing on a machine without a GPU” (README.md)"


@dataclass(frozen=True)
class Mutant:
    """A known wrong version of one student function.

    `vary` names module-level constants that `fn` reads, with the values to try (tile sizes,
    say): (("BLOCK_N", (16, 32, 64, 128)),) runs the mutant once per size, with BLOCK_N bound
    to it. The signature stays the student function's.

    `patch` makes the mutant's submission for `grade validate` by editing the reference's
    source instead of appending `fn`: ((old text, new text), ...), each old text found exactly
    once in the file that defines the function (for a launcher of the kernel contract, the
    kernel file). A kernel mistake needs it, since a kernel task grades the student's
    @triton.jit kernel itself: `fn` then only reproduces the buggy kernel's output, in torch,
    for the diagnosis."""

    id: str
    function: str
    title: str
    section: str
    explanation: str
    fn: Callable
    vary: tuple[tuple[str, tuple], ...] = ()
    patch: tuple[tuple[str, str], ...] = ()

    def source(self) -> str:
        """The mutant's own source without its decorator (used by `grade validate`)."""
        lines = inspect.getsource(self.fn).splitlines()
        while lines and not lines[0].lstrip().startswith("def "):
            lines.pop(0)
        return "\n".join(lines) + "\n"

    def variants(self) -> list[dict]:
        """The keyword arguments of every run: [{}] without `vary`."""
        if not self.vary:
            return [{}]
        names = [name for name, _ in self.vary]
        return [dict(zip(names, values, strict=True))
                for values in itertools.product(*(values for _, values in self.vary))]


@dataclass(frozen=True)
class Diagnosis:
    """What most likely went wrong. `source`: "mutant" (a catalogued misconception) or
    "api" (a Triton API problem); `matched`: what agreed with the mutant ("values" or
    "exception"); `variants`: the tried keyword values that reproduced the student's
    output (empty for a mutant without `vary`)."""

    mutant_id: str
    title: str
    section: str
    explanation: str
    source: str = "mutant"
    matched: str = "values"
    variants: tuple[dict, ...] = ()
    handout: str = ""

    def variant_text(self) -> str:
        """'BLOCK_N = 16 or 32' for the matching variants ('' when there are none)."""
        if not self.variants:
            return ""
        names = list(self.variants[0])
        parts = []
        for name in names:
            values = sorted({v[name] for v in self.variants})
            parts.append(f"{name} = " + " or ".join(str(v) for v in values))
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return {"id": self.mutant_id, "title": self.title, "section": self.section,
                "explanation": self.explanation, "source": self.source, "matched": self.matched,
                "variants": [dict(v) for v in self.variants], "variant_text": self.variant_text(),
                "handout": self.handout}


_REGISTRY: list[Mutant] = []


def mutant(*, function: str, id: str, title: str, section: str, explanation: str,
           vary: dict[str, tuple] | None = None, patch: list[tuple[str, str]] | None = None):
    """Register a wrong version of `function`. Its body may use only torch, math,
    triton and the names the reference module of `function` defines.

    `vary` maps module-level names the body reads to the values to try, e.g.
    {"BLOCK_N": (16, 32, 64, 128)} for a bug that depends on the tile size; `grade validate`
    runs the body as written, with the reference module's own value. `patch`: see Mutant."""

    def register(fn: Callable) -> Callable:
        _REGISTRY.append(Mutant(id, function, title, section, explanation, fn,
                                tuple((name, tuple(values)) for name, values in (vary or {}).items()),
                                tuple((old, new) for old, new in (patch or []))))
        return fn

    return register


def load_reference(course_root: Path, manifest: Manifest) -> tuple[dict, list[Mutant]]:
    """The assignment's trusted reference functions and its misconception catalogue.

    With a kernel contract, the contract's launchers are among the functions, bound to the
    reference's kernels (grader.harness.contract)."""
    functions = reference_functions(course_root, manifest.id, manifest.files)
    if not functions:
        return {}, []
    contract = manifest.contract
    if contract is not None and manifest.path is not None:
        kernels = importlib.import_module(f"reference.{manifest.id}.{Path(contract.file).stem}")
        functions.update(load_launchers(contract, manifest.path.parent / contract.module, kernels))
    return functions, load_mutants(f"reference.{manifest.id}.mutants")


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


# ------------------------------------------------------------------ exceptions

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


def diagnose(mutants: list[Mutant], function: str, args: tuple, kwargs: dict,
             actual=None, rtol: float | None = None, atol: float | None = None, *,
             raised: dict | None = None) -> Diagnosis | None:
    """The mutant of `function` that reproduces the student, tried at each of its variants.

    For a value (`actual`): the first mutant whose output on these inputs matches it. For an
    exception (`raised`, the worker's summary of what the student's call raised): the mutant
    that raises the same exception, if exactly one does; when several do (say every emulation
    fails on inputs none of them supports), the exception tells nothing and none is named."""
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


@dataclass(frozen=True)
class ApiProblem:
    """A Triton API that Triton 3.9 removed or that its CPU interpreter cannot run, recognised by
    the exception it raises (`types`: exception class names, `pattern`: searched in the message)."""

    id: str
    title: str
    explanation: str
    types: frozenset[str]
    pattern: re.Pattern
    section: str = "§24"
    handout: str = TRITON_HANDOUT

    def diagnosis(self) -> Diagnosis:
        return Diagnosis(self.id, self.title, self.section, self.explanation, source="api",
                         matched="exception", handout=self.handout)


# The interpreter wraps what a kernel raises in an InterpreterError whose message is the inner
# exception's repr; a GPU compile wraps it in a CompilationError. Both are searched by message.
_TRITON_WRAPPERS = frozenset({"InterpreterError", "CompilationError", "TritonError"})

API_PROBLEMS: tuple[ApiProblem, ...] = (
    ApiProblem(
        "triton_block_ptr_removed", "tl.make_block_ptr no longer exists: Triton 3.9 removed block pointers",
        "Block pointers (tl.make_block_ptr, tl.advance, boundary_check=) are gone from Triton 3.9, so the "
        "kernel stops at that line, in the interpreter and on a GPU alike. Address each tile yourself: "
        "offs_m = start_m + tl.arange(0, BLOCK_M) and offs_d = tl.arange(0, HEAD_DIM) give the tile's "
        "pointers Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd; load them with "
        "mask=offs_m[:, None] < N and other=0.0 (the mask does what boundary_check did). For the keys, "
        "build the pointers from start_n at each step of the loop instead of calling tl.advance. The "
        "stub's query tile shows the pattern.",
        _TRITON_WRAPPERS | {"NotImplementedError", "AttributeError"},
        re.compile(r"Block pointers have been removed|'triton\.language' has no attribute 'make_block_ptr'")),
    ApiProblem(
        "triton_advance_removed", "tl.advance no longer exists: Triton 3.9 removed block pointers",
        "tl.advance moved a block pointer, and block pointers are gone from Triton 3.9. Keep plain "
        "pointer tensors and move them yourself: k_ptrs + start_n * stride_kn (or rebuild them from "
        "start_n + tl.arange(0, BLOCK_N) at each step), with a mask for the keys past N.",
        _TRITON_WRAPPERS | {"AttributeError"}, re.compile(r"'triton\.language' has no attribute 'advance'")),
    ApiProblem(
        "triton_boundary_check", "boundary_check= on a plain pointer (a block-pointer argument)",
        "boundary_check and padding_option belong to block pointers, which Triton 3.9 removed. With "
        "pointer arithmetic the mask does that job: tl.load(ptrs, mask=offs_n[:, None] < N, other=0.0).",
        _TRITON_WRAPPERS | {"TypeError"}, re.compile(r"unexpected keyword argument '(boundary_check|padding_option)'")),
    ApiProblem(
        "triton_autotune_without_gpu", "@triton.autotune with several configs needs a GPU",
        "Autotuning times every config on a GPU, so with more than one config it cannot run in the "
        "interpreter (there is no driver to time on). Use fixed block sizes, or a single config when "
        "os.environ.get('TRITON_INTERPRET') == '1', and keep the full list for the GPU.",
        frozenset({"RuntimeError"}) | _TRITON_WRAPPERS, re.compile(r"\d+ active drivers")),
    ApiProblem(
        "triton_arange_not_power_of_two", "tl.arange with a length that is not a power of two",
        "Every tile dimension in Triton is a power of two: tl.arange(0, 48) is refused. Round the block up "
        "(triton.next_power_of_2) and mask the entries past the real size, the way the tail of N is masked.",
        _TRITON_WRAPPERS | {"ValueError"}, re.compile(r"arange's range must be a power of 2")),
    ApiProblem(
        "triton_libdevice_moved", "tl.libdevice no longer exists",
        "tl.libdevice moved to tl.extra.cuda.libdevice, which only compiles for a GPU and does not run in "
        "the interpreter. The exponentials and logarithms this kernel needs are tl.exp, tl.exp2, tl.log "
        "and tl.log2 (tl.math has the rest).",
        _TRITON_WRAPPERS | {"AttributeError"}, re.compile(r"'triton\.language' has no attribute 'libdevice'")),
    ApiProblem(
        "triton_gpu_only_function", "a GPU-only function (libdevice or inline assembly) in the interpreter",
        "tl.extra.cuda.libdevice functions and tl.inline_asm_elementwise are compiled for the GPU and "
        "cannot run in Triton's CPU interpreter. Use tl.exp, tl.exp2, tl.log, tl.log2 and tl.math, "
        "which run in both. (The same error also means a tl function was called from a helper without "
        "@triton.jit: decorate the helper.)",
        _TRITON_WRAPPERS | {"ValueError", "NotImplementedError"},
        re.compile(r"_semantic` argument must be provided outside of JIT|not supported in interpreter mode")),
)

# Source text that the interpreter runs without an error but computes wrongly (Triton 3.9).
BF16_IN_KERNEL = re.compile(r"\btl\.bfloat16\b")
BF16_HINT = Diagnosis(
    "triton_bf16_interpreter", "tl.bfloat16 in the kernel: Triton's interpreter computes it wrongly",
    "§24", "Triton's CPU interpreter gets bfloat16 arithmetic wrong without saying so (a bfloat16 "
    "tl.dot there can be off by orders of magnitude), and your file converts to tl.bfloat16. Keep the "
    "running statistics and the accumulator in float32 and convert p to v's dtype (p.to(v.dtype)) "
    "before the second tl.dot; bfloat16 inputs are only tested on a GPU.",
    source="api", handout=TRITON_HANDOUT)


def explain_exception(raised: dict) -> Diagnosis | None:
    """The Triton API problem that the worker's exception summary `raised` ({"type",
    "message"}) shows, if it is one of API_PROBLEMS."""
    kind, message = str(raised.get("type", "")), str(raised.get("message", ""))
    for problem in API_PROBLEMS:
        if kind in problem.types and problem.pattern.search(message):
            return problem.diagnosis()
    return None


# ------------------------------------------------------------------ differences


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


def describe_difference(actual: torch.Tensor, expected: torch.Tensor, mask: torch.Tensor | None = None,
                        rtol: float | None = None, atol: float | None = None) -> str:
    """Words for what differs between two same-shaped tensors: how much and where."""
    return measure_difference(actual, expected, mask, rtol, atol).text


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
