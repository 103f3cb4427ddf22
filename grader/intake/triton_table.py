"""What a name inside a Triton kernel may resolve to: a table read from the installed Triton.

A kernel body is vetted by resolution (grader.intake.kernels): each dotted name that starts at
an import of triton must lead, step by step, through triton.language's own namespaces to a
triton.language function, type or dtype (or a plain number it exports). This module walks the
installed `triton.language` once and records every such path with what its object is, so the
vetting is the same for any Triton version the course runs (the walk, not a list written for
one version, decides). A path that reaches anything else (a module such as
`triton.language.core` or `pkgutil`, a function of another library such as `functools.wraps`)
is not in the table, and `refused` says what it is.

Reading the table imports triton on the trusted side; nothing of the student's runs here.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass

# triton.language's documented namespaces: the only modules a kernel may name on its way to a function.
NAMESPACES = frozenset({
    "triton.language", "triton.language.math", "triton.language.extra", "triton.language.extra.libdevice",
    "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice", "triton.language.extra.hip",
    "triton.language.extra.hip.libdevice",
})
TOP_LEVEL = ("language", "cdiv")  # what a kernel may name under `triton` itself
HIDDEN_VALUE_ATTRIBUTES = frozenset({"handle"})  # the interpreter's numpy array behind a tensor

# kinds of a path
NAMESPACE, FUNCTION, TYPE, DTYPE, NUMBER = "namespace", "function", "type", "dtype", "number"
ABSENT = "absent"  # not in the installed Triton: the kernel raises AttributeError there


@dataclass(frozen=True)
class TritonTable:
    """Every path a kernel may name (`triton.language.exp` → "function") and the attributes a
    Triton value (tensor, dtype, pointer, block type, constexpr) has."""

    version: str
    paths: dict[str, str]
    refused: dict[str, str]  # a path one step past a namespace that is not allowed → what it is
    value_attributes: frozenset[str]

    def absent(self, path: str) -> bool:
        """Whether `path` names nothing in the installed Triton: one step past a namespace of the table,
        an attribute its module does not have (tl.advance in 3.9). Using it raises AttributeError in the
        kernel, in the interpreter and on a GPU alike, so the kernel gets Triton's own error and its
        explanation (grader.harness.triton_api) rather than a finding."""
        parent, _, name = path.rpartition(".")
        if self.paths.get(parent) != NAMESPACE or path in self.refused or name.startswith("_"):
            return False
        import importlib

        module = importlib.import_module("triton")
        for part in parent.split(".")[1:]:
            module = getattr(module, part)
        return not hasattr(module, name)


def _from_triton(obj: object) -> bool:
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module == "triton.language" or module.startswith("triton.language."))


def _is_jit(obj: object) -> bool:
    """A @triton.jit function of Triton's own (a JITFunction, or the interpreter's wrapper of one)."""
    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # a Triton without the interpreter
        return isinstance(obj, JITFunction)
    return isinstance(obj, (JITFunction, InterpretedFunction))


def _what(obj: object) -> str:
    """A refused object in words, for the finding's message."""
    if isinstance(obj, types.ModuleType):
        return f"the module {obj.__name__}"
    module = getattr(obj, "__module__", None)
    kind = type(obj).__name__
    return f"a {kind} from {module}" if isinstance(module, str) else f"a {kind}"


def _classify(language: types.ModuleType, name: str, obj: object) -> str | None:
    if isinstance(obj, types.ModuleType):
        return NAMESPACE if obj.__name__ in NAMESPACES else None
    if isinstance(obj, language.dtype):
        return DTYPE
    if isinstance(obj, bool | int | float) and type(obj) in (bool, int, float):
        return NUMBER
    if isinstance(obj, type):  # Triton's own classes, and those triton.language exports by name (PropagateNan)
        return TYPE if _from_triton(obj) or name in getattr(language, "__all__", ()) else None
    if callable(obj) and _from_triton(getattr(obj, "fn", obj) if _is_jit(obj) else obj):
        return FUNCTION
    return None


def _value_attributes(language: types.ModuleType) -> frozenset[str]:
    """The public attributes of Triton's value types and of an instance of each."""
    names: set[str] = set()
    classes = [language.tensor, language.dtype, language.pointer_type, language.block_type, language.constexpr]
    samples = []
    for make in (lambda: language.float16, lambda: language.pointer_type(language.float16),
                 lambda: language.block_type(language.float16, [16]), lambda: language.constexpr(1),
                 lambda: language.tensor(None, language.float16)):
        try:
            samples.append(make())
        except Exception:  # noqa: BLE001 - a constructor another Triton version shapes differently
            continue
    for cls in classes:
        names |= {n for n in dir(cls) if not n.startswith("_")}
    for sample in samples:
        names |= {n for n in vars(sample) if not n.startswith("_")}
    return frozenset(names - HIDDEN_VALUE_ATTRIBUTES)


@functools.cache
def triton_table() -> TritonTable:
    """The table of the installed Triton (read once per process)."""
    import triton
    import triton.language as language

    paths: dict[str, str] = {"triton": NAMESPACE}
    refused: dict[str, str] = {}
    for name in TOP_LEVEL:
        obj = getattr(triton, name, None)
        if obj is language:
            paths[f"triton.{name}"] = NAMESPACE
        elif callable(obj):
            paths[f"triton.{name}"] = FUNCTION
    frontier = [("triton.language", language)]
    seen_paths = set()
    while frontier:
        path, module = frontier.pop()
        if path in seen_paths or path.count(".") > 6:
            continue
        seen_paths.add(path)
        for name in dir(module):
            if name.startswith("_"):
                continue
            try:
                obj = getattr(module, name)
            except Exception:  # noqa: BLE001 - a lazy attribute that fails to load is not reachable
                continue
            where = f"{path}.{name}"
            kind = _classify(language, name, obj)
            if kind is None:
                refused[where] = _what(obj)
                continue
            paths[where] = kind
            if kind == NAMESPACE:
                frontier.append((where, obj))
            elif kind == TYPE:  # an enumeration's members (tl.PropagateNan.ALL)
                members = getattr(obj, "__members__", None)
                for member in members.keys() if hasattr(members, "keys") else ():
                    paths[f"{where}.{member}"] = DTYPE
    return TritonTable(triton.__version__, paths, refused, _value_attributes(language))
