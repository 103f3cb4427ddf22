"""What a dotted name of a library resolves to, judged against the allow-list.

A submission's `torch.serialization.pickle.loads` is `pickle.loads`, whatever it is
spelled as: `resolve_outside` walks the dotted name through the real objects (the
modules are imported here, in the trusted process, never in the worker) and says why
the name is outside what a submission may reach, or None. Every module on the way
must be on the allow-list (`grader.sandbox.forbidden.module_allowed`), so a module
reached as an attribute of another (torch and Triton re-export standard-library
modules) counts as importing it; a function or class found at the end is judged by
where it lives (its `__module__`) and its full name, so `torch.sparse.softmax` is
`torch._C._sparse._sparse_softmax` and `triton.compile` lives in Triton's compiler.

`outside_attribute` covers the names that hold such a module on an object the walk
cannot follow statically (a local variable, an element of a list): `m.serialization`
is refused whatever `m` is. Results are cached: the answers depend only on the
installed libraries.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types

from grader.sandbox.forbidden import (
    ALLOWED_NAMES,
    ATTRIBUTES,
    DOTTED,
    EVASION,
    EVASION_RULES,
    OBJECT_HOMES,
    module_allowed,
)

_DENIED_PREFIXES = tuple(sorted(p for r in EVASION_RULES if r.kind == "prefix" for p in r.names))
_DENIED_BUILTINS = {n: r.why for r in EVASION_RULES if r.kind in ("builtin", "name_arg") for n in r.names}
_LIBRARY_ROOTS = ("torch", "triton")


def _module_text(name: str, written: str) -> str:
    shown = name if name == written else f"{written} is the module {name}, which"
    return f"{shown} is not among the modules a submission may use (the handout lists them)"


def _denied_prefix(dotted: str) -> str | None:
    for prefix in _DENIED_PREFIXES:
        if dotted == prefix or dotted.startswith(prefix + "."):
            return prefix
    return None


def _judge(obj: object, written: str) -> list[tuple[str, str]]:
    """(group, why) for one object reached by the walk: a module, a class or a function."""
    if isinstance(obj, types.ModuleType):
        name = getattr(obj, "__name__", None)
        if not isinstance(name, str) or not module_allowed(name):
            return [(EVASION, _module_text(str(name), written))]
        return []
    if not (isinstance(obj, type) or callable(obj)):
        return []  # a value (a dtype, a number, a setting): judged by the names that reach it
    try:
        module = getattr(obj, "__module__", None)
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    except Exception:  # noqa: BLE001 - a library object whose attributes raise: judged by its path only
        return []
    if not isinstance(module, str) or not isinstance(name, str):
        return []
    canonical = f"{module}.{name}"
    hits = [(group, "") for group, names in DOTTED.items() if canonical in names]
    last = name.rsplit(".", 1)[-1]
    hits += [(group, "") for group, names in ATTRIBUTES.items() if last in names]
    root = module.split(".")[0]
    if root in _LIBRARY_ROOTS:
        prefix = _denied_prefix(canonical)
        if prefix is not None:
            shown = written if written == canonical else f"{written} is {canonical}, which"
            hits.append((EVASION, f"{shown} is under {prefix}"))
        elif (not any(p.startswith("_") for p in module.split(".")) and not module_allowed(module)
              and module not in OBJECT_HOMES):
            hits.append((EVASION, f"{written} is {canonical}; {module} is not among the modules a "
                                  f"submission may use"))
    elif module == "builtins":
        if last in _DENIED_BUILTINS:
            hits.append((EVASION, f"{written} is the built-in {last}: {_DENIED_BUILTINS[last]}"))
    elif not module_allowed(module) and not module_allowed(module.lstrip("_")):
        hits.append((EVASION, f"{written} is {canonical}, which is not among the modules a submission may use"))
    return hits


@functools.lru_cache(maxsize=8192)
def resolve_outside(dotted: str) -> tuple[tuple[str, str], ...]:
    """(group, why) for every reason the library name `dotted` (after the student's aliases are
    resolved, e.g. "torch.serialization.pickle.loads") is outside the allow-list or names a
    forbidden group's function; () when it is allowed or does not exist (it then fails when run)."""
    parts = dotted.split(".")
    root = parts[0]
    if any(dotted == name or dotted.startswith(name + ".") for name in ALLOWED_NAMES):
        return ()
    if not module_allowed(root):
        return ((EVASION, _module_text(root, root)),)
    try:
        obj: object = importlib.import_module(root)
    except Exception:  # noqa: BLE001 - an allowed library that is not installed: nothing to resolve
        return ()
    hits: list[tuple[str, str]] = []
    for i in range(1, len(parts)):
        attr, written = parts[i], ".".join(parts[: i + 1])
        if attr.startswith("__") and attr.endswith("__"):
            break  # dunders are judged by their names (grader.sandbox.forbidden.EVASION_RULES)
        found = _attribute(obj, attr)
        if found is _MISSING:
            if not isinstance(obj, types.ModuleType):
                break
            sub = f"{obj.__name__}.{attr}"
            if not module_allowed(sub):
                if _is_module(sub):
                    hits.append((EVASION, _module_text(sub, written)))
                break
            try:
                found = importlib.import_module(sub)
            except Exception:  # noqa: BLE001 - no such module: the name fails when it runs
                break
        hits += _judge(found, written)
        if any(group == EVASION for group, _ in hits):
            break
        obj = found
    return tuple(dict.fromkeys(hits))


_MISSING = object()


def _attribute(obj: object, attr: str) -> object:
    try:
        return getattr(obj, attr)
    except Exception:  # noqa: BLE001 - a lazy attribute that fails to load is as good as absent
        return _MISSING


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except Exception:  # noqa: BLE001 - a parent that is not a package
        return False


# Attribute names under which torch, Triton or an allowed module hold a module that turns a string into
# an object or into running code (torch.serialization.pickle, triton.language.math.core.builtins,
# torch.nn.functional.importlib...). Read from an object the check cannot follow (a local variable, an
# element of a list) they are refused: `m.serialization` whatever `m` is. Kept as a table, so that the
# check does not import Triton to judge a name; tests/test_static_checks.py walks the real modules and
# checks that it covers every such holder (`route_holders`).
ROUTE_ATTRIBUTES: frozenset[str] = frozenset({
    "builtins", "importlib", "inspect", "os", "sys", "pickle", "copyreg", "pkgutil", "ctypes", "gc",
    "threading", "concurrent", "multiprocessing", "mp", "traceback", "pydoc", "timeit", "runpy", "marshal",
    "subprocess", "jit", "fx", "library", "ops", "overrides", "serialization", "utils", "package", "hub",
    "export", "compiler", "knobs", "runtime", "jiterator", "classes", "distributed", "cpp", "ir",
    "backends", "tools", "hooks", "return_types",
})
# The modules (and packages) counted as such routes when `route_holders` walks the real objects.
_ROUTE_MODULES = ("builtins", "importlib", "inspect", "os", "sys", "pickle", "copyreg", "pkgutil", "ctypes", "gc",
                  "threading", "concurrent", "multiprocessing", "traceback", "pydoc", "timeit", "runpy", "marshal",
                  "subprocess", "torch.jit", "torch.fx", "torch.library", "torch.ops", "torch.overrides",
                  "torch.serialization", "torch.utils", "torch.package", "torch.hub", "torch.export",
                  "torch.compiler", "torch.cuda.jiterator", "torch.classes", "torch.distributed",
                  "torch.multiprocessing", "torch._C", "triton.compiler", "triton.knobs", "triton.runtime",
                  "triton.backends", "triton.tools", "triton._C")


def route_holders() -> dict[str, str]:
    """Attribute name → route module, for every public attribute of an allowed torch or Triton module
    (walked through allowed modules from torch and, where installed, triton) that holds a module
    under `_ROUTE_MODULES`. For the test of ROUTE_ATTRIBUTES; imports Triton."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    todo: list[types.ModuleType] = []
    for root in _LIBRARY_ROOTS:
        try:
            todo.append(importlib.import_module(root))
        except Exception:  # noqa: BLE001 - Triton absent: nothing of it to reach
            continue
    while todo:
        module = todo.pop()
        if module.__name__ in seen:
            continue
        seen.add(module.__name__)
        for attr, value in sorted(vars(module).items()):
            name = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else ""
            if attr.startswith("_") or not isinstance(name, str) or not name:
                continue
            if module_allowed(name):
                if name.split(".")[0] in _LIBRARY_ROOTS:
                    todo.append(value)
            elif any(name == r or name.startswith(r + ".") for r in _ROUTE_MODULES):
                out.setdefault(attr, name)
    return out


def outside_attribute(attr: str) -> str | None:
    """Why reading `attr` from an object the check cannot follow may reach a module that runs strings
    (`m.serialization` where m may be torch), or None."""
    if attr in ROUTE_ATTRIBUTES:
        return f".{attr} can be a module outside the allow-list (such as torch.{attr} or {attr} itself)"
    return None


def star_binds(module_name: str, name: str) -> bool:
    """Whether `from module_name import *` binds `name`: by the real module's `__all__` (or public
    names) for the allow-list and the standard library; for any other library the check cannot
    tell, so every name may be its."""
    root = module_name.split(".")[0]
    if module_allowed(module_name) or root in sys.stdlib_module_names:
        return name in _star_exports(module_name)
    return True


@functools.lru_cache(maxsize=256)
def _star_exports(module_name: str) -> frozenset[str]:
    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - not installed: binds nothing
        return frozenset()
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return frozenset(n for n in names if isinstance(n, str))


def store_outside(dotted: str) -> str | None:
    """Why storing into the library attribute `dotted` (`torch.softmax = f`) is refused, or None for a
    setting: an attribute that exists and holds a plain bool, number or string
    (`torch.backends.cuda.matmul.allow_tf32 = False`)."""
    parent, _, attr = dotted.rpartition(".")
    obj: object = None
    try:
        obj = importlib.import_module(parent.split(".")[0])
        for part in parent.split(".")[1:]:
            obj = getattr(obj, part)
        value = getattr(obj, attr)
    except Exception:  # noqa: BLE001 - a new attribute of a library object
        return f"{dotted} is stored into: a submission may not change a library's functions or modules"
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    return f"{dotted} is stored into: a submission may not change a library's functions or modules"


@functools.lru_cache(maxsize=4096)
def resolves_to_module(dotted: str) -> bool:
    """Whether the library name `dotted` is a module (an allowed one: others are refused already)."""
    parts = dotted.split(".")
    if not module_allowed(parts[0]):
        return False
    try:
        obj: object = importlib.import_module(parts[0])
        for part in parts[1:]:
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - absent: not a module
        return False
    return isinstance(obj, types.ModuleType)
