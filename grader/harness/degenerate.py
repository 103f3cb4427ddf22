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


def message(name: str, suspicion: Suspicion, section: str = "") -> str:
    """What was returned and what to change, for the student."""
    what = "its result" if suspicion.item is None else f"item {suspicion.item} of its result"
    cite = f" ({section})" if section else ""
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
