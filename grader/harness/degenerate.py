"""Degenerate outputs: placeholders that satisfy a property test without computing anything.

A property test (rows sum to one, masked entries are zero, the shape is right)
can pass for an output that is all zeros, all the same number, NaN, or one of
the inputs handed back. Such an output earns nothing unless the correct answer
on the same inputs is degenerate in the same way (softmax over a single key is
all ones; scale_scores with d_k = 1 returns its input).

The check runs in the trusted process, on every student call, in two steps:
`suspicions` looks only at the student's value (cheap; nothing is computed for
an ordinary output), and only then `unexplained` compares with the trusted
reference's value for the same inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from grader.core.tolerances import tolerance_for

NAN, CONSTANT, INPUT = "nan", "constant", "input"


@dataclass(frozen=True)
class Suspicion:
    """One way a returned tensor is degenerate."""

    item: int | None  # index in a returned tuple; None for a single tensor
    kind: str  # nan | constant | input
    detail: str  # what was returned, in words
    shape: tuple[int, ...]
    input_name: str = ""  # for kind "input": which argument came back


def _items(value) -> list[tuple[int | None, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(None, value)]
    if isinstance(value, (tuple, list)):
        return [(i, v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return []


def _named_inputs(args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    named = [(f"argument {i + 1}", a) for i, a in enumerate(args)]
    named += [(f"argument {k!r}", v) for k, v in kwargs.items()]
    return [(n, t) for n, t in named if isinstance(t, torch.Tensor)]


def _number(t: torch.Tensor) -> str:
    value = t.reshape(-1)[0].item()
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _constant_words(t: torch.Tensor) -> str:
    if t.dtype == torch.bool:
        return "all True" if bool(t.reshape(-1)[0]) else "all False"
    number = _number(t)
    if number == "0":
        return "all zeros"
    if number == "1":
        return "all ones"
    return f"the same number, {number}, everywhere"


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.detach().cpu(), b.detach().cpu())


def suspicions(value, args: tuple, kwargs: dict) -> list[Suspicion]:
    """Every way the student's value looks degenerate (empty for an ordinary output)."""
    found: list[Suspicion] = []
    inputs = _named_inputs(args, kwargs)
    for item, t in _items(value):
        if t.numel() == 0:
            continue
        t = t.detach()
        shape = tuple(t.shape)
        if (t.is_floating_point() or t.is_complex()) and bool(torch.isnan(t).any()):
            count = int(torch.isnan(t).sum())
            found.append(Suspicion(item, NAN, f"NaN in {count} of its {t.numel()} elements", shape))
            continue
        if t.numel() >= 2 and bool((t == t.reshape(-1)[0]).all()):
            found.append(Suspicion(item, CONSTANT, _constant_words(t), shape))
        for name, given in inputs:
            if _same(t, given):
                found.append(Suspicion(item, INPUT, f"{name} unchanged", shape, name))
                break
    return found


def stored_nothing(value) -> bool:
    """Whether every floating-point tensor of a launcher's result is NaN in every element: the launcher
    fills its outputs with NaN, so its kernels stored nothing at all (not written yet)."""
    items = [t for _, t in _items(value) if t.is_floating_point() and t.numel()]
    return bool(items) and all(bool(torch.isnan(t.detach()).all()) for t in items)


def _reference_is(kind: Suspicion, expected: torch.Tensor, inputs: dict[str, torch.Tensor]) -> bool:
    """Whether the reference's value is degenerate in the same way (within the dtype's tolerance)."""
    e = expected.detach().cpu()
    if kind.kind == NAN:
        return (e.is_floating_point() or e.is_complex()) and bool(torch.isnan(e).any())
    if kind.kind == CONSTANT:
        if e.numel() < 2 or bool((e == e.reshape(-1)[0]).all()):
            return True
        if not e.is_floating_point():
            return False
        rtol, atol = tolerance_for(e.dtype)
        e64 = e.double()
        return bool(torch.allclose(e64, e64.reshape(-1)[0].expand_as(e64), rtol=rtol, atol=atol))
    given = inputs.get(kind.input_name)
    if given is None:
        return False
    g = given.detach().cpu()
    if g.shape != e.shape:
        return False
    if not (e.is_floating_point() and g.is_floating_point()):
        return torch.equal(e, g.to(e.dtype)) if g.dtype == e.dtype else False
    rtol, atol = tolerance_for(e.dtype)
    return bool(torch.allclose(e.double(), g.double(), rtol=rtol, atol=atol))


def unexplained(found: list[Suspicion], expected, args: tuple, kwargs: dict) -> Suspicion | None:
    """The first suspicion that the reference's value on the same inputs does not share.

    Items the reference does not return as a tensor of the same shape are left to
    the test's own comparison (a wrong shape is better explained there)."""
    reference = dict(_items(expected))
    inputs = dict(_named_inputs(args, kwargs))
    for suspicion in found:
        e = reference.get(suspicion.item)
        if e is None or tuple(e.shape) != suspicion.shape:
            continue
        if not _reference_is(suspicion, e, inputs):
            return suspicion
    return None


SUMMARIES = {NAN: "returned NaN where the right answer has none",
             CONSTANT: "returned a placeholder: a constant that does not depend on the inputs",
             INPUT: "handed back one of its inputs unchanged"}


def summary(suspicion: Suspicion) -> str:
    """A short name for the kind of degenerate value (failures are grouped by it)."""
    return SUMMARIES[suspicion.kind]


def measured(suspicion: Suspicion) -> str:
    """What was returned, in a few words ("its result is all zeros")."""
    what = "its result" if suspicion.item is None else f"item {suspicion.item} of its result"
    if suspicion.kind == NAN:
        return f"returned NaN: {what} has {suspicion.detail}"
    if suspicion.kind == CONSTANT:
        return f"returned a placeholder: {what} is {suspicion.detail}"
    return f"handed back an input: {what} is its {suspicion.detail}"


def message(name: str, suspicion: Suspicion, section: str = "", kernels: tuple[str, ...] = ()) -> str:
    """What was returned and what to change, for the student. `kernels`: the result is what the
    student's kernels wrote into the grader's buffers (a launcher of the kernel contract)."""
    what = "its result" if suspicion.item is None else f"item {suspicion.item} of its result"
    cite = f" ({section})" if section else ""
    if kernels:
        return _kernel_message(" and ".join(kernels), suspicion, cite)
    if suspicion.kind == NAN:
        return (f"{name} returned NaN: {what} has {suspicion.detail}, where the right answer has none. "
                f"NaN usually comes from -inf - (-inf), 0 / 0 or exp() of a large number: subtract the "
                f"maximum before exp() and give slices with nothing to attend to 0, not 0 / 0{cite}.")
    if suspicion.kind == CONSTANT:
        return (f"{name} returned a placeholder: {what} is {suspicion.detail}, but on these inputs the "
                f"right answer is not constant. A result that does not depend on the inputs earns "
                f"nothing, even where a property such as the shape holds: compute it from the "
                f"inputs{cite}.")
    return (f"{name} handed back one of its inputs: {what} is its {suspicion.detail}, but on these "
            f"inputs the right answer differs from it. Compute a new tensor from the inputs{cite}.")


def _kernel_message(kernels: str, suspicion: Suspicion, cite: str) -> str:
    what = "its output" if suspicion.item is None else f"output {suspicion.item}"
    if suspicion.kind == NAN:
        return (f"the output of your {kernels} holds NaN ({what}: {suspicion.detail}). The grader fills the "
                f"output with NaN before it launches your kernel, so an element the kernel never stores stays "
                f"NaN: check that the grid covers every row and that the store's mask keeps the rows that exist. "
                f"A stored NaN usually comes from -inf - (-inf) or 0 / 0{cite}.")
    if suspicion.kind == CONSTANT:
        return (f"your {kernels} wrote a placeholder: {what} is {suspicion.detail}, but on these inputs the "
                f"right answer is not constant. If the kernel's loop is still empty, write it; otherwise the "
                f"stored values do not depend on the inputs{cite}.")
    return (f"your {kernels} wrote one of its inputs back: {what} is its {suspicion.detail}, but on these "
            f"inputs the right answer differs from it{cite}.")


# ------------------------------------------------------------------ degenerate submissions
# What `grade validate` hands the hidden tests in place of a submission, one family at a time:
# the reference's answer with its values replaced. A test that passes for one of them carries
# points that a placeholder earns.
FAMILIES = {
    "zeros": "all zeros (all False)",
    "ones": "all ones (all True)",
    "nan": "NaN everywhere",
    "constant": "one number everywhere (the answer's mean)",
    "input 1": "its first tensor argument handed back",
    "input 2": "its second tensor argument handed back",
    "input 3": "its third tensor argument handed back",
}


def _degenerate_tensor(family: str, value: torch.Tensor, inputs: list[torch.Tensor]) -> torch.Tensor:
    if family == "zeros":
        return torch.zeros_like(value)
    if family == "ones":
        return torch.ones_like(value)
    if family == "nan":
        return torch.full_like(value, float("nan")) if value.is_floating_point() else torch.ones_like(value)
    if family == "constant":
        if not value.is_floating_point() or value.numel() == 0:
            return torch.zeros_like(value)
        finite = value[torch.isfinite(value)]
        return torch.full_like(value, float(finite.double().mean()) if finite.numel() else 0.0)
    position = int(family.split()[-1]) - 1  # "input N": the N-th tensor argument, where it fits
    if position < len(inputs) and inputs[position].shape == value.shape and inputs[position].dtype == value.dtype:
        return inputs[position].clone()
    return torch.zeros_like(value)


def degenerate_answer(family: str, answer, args: tuple, kwargs: dict):
    """`answer` (the reference's value for these arguments) as a placeholder of `family` would give it:
    the same structure, shapes and dtypes, the values replaced."""
    inputs = [t for _, t in _named_inputs(args, kwargs)]
    if isinstance(answer, torch.Tensor):
        return _degenerate_tensor(family, answer, inputs)
    if isinstance(answer, (tuple, list)):
        return type(answer)(degenerate_answer(family, a, args, kwargs) for a in answer)
    if isinstance(answer, bool):
        return family == "ones"
    if isinstance(answer, (int, float)):
        return {"zeros": 0, "ones": 1, "nan": float("nan")}.get(family, 0) if isinstance(answer, float) else \
            {"ones": 1}.get(family, 0)
    return answer
