"""The misconception catalogue's vocabulary: mutants (known wrong versions of a student function)
and diagnoses (what most likely went wrong).

Each assignment's `reference/<id>/mutants.py` registers small trusted functions with
`@mutant(...)` (`from grader.harness.catalogue import mutant`); `load_mutants` gives the
ones one catalogue module registered.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass


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
_COMPOSITIONS: list[Composition] = []


@dataclass(frozen=True)
class Composition:
    """A task's function computed by the course from other tasks' functions it may call (`uses`).

    `fn(helpers, *args, **kwargs)` is trusted code that computes `function`'s result, calling
    `helpers[name]` for each name in `uses`: given the reference's helpers it equals the reference.
    With one helper swapped for the student's (called in the sandbox), it computes "the rest with the
    reference from the student's helper output": when that reproduces the student's wrong result and
    the student's helper is itself wrong on those inputs, the helper is the one cause to fix first.
    The handout states each such dependency (tests/test_one_true_cause.py checks it)."""

    function: str
    uses: tuple[str, ...]
    fn: Callable


def composed(*, function: str, uses: tuple[str, ...]):
    """Register how `function` is computed from the functions in `uses` (see Composition)."""

    def register(fn: Callable) -> Callable:
        _COMPOSITIONS.append(Composition(function, tuple(uses), fn))
        return fn

    return register


def load_compositions(module_name: str) -> list[Composition]:
    """Import `reference.<id>.dependencies` and return the compositions it registered ([] without one)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return []
        raise
    return [c for c in _COMPOSITIONS if c.fn.__globals__ is vars(module)]


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
