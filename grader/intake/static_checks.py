"""Static checks of the submitted source: syntax, forbidden APIs, evasion, Triton launches.

This is the authority on what a submission calls: the run-time detectors run in
the student's own process and are hints only.

Every submitted .py file is parsed (not only the manifest's files). Imports between
the student's own modules are resolved (`import helpers`, `from helpers import f`,
`from . import x`), and each finding is attributed to the tasks that can reach it:

* a *unit* is a function (top-level or a method), a class body, the value of a
  module-level assignment, or a module's import-time code;
* a task reaches the units of its entry functions (the manifest's `functions`,
  and `uses` for functions it shares with another task), then everything those
  units name: functions, classes (a class named by reachable code brings all its
  methods in, so `Fn.apply(...)` reaches `Fn.forward` and `Fn.backward`),
  aliases, across modules; writing into a module-level name (`global x`,
  `helpers.f = g`, `CACHE.append(g)`) makes the writer part of that name;
* import-time code (module-level statements, decorators) of every manifest module
  and of every student module imported from reached code counts for every task,
  because the sandbox imports all of them before any call. Code under
  `if __name__ == "__main__":` never runs on import and is skipped;
* a class or function that no task reaches counts against no task.

Aliases (`import torch.nn.functional as F`, `from torch import softmax as s`,
`sm = torch.softmax`) are resolved. Code inside `@triton.jit` kernels is not torch
code and is skipped for the matmul group. The evasion table, the API groups and
the course's own modules are in `grader.sandbox.forbidden`.

A task with `requires = ["triton_launch"]` must reach, from each of its entry
functions (with everything the name may be bound to), a launch `kernel[grid](...)`
of a @triton.jit function defined in the submitted files. That proves a kernel of
the student's own can run, not that it computes the result: the tests' run-time
launch count and their comparison with the reference remain the second line.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from grader.core.compat import with_deep_stack
from grader.core.manifest import Manifest, Task
from grader.core.records import StaticFinding
from grader.intake.kernels import kernel_module, scan_module, vet_kernel
from grader.sandbox.forbidden import (
    ALLOWED_LIBRARIES,
    ATTRIBUTES,
    CLASS_CHAIN_HARMLESS,
    COURSE_CODE,
    COURSE_MODULES,
    DOTTED,
    EVASION,
    EVASION_RULES,
    KERNEL_CODE,
    NO_TRITON_LAUNCH,
    NUMPY_MODULES,
)

TRY_NODES = tuple(getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name))  # TryStar: 3.11+

COMPILED_SUFFIXES: tuple[str, ...] = tuple(dict.fromkeys(
    [*importlib.machinery.EXTENSION_SUFFIXES, *importlib.machinery.BYTECODE_SUFFIXES, ".so", ".pyd"]))
GETATTR_FAMILY = frozenset({"getattr", "setattr", "delattr", "hasattr"})
LOOKUP_METHODS = frozenset({"get", "pop", "setdefault", "__getitem__"})
IMPORT_CALLS = frozenset({"importlib.import_module", "importlib.__import__", "__import__",
                          "builtins.__import__", "importlib.util.find_spec"})
CODE_WIDTH = 100  # characters of source quoted in a finding
RECURSION_LIMIT = 20_000  # the walk recurses once per nesting level of an expression

_PREFIX_RULES = [(p, r.why) for r in EVASION_RULES if r.kind == "prefix" for p in sorted(r.names)]
_PRIVATE_ROOTS = {n: r.why for r in EVASION_RULES if r.kind == "private" for n in r.names}
_BUILTINS = {n: r.why for r in EVASION_RULES if r.kind == "builtin" for n in r.names}
_NAME_ARG = {n: r.why for r in EVASION_RULES if r.kind == "name_arg" for n in r.names}
_ATTRIBUTES = {n: r.why for r in EVASION_RULES if r.kind == "attribute" for n in r.names}


@dataclass(frozen=True)
class SourceProblem:
    """A submitted file that could not be parsed."""

    filename: str
    message: str


@dataclass(frozen=True)
class _Hit:
    group: str
    filename: str
    line: int
    code: str


@dataclass
class _Unit:
    key: tuple[str, str]  # (module, name of the unit)
    filename: str
    line: int
    kernel: bool = False
    hits: list[_Hit] = field(default_factory=list)
    refs: set[tuple[str, str]] = field(default_factory=set)  # module-level names it reads
    imports: set[str] = field(default_factory=set)  # student modules whose import-time code it runs
    whole: set[str] = field(default_factory=set)  # student modules it uses as objects
    launches: list[set[tuple[str, str]]] = field(default_factory=list)  # names launched as kernel[grid]
    open_launch: bool = False  # launches a kernel passed in as a parameter
    makes_kernel: bool = False  # a value built with triton.jit(...)


@dataclass
class _Class:
    units: list[tuple[str, str]]  # methods, class body, nested classes' units
    node: ast.ClassDef


@dataclass
class _Module:
    name: str
    filename: str
    package: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)  # module-level imports: name → dotted
    bindings: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # name → unit keys
    classes: dict[tuple[str, str], _Class] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # `from X import *` sources (dotted)
    functions: dict[str, ast.AST] = field(default_factory=dict)  # unit name → def node


def _module_name(filename: str) -> tuple[str, str] | None:
    """(module name, package) of a submitted path: helpers.py → helpers, pkg/__init__.py → pkg."""
    path = PurePosixPath(filename)
    if path.suffix != ".py":
        return None
    parts = list(path.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
        package = ".".join(parts)
    else:
        package = ".".join(parts[:-1])
    if not parts:
        return None
    return ".".join(parts), package


_INSTALLED: dict[str, bool] = {}


def _installed(root: str) -> bool:
    """Whether a top-level module exists in this Python (stdlib or installed), without importing it."""
    if root in sys.stdlib_module_names or root in sys.builtin_module_names:
        return True
    if root not in _INSTALLED:
        try:
            _INSTALLED[root] = root.isidentifier() and importlib.util.find_spec(root) is not None
        except (ImportError, ValueError):
            _INSTALLED[root] = False
    return _INSTALLED[root]


def _fold(node: ast.AST | None) -> str | None:
    """The value of a string built only from literals ("soft" + "max", f"{'soft'}max"), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left), _fold(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = _fold(value.value)
                if inner is None or value.format_spec is not None:
                    return None
                parts.append(inner)
            else:
                parts.append(_fold(value) or "")
        return "".join(parts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
        sep = _fold(node.func.value)
        items = [_fold(e) for e in node.args[0].elts]
        if sep is not None and all(i is not None for i in items):
            return sep.join(items)
    return None


def _chain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    """`a.b.c` → (Name a, ["b", "c"]); the root may be any expression."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node, list(reversed(attrs))


def _has_call(node: ast.AST | None) -> bool:
    """Whether evaluating `node` calls anything (lambda bodies do not run when defined)."""
    if node is None:
        return False
    stack = [node]
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.Call):
            return True
        if isinstance(sub, ast.Lambda):
            stack.extend(sub.args.defaults + [d for d in sub.args.kw_defaults if d is not None])
            continue
        stack.extend(ast.iter_child_nodes(sub))
    return False


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (len(sides) == 2 and isinstance(test.ops[0], ast.Eq)
            and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _scope_body(node: ast.AST) -> list[ast.AST]:
    """Nodes evaluated in `node`'s own scope (not in nested functions, classes or lambdas)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.body)
    if isinstance(node, ast.Lambda):
        return [node.body]
    return list(ast.iter_child_nodes(node))


class _Scope:
    """Names a function, lambda, comprehension or class binds itself."""

    def __init__(self, node: ast.AST, kind: str):
        self.kind = kind
        self.names: set[str] = set()
        self.globals: set[str] = set()
        self.imports: dict[str, str] = {}  # local imports: name → dotted (absolute or relative)
        self.params: set[str] = set()
        self.values: dict[str, list[ast.AST]] = {}  # local name → assigned expressions
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    self.params.add(arg.arg)
            self.names |= self.params
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for comp in node.generators:
                self.names.update(_target_names(comp.target))
            return
        stack = _scope_body(node)
        while stack:
            sub = stack.pop()
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.names.add(sub.name)
                stack.extend(sub.decorator_list)
                continue
            if isinstance(sub, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                continue
            if isinstance(sub, (ast.Global, ast.Nonlocal)):
                self.globals.update(sub.names)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                self.names.add(sub.id)
            elif isinstance(sub, ast.Import):
                for alias in sub.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.names.add(local)
                    self.imports[local] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(sub, ast.ImportFrom):
                base = "." * sub.level + (sub.module or "")
                for alias in sub.names:
                    if alias.name != "*":
                        local = alias.asname or alias.name
                        self.names.add(local)
                        joiner = "" if base.endswith(".") or not base else "."
                        self.imports[local] = f"{base}{joiner}{alias.name}"
            elif isinstance(sub, ast.ExceptHandler) and sub.name:
                self.names.add(sub.name)
            elif isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name:
                self.names.add(sub.name)
            elif isinstance(sub, ast.MatchMapping) and sub.rest:
                self.names.add(sub.rest)
            if isinstance(sub, ast.Assign):
                for target in sub.targets:
                    for name in _target_names(target):
                        self.values.setdefault(name, []).append(sub.value)
            stack.extend(ast.iter_child_nodes(sub))
        self.names -= self.globals


class _Program:
    """All submitted modules, their units, and what each unit reaches."""

    def __init__(self, sources: dict[str, str], other_files: tuple[str, ...] = ()):
        self.problems: list[SourceProblem] = []
        self.modules: dict[str, _Module] = {}
        self.units: dict[tuple[str, str], _Unit] = {}
        self.compiled: dict[str, str] = {}  # module name → a compiled file that shadows it
        self.unreadable: list[str] = []  # files too deeply nested for the parser
        for filename in other_files:
            for suffix in COMPILED_SUFFIXES:
                if filename.endswith(suffix):
                    stem = filename[: -len(suffix)]
                    named = _module_name(stem.split(".cpython")[0] + ".py")
                    if named:
                        self.compiled[named[0]] = filename
        for filename, text in sorted(sources.items()):
            named = _module_name(filename)
            if named is None:
                continue
            try:
                tree = ast.parse(text, filename=filename)
            except SyntaxError as exc:
                self.problems.append(SourceProblem(filename, f"{exc.msg} (line {exc.lineno})"))
                continue
            except (RecursionError, MemoryError, ValueError) as exc:  # valid or not, too deep to read
                self.problems.append(SourceProblem(filename, f"cannot be parsed: {type(exc).__name__}"))
                self.unreadable.append(filename)
                continue
            name, package = named
            if name not in self.modules:
                self.modules[name] = _Module(name, filename, package, tree)
        for module in self.modules.values():
            self._collect(module)
        for module in self.modules.values():
            try:
                self._walk_module(module)
            except RecursionError:  # valid Python, nested deeper than the check can follow
                self.units[(module.name, "<module>")].hits.append(_Hit(
                    EVASION, module.filename, 1, f"{module.filename} — nested too deeply for the grader "
                                                 f"to check; split long expressions"))

    # ------------------------------------------------------------ structure
    def _unit(self, module: _Module, name: str, line: int, kernel: bool = False) -> _Unit:
        unit = _Unit((module.name, name), module.filename, line, kernel)
        self.units[unit.key] = unit
        return unit

    def _bind(self, module: _Module, name: str, key: tuple[str, str]) -> None:
        module.bindings.setdefault(name, [])
        if key not in module.bindings[name]:
            module.bindings[name].append(key)

    def _absolute(self, module: _Module, dotted: str) -> str:
        """Resolve a relative import path (".x", "..y.z") against `module`'s package."""
        if not dotted.startswith("."):
            return dotted
        level = len(dotted) - len(dotted.lstrip("."))
        rest = dotted[level:]
        base = module.package.split(".") if module.package else []
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, rest] if rest else base)

    def _statements(self, body: list[ast.stmt]):
        """Module-level statements, inside if/try/with/for/while too; the main guard is skipped."""
        for node in body:
            if _is_main_guard(node):
                continue
            yield node
            if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While)):
                yield from self._statements(node.body + node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                yield from self._statements(node.body)
            elif isinstance(node, TRY_NODES):
                handlers = [s for h in node.handlers for s in h.body]
                yield from self._statements(node.body + handlers + node.orelse + node.finalbody)

    def _is_jit(self, module: _Module, decorator: ast.AST) -> bool:
        expr = decorator.func if isinstance(decorator, ast.Call) else decorator
        dotted = self._plain_dotted(module, expr)
        return dotted is not None and dotted.split(".")[0] == "triton" and dotted.endswith(".jit")

    def _plain_dotted(self, module: _Module, node: ast.AST) -> str | None:
        root, attrs = _chain(node)
        if not isinstance(root, ast.Name):
            return None
        head = module.aliases.get(root.id, root.id)
        return ".".join([head, *attrs])

    def _collect(self, module: _Module) -> None:
        """Module-level names, units and classes of one module (before any walking)."""
        statements = list(self._statements(module.tree.body))
        for node in statements:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        module.aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        module.aliases[root] = root
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(module, "." * node.level + (node.module or ""))
                for alias in node.names:
                    if alias.name == "*":
                        module.stars.append(base)
                    else:
                        module.aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        self._unit(module, "<module>", 1)
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                key = self._fresh(module, node.name, node.lineno)
                if isinstance(node, ast.ClassDef):
                    self._class(module, node, key)
                else:
                    self._function(module, node, key)
                self._bind(module, node.name, (module.name, key))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in _target_names(target):
                        key = f"{name}@{node.lineno}"
                        self._unit(module, key, node.lineno)
                        self._bind(module, name, (module.name, key))
                        # `sm = torch.softmax`: an alias of an imported name
                        root, attrs = _chain(node.value)
                        if (isinstance(target, ast.Name) and isinstance(root, ast.Name)
                                and root.id in module.aliases and name not in module.aliases):
                            module.aliases[name] = ".".join([module.aliases[root.id], *attrs])
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else [
                    i.optional_vars for i in node.items if i.optional_vars is not None]
                for target in targets:
                    for name in _target_names(target):
                        self._bind(module, name, (module.name, "<module>"))

    def _fresh(self, module: _Module, name: str, line: int) -> str:
        """A unit name for a definition: a second `def f` (in another branch) gets f#line."""
        taken = (module.name, name) in self.units or (module.name, f"{name}.<body>") in self.units
        return f"{name}#{line}" if taken else name

    def _function(self, module: _Module, node: ast.AST, name: str) -> None:
        kernel = any(self._is_jit(module, d) for d in node.decorator_list)
        self._unit(module, name, node.lineno, kernel)
        module.functions[name] = node

    def _class(self, module: _Module, node: ast.ClassDef, name: str) -> None:
        info = _Class(units=[(module.name, f"{name}.<body>")], node=node)
        self._unit(module, f"{name}.<body>", node.lineno)
        for sub in node.body:
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = self._fresh(module, f"{name}.{sub.name}", sub.lineno)
                self._function(module, sub, key)
                info.units.append((module.name, key))
            elif isinstance(sub, ast.ClassDef):
                key = self._fresh(module, f"{name}.{sub.name}", sub.lineno)
                self._class(module, sub, key)
                info.units.extend(module.classes[(module.name, key)].units)
        module.classes[(module.name, name)] = info

    # ------------------------------------------------------------ resolution
    def student_module(self, dotted: str) -> bool:
        return dotted in self.modules or dotted in self.compiled

    def resolve(self, dotted: str, depth: int = 0) -> list[tuple]:
        """What a dotted name means: ("ext", dotted), ("bind", module, name) or ("module", module)."""
        parts = dotted.split(".")
        out: list[tuple] = []
        student = False
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in self.modules:
                student = True
                if i == len(parts):
                    out.append(("module", prefix))
                elif depth < 8:
                    out.extend(self.lookup(self.modules[prefix], parts[i], parts[i + 1:], depth + 1))
                break
        if not student or _installed(parts[0]):  # a file named like a library: both, to be safe
            out.append(("ext", dotted))
        return out

    def lookup(self, module: _Module, name: str, rest: list[str], depth: int = 0) -> list[tuple]:
        """A module-level name of a student module, followed by attributes `rest`."""
        out: list[tuple] = []
        if name in module.bindings:
            out.append(("bind", module.name, name))
        if name in module.aliases and depth < 8:
            out.extend(self.resolve(".".join([module.aliases[name], *rest]), depth + 1))
        if not out and depth < 8:
            full = f"{module.name}.{name}"
            if full in self.modules:  # a submodule of a package
                out.extend(self.resolve(".".join([full, *rest]), depth + 1))
            for star in module.stars:
                if star in self.modules:
                    out.extend(self.lookup(self.modules[star], name, rest, depth + 1))
        return out

    def bindings_of(self, module_name: str, name: str) -> list[list[tuple[str, str]]]:
        """Each thing a module-level name may be bound to, as the unit keys it stands for
        (a class stands for all its units)."""
        module = self.modules.get(module_name)
        if module is None:
            return []
        out: list[list[tuple[str, str]]] = []
        for kind in self.lookup(module, name, []):
            if kind[0] == "bind":
                for key in self.modules[kind[1]].bindings.get(kind[2], []):
                    cls = self.modules[kind[1]].classes.get(key)
                    out.append(list(cls.units) if cls else [key])
            elif kind[0] == "module":
                out.append([(kind[1], "<module>")])
        return out

    def targets(self, module_name: str, name: str) -> list[tuple[str, str]]:
        """Unit keys that a module-level name stands for."""
        return [k for group in self.bindings_of(module_name, name) for k in group]

    # ------------------------------------------------------------ walking
    def _walk_module(self, module: _Module) -> None:
        top = self.units[(module.name, "<module>")]
        walker = _Walker(self, module, top, [])
        for node in self._statements(module.tree.body):
            walker.import_time(node)
        for name, node in module.functions.items():
            unit = self.units[(module.name, name)]
            _Walker(self, module, unit, []).function(node)
        for (_, name), info in module.classes.items():
            unit = self.units[(module.name, f"{name}.<body>")]
            _Walker(self, module, unit, []).class_body(info.node)
        for node in self._statements(module.tree.body):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in _target_names(target):
                        unit = self.units[(module.name, f"{name}@{node.lineno}")]
                        _Walker(self, module, unit, []).visit(node.value)

    def closure(self, start: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """Every unit reachable from `start`."""
        seen: set[tuple[str, str]] = set()
        frontier = [k for k in start if k in self.units]
        while frontier:
            key = frontier.pop()
            if key in seen:
                continue
            seen.add(key)
            unit = self.units[key]
            nxt: list[tuple[str, str]] = []
            for module_name, name in unit.refs:
                nxt.extend(self.targets(module_name, name))
            for module_name in unit.imports:
                nxt.append((module_name, "<module>"))
            for module_name in unit.whole:
                nxt.extend(k for k in self.units if k[0] == module_name)
            frontier.extend(k for k in nxt if k in self.units and k not in seen)
        return seen

    def launches_kernel(self, keys: set[tuple[str, str]]) -> bool:
        """Whether one of `keys` launches a @triton.jit kernel of the submission as kernel[grid]."""
        kernels = {k for k in keys if self.units[k].kernel}
        for key in keys:
            unit = self.units[key]
            if unit.open_launch and kernels:
                return True
            for names in unit.launches:
                if any(self._is_kernel(t, 0) for m, n in names for t in self.targets(m, n)):
                    return True
        return False

    def _is_kernel(self, key: tuple[str, str], depth: int) -> bool:
        unit = self.units.get(key)
        if unit is None or depth > 6:
            return False
        if unit.kernel:
            return True
        if "@" not in key[1]:  # only a module-level value can be an alias or a triton.jit(...)
            return False
        if unit.makes_kernel:
            return True
        return any(self._is_kernel(t, depth + 1) for m, n in unit.refs for t in self.targets(m, n))


class _Walker:
    """Walks one unit's code with Python's scoping, recording hits, references and launches."""

    def __init__(self, program: _Program, module: _Module, unit: _Unit, scopes: list[_Scope]):
        self.program = program
        self.module = module
        self.unit = unit
        self.scopes = scopes
        self.done: set[int] = set()  # ids of nodes already handled as part of a larger one

    # ------------------------------------------------------------ entry points
    def function(self, node: ast.AST) -> None:
        """A top-level function or method: its arguments' defaults and its body."""
        self._arguments(node)
        self.scopes.append(_Scope(node, "function"))
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    def class_body(self, node: ast.ClassDef) -> None:
        """A class's bases, keywords and non-method statements."""
        for expr in [*node.bases, *node.keywords]:
            self.visit(expr)
        self.scopes.append(_Scope(node, "class"))
        for stmt in node.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.visit(stmt)
        self.scopes.pop()

    def import_time(self, node: ast.stmt) -> None:
        """One module-level statement, as far as it runs when the module is imported."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._definition(node)
        elif isinstance(node, ast.ClassDef):
            self._class_at_import(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.visit(target)
            if _has_call(node.value):
                self.visit(node.value)
        elif isinstance(node, (ast.If, ast.While)):
            self.visit(node.test)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.visit(node.target)
            self.visit(node.iter)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.visit(item)
        elif isinstance(node, TRY_NODES):
            for handler in node.handlers:
                if handler.type is not None:
                    self.visit(handler.type)
        else:
            self.visit(node)

    def _definition(self, node: ast.AST) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        a = node.args
        for expr in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            if _has_call(expr):
                self.visit(expr)

    def _class_at_import(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        for expr in [*node.bases, *node.keywords]:
            if _has_call(expr):
                self.visit(expr)
        self.scopes.append(_Scope(node, "class"))
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._definition(stmt)
            elif isinstance(stmt, ast.ClassDef):
                self._class_at_import(stmt)
            elif _has_call(stmt):
                self.visit(stmt)
        self.scopes.pop()

    def _arguments(self, node: ast.AST) -> None:
        a = node.args
        for expr in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            self.visit(expr)

    # ------------------------------------------------------------ recording
    def hit(self, group: str, node: ast.AST, why: str = "") -> None:
        try:
            code = " ".join(ast.unparse(node).split())
        except RecursionError:
            code = f"<{type(node).__name__}>"
        if len(code) > CODE_WIDTH:
            code = code[: CODE_WIDTH - 1] + "…"
        if why:
            code = f"{code} — {why}"
        self.unit.hits.append(_Hit(group, self.unit.filename, getattr(node, "lineno", self.unit.line), code))

    def _write(self, module_name: str, name: str) -> None:
        """This unit stores into a module-level name: reaching that name reaches this unit."""
        module = self.program.modules.get(module_name)
        if module is not None:
            self.program._bind(module, name, self.unit.key)

    # ------------------------------------------------------------ names
    def _local(self, name: str) -> _Scope | None:
        """The innermost function/comprehension scope that binds `name`, if any."""
        for i, scope in enumerate(reversed(self.scopes)):
            if scope.kind == "class" and i != 0:
                continue
            if name in scope.globals:
                return None
            if name in scope.names:
                return scope
        return None

    def meanings(self, name: str) -> list[tuple]:
        """What a bare name means here: ("local",), resolved kinds, or ("builtin", name)."""
        scope = self._local(name)
        if scope is not None:
            if name in scope.imports:
                return self.program.resolve(self.program._absolute(self.module, scope.imports[name]))
            return [("local", scope)]
        out = self.program.lookup(self.module, name, [])
        if out:
            return out
        for star in self.module.stars:
            if star not in self.program.modules:
                out.append(("ext", f"{star}.{name}", "star"))
        return [*out, ("builtin", name)]

    def _check_dotted(self, dotted: str, node: ast.AST, star: bool = False) -> None:
        parts = dotted.split(".")
        for i in range(2, len(parts) + 1):
            prefix = ".".join(parts[:i])
            for group, names in DOTTED.items():
                if prefix in names:
                    self.hit(group, node)
        if star:  # `from torch import *`: only names that are known to be forbidden
            if parts[-1] in _BUILTINS or parts[-1] in _NAME_ARG:
                return
            for group, attrs in ATTRIBUTES.items():
                if parts[-1] in attrs:
                    self.hit(group, node)
            return
        if dotted in _NAME_ARG:  # operator.attrgetter not called with literal names
            self.hit(EVASION, node, _NAME_ARG[dotted])
        root = parts[0]
        if root in NUMPY_MODULES:
            self.hit("numpy", node)
        if root in COURSE_MODULES:
            self.hit(COURSE_CODE, node)
        for prefix, why in _PREFIX_RULES:
            if dotted == prefix or dotted.startswith(prefix + "."):
                self.hit(EVASION, node, why)
                break
        if root in _PRIVATE_ROOTS and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            self.hit(EVASION, node, _PRIVATE_ROOTS[root])
        if (root not in ALLOWED_LIBRARIES and root not in NUMPY_MODULES and root not in COURSE_MODULES
                and root not in sys.stdlib_module_names and root not in sys.builtin_module_names):
            self.hit(EVASION, node, f"{root} is a library the grader cannot read")

    def _check_attributes(self, attrs: list[str], node: ast.AST, api: list[str] | None = None) -> None:
        """Evasion attributes among `attrs`, and API groups named by `api` (default: all of them)."""
        for attr in attrs if api is None else api:
            for group, names in ATTRIBUTES.items():
                if attr in names:
                    self.hit(group, node)
        for i, attr in enumerate(attrs):
            if attr in _ATTRIBUTES:
                self.hit(EVASION, node, _ATTRIBUTES[attr])
            if (attr == "__class__" and i + 1 < len(attrs) and attrs[i + 1].startswith("__")
                    and attrs[i + 1] not in CLASS_CHAIN_HARMLESS):
                self.hit(EVASION, node, "a class chain")

    def _literal(self, text: str, node: ast.AST, importing: bool = False) -> None:
        """A string literal used as an attribute, key or module name."""
        parts = text.split(".")
        for group, names in ATTRIBUTES.items():
            if any(p in names for p in parts):
                self.hit(group, node)
        for group, names in DOTTED.items():
            if text in names:
                self.hit(group, node)
        if importing:
            root = parts[0]
            if root in COURSE_MODULES:
                self.hit(COURSE_CODE, node)
            if root in NUMPY_MODULES:
                self.hit("numpy", node)
            mods = [m for m in self.program.resolve(text) if m[0] == "module"]
            self.unit.imports.update(m[1] for m in mods)

    def _reference(self, kinds: list[tuple], node: ast.AST, attrs: list[str]) -> None:
        for kind in kinds:
            if kind[0] == "bind":
                self.unit.refs.add((kind[1], kind[2]))
            elif kind[0] == "module":  # a module used as an object: all of it
                self.unit.whole.add(kind[1])
            elif kind[0] == "ext":
                self._check_dotted(".".join([kind[1], *attrs]), node, star=len(kind) > 2)
            elif kind[0] == "builtin":
                name = kind[1]
                if name in _BUILTINS:
                    self.hit(EVASION, node, _BUILTINS[name])
                elif name in _NAME_ARG:
                    self.hit(EVASION, node, _NAME_ARG[name])


    def _resolve_chain(self, node: ast.AST) -> tuple[ast.AST, list[str], list[tuple]]:
        """(root, attributes, meanings) of `a.b.c`, following student modules' names."""
        root, attrs = _chain(node)
        if not isinstance(root, ast.Name):
            return root, attrs, []
        out: list[tuple] = []
        for kind in self.meanings(root.id):
            if kind[0] == "module" and attrs:  # helpers.f.g → the name f of helpers
                out.extend(self.program.resolve(".".join([kind[1], *attrs])) or [kind])
            elif kind[0] == "ext" and attrs:  # a star import's name followed by attributes is real
                out.append(("ext", ".".join([kind[1], *attrs])))
            else:
                out.append(kind)
        return root, attrs, out

    # ------------------------------------------------------------ visiting
    def visit(self, node: ast.AST) -> None:
        if id(node) in self.done:
            return
        method = getattr(self, f"_visit_{type(node).__name__}", None)
        if method is not None:
            method(node)
        else:
            self.generic(node)

    def generic(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def _visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__") and node.id in _ATTRIBUTES:
            self.hit(EVASION, node, _ATTRIBUTES[node.id])
        if isinstance(node.ctx, ast.Load):
            self._reference(self.meanings(node.id), node, [])
        elif isinstance(node.ctx, ast.Store) and self.scopes and node.id in self.scopes[-1].globals:
            self._write(self.module.name, node.id)

    def _visit_Attribute(self, node: ast.Attribute) -> None:
        root, attrs, kinds = self._resolve_chain(node)
        if not isinstance(root, ast.Name):
            self._check_attributes(attrs, node)
            self.visit(root)
            return
        if root.id == "__class__" or (root.id.startswith("__") and root.id in _ATTRIBUTES):
            self.hit(EVASION, node, _ATTRIBUTES.get(root.id, "a class chain"))
        if not isinstance(node.ctx, ast.Load) and self._local(root.id) is None:
            self._store_attribute(root.id, attrs)
        own = False
        for kind in kinds:
            if kind[0] == "bind":
                own = True
                self.unit.refs.add((kind[1], kind[2]))
            elif kind[0] == "module":
                own = True
                self.unit.whole.add(kind[1])
            elif kind[0] == "ext":
                self._check_dotted(kind[1], node, star=len(kind) > 2)
            elif kind[0] == "builtin":
                self._reference([kind], root, [])
        # Attributes of the student's own names are the student's own (helpers.softmax). Under an
        # imported module the dotted name was checked whole, so only its last part can be a
        # function's name: torch.backends.cuda.matmul.allow_tf32 is not a matrix product.
        if own:
            api: list[str] = []
        elif kinds and all(k[0] == "ext" for k in kinds):
            api = attrs[-1:]
        else:
            api = attrs
        self._check_attributes(attrs, node, api)

    def _store_attribute(self, name: str, attrs: list[str]) -> None:
        """`STATE.fn = g` or `helpers.f = g`: this unit becomes part of that name."""
        for kind in self.meanings(name):
            if kind[0] == "bind":
                self._write(kind[1], kind[2])
            elif kind[0] == "module":
                for where in self.program.resolve(".".join([kind[1], *attrs[:-1]])) if attrs[:-1] else [kind]:
                    if where[0] == "module" and where[1] in self.program.modules:
                        self.program._bind(self.program.modules[where[1]], attrs[-1], self.unit.key)
                    elif where[0] == "bind":
                        self._write(where[1], where[2])

    def _visit_Subscript(self, node: ast.Subscript) -> None:
        key = _fold(node.slice)
        if key is not None:
            target = self._dotted_of(node.value)
            self._literal(key, node, importing=target == "sys.modules")
        if not isinstance(node.ctx, ast.Load):
            self._store_into(node.value)
        self.visit(node.value)
        self.visit(node.slice)

    def _store_into(self, target: ast.AST) -> None:
        root, _ = _chain(target)
        while isinstance(root, ast.Subscript):
            root, _ = _chain(root.value)
        if isinstance(root, ast.Name) and self._local(root.id) is None:
            for kind in self.program.lookup(self.module, root.id, []):
                if kind[0] == "bind":
                    self._write(kind[1], kind[2])

    def _dotted_of(self, node: ast.AST) -> str | None:
        root, attrs = _chain(node)
        if not isinstance(root, ast.Name):
            return None
        for kind in self.meanings(root.id):
            if kind[0] == "ext":
                return ".".join([kind[1], *attrs])
            if kind[0] == "builtin":
                return ".".join([kind[1], *attrs])
        return None

    def _visit_Call(self, node: ast.Call) -> None:
        func = node.func
        dotted = self._dotted_of(func)
        if isinstance(func, ast.Name) and func.id in GETATTR_FAMILY and dotted == func.id:
            self.done.add(id(func))
            name = _fold(node.args[1]) if len(node.args) > 1 else None
            if name is None:
                self.hit(EVASION, node, _NAME_ARG[func.id])
            else:
                self._literal(name, node)
                if func.id == "setattr" and node.args:
                    self._setattr(node.args[0], name)
        elif dotted in ("operator.attrgetter", "operator.methodcaller"):
            self.done.add(id(func))
            args = node.args if dotted == "operator.attrgetter" else node.args[:1]
            names = [_fold(a) for a in args]
            if not names or any(n is None for n in names):
                self.hit(EVASION, node, _NAME_ARG[dotted])
            for name in names:
                if name is not None:
                    self._literal(name, node)
        elif dotted in IMPORT_CALLS:
            for arg in node.args[:1]:
                text = _fold(arg)
                if text is not None:
                    self._literal(text, node, importing=True)
        if isinstance(func, ast.Attribute) and func.attr in LOOKUP_METHODS and node.args:
            key = _fold(node.args[0])
            if key is not None:
                self._literal(key, node)
        if isinstance(func, ast.Attribute):  # CACHE.append(g): g flows into CACHE
            root, _ = _chain(func.value)
            if isinstance(root, ast.Name) and self._local(root.id) is None and node.args + node.keywords:
                for kind in self.program.lookup(self.module, root.id, []):
                    if kind[0] == "bind" and self.program.modules[kind[1]].classes.get(
                            (kind[1], kind[2])) is None:
                        self._write(kind[1], kind[2])
        if isinstance(func, ast.Subscript):
            self._launch(func.value)
        if dotted is not None and dotted.split(".")[0] == "triton" and dotted.endswith(".jit"):
            self.unit.makes_kernel = True
        self.generic(node)

    def _setattr(self, target: ast.AST, name: str) -> None:
        root, attrs = _chain(target)
        if isinstance(root, ast.Name) and self._local(root.id) is None:
            self._store_attribute(root.id, [*attrs, name])

    def _launch(self, target: ast.AST) -> None:
        """`target[grid](...)`: remember which names the launched object may be."""
        names: set[tuple[str, str]] = set()
        if isinstance(target, ast.Name):
            scope = self._local(target.id)
            if scope is not None and target.id not in scope.imports:
                if target.id in scope.params and target.id not in scope.values:
                    self.unit.open_launch = True
                for value in scope.values.get(target.id, []):
                    for sub in ast.walk(value):
                        if isinstance(sub, (ast.Name, ast.Attribute)):
                            names |= self._names_of(sub)
            else:
                names |= self._names_of(target)
        elif isinstance(target, ast.Attribute):
            names |= self._names_of(target)
        if names:
            self.unit.launches.append(names)

    def _names_of(self, node: ast.AST) -> set[tuple[str, str]]:
        _, _, kinds = self._resolve_chain(node)
        return {(k[1], k[2]) for k in kinds if k[0] == "bind"}

    def _visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(alias.name, node)

    def _visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self.program._absolute(self.module, "." * node.level + (node.module or ""))
        if base:
            self._import(base, node, relative=node.level > 0)
        for alias in node.names:
            if alias.name == "*":
                continue
            full = f"{base}.{alias.name}" if base else alias.name
            if self.program.student_module(full):
                self._import(full, node, relative=node.level > 0)
            elif not self.program.student_module(base):
                self._check_imported(full, node)

    def _import(self, dotted: str, node: ast.AST, relative: bool = False) -> None:
        parts = dotted.split(".")
        student = False
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in self.program.compiled:
                self.hit(EVASION, node, f"{prefix} is also handed in as compiled code "
                                        f"({self.program.compiled[prefix]}), which the grader cannot read")
            if prefix in self.program.modules:
                student = True
                self.unit.imports.add(prefix)
        if relative and not student:
            self.hit(EVASION, node, f"{dotted or '.'} is not one of your files")
            return
        if not student or _installed(parts[0]):
            self._check_imported(dotted, node)

    def _check_imported(self, dotted: str, node: ast.AST) -> None:
        """An import of something that is not the student's: what running the import itself does.

        Evasion modules (inspect, torch._C, ...) count where their names are used, not here:
        importing them does nothing, and an unused import must not cost a task."""
        root = dotted.split(".")[0]
        if root in COURSE_MODULES:
            self.hit(COURSE_CODE, node)
            return
        if not self.program.student_module(root) and not _installed(root):
            self.hit(EVASION, node, f"{root} is neither one of your files nor an installed library")

    def _nested(self, node: ast.AST, kind: str) -> None:
        self.scopes.append(_Scope(node, kind))
        if isinstance(node, ast.Lambda):
            self.visit(node.body)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            for comp in node.generators:
                self.visit(comp)
            self.visit(node.elt)
        elif isinstance(node, ast.DictComp):
            for comp in node.generators:
                self.visit(comp)
            self.visit(node.key)
            self.visit(node.value)
        else:
            for stmt in node.body:
                self.visit(stmt)
        self.scopes.pop()

    def _visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # nested in a unit
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._arguments(node)
        self._nested(node, "function")

    _visit_AsyncFunctionDef = _visit_FunctionDef

    def _visit_Lambda(self, node: ast.Lambda) -> None:
        self._arguments(node)
        self._nested(node, "function")

    def _visit_ClassDef(self, node: ast.ClassDef) -> None:  # nested in a unit
        for expr in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(expr)
        self._nested(node, "class")

    def _visit_ListComp(self, node: ast.AST) -> None:
        self._nested(node, "comprehension")

    _visit_SetComp = _visit_GeneratorExp = _visit_DictComp = _visit_ListComp

    def _visit_Global(self, node: ast.Global) -> None:
        return

    def _visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.hit("matmul", node)
        self.generic(node)

    def _visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult):
            self.hit("matmul", node)
        if isinstance(node.target, (ast.Attribute, ast.Subscript)):
            self._store_into(node.target)
        self.generic(node)

    def _visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                self._store_into(target)
        self.generic(node)


def _launched_kernel_findings(program: _Program, reached: set[tuple[str, str]], task_id: str, function: str,
                              seen: set[tuple[str, str, int]]) -> list[StaticFinding]:
    """kernel_code findings in the @triton.jit kernels a task's code reaches (it launches them)."""
    findings = []
    for module_name, unit_name in sorted(reached):
        unit = program.units[(module_name, unit_name)]
        if not unit.kernel:
            continue
        module = program.modules[module_name]
        scope = scan_module(module.tree)
        if unit_name not in scope.jit:
            continue
        for problem in vet_kernel(scope, unit_name)[0]:
            if (KERNEL_CODE, module.filename, problem.line) not in seen:
                seen.add((KERNEL_CODE, module.filename, problem.line))
                findings.append(StaticFinding(task_id, function, KERNEL_CODE, problem.line,
                                              f"{module.filename}: {problem.text}"))
    return findings


def _contract_findings(manifest: Manifest, sources: dict[str, str]) -> list[StaticFinding]:
    """kernel_code findings in the kernels a task is graded on through the kernel contract: the
    grader launches them itself, in a worker that holds nothing else of the submission."""
    contract = manifest.contract
    if contract is None or contract.file not in sources:
        return []
    findings = []
    for task in manifest.tasks:
        kernels = manifest.kernels_for(task)
        if not kernels:
            continue
        for problem in kernel_module(contract.file, sources[contract.file], kernels).problems:
            findings.append(StaticFinding(task.id, problem.kernel, KERNEL_CODE, problem.line,
                                          f"{contract.file}: {problem.text}"))
    return findings


def _task_groups(task: Task) -> set[str]:
    """The groups that make `task` earn 0 when its code reaches them."""
    groups = set(task.forbidden)
    if task.forbidden or task.requires:
        groups.add(EVASION)
    return groups


def check_sources(manifest: Manifest, sources: dict[str, str],
                  other_files: tuple[str, ...] = ()) -> tuple[list[StaticFinding], list[SourceProblem]]:
    """Findings per task over every submitted .py file, and files that do not parse.

    `sources` maps each submitted .py path to its text; `other_files` names the rest of
    the submission (a compiled module shadows a source file of the same name)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        return with_deep_stack(_check, manifest, sources, other_files)
    finally:
        sys.setrecursionlimit(limit)


def _check(manifest: Manifest, sources: dict[str, str],
           other_files: tuple[str, ...]) -> tuple[list[StaticFinding], list[SourceProblem]]:
    program = _Program(sources, other_files)
    manifest_modules = []
    for filename in manifest.files:
        named = _module_name(filename)
        if named and named[0] in program.modules and named[0] not in manifest_modules:
            manifest_modules.append(named[0])
    owners = {f: t for t in manifest.tasks for f in t.functions}

    def entry_bindings(function: str) -> list[list[tuple[str, str]]]:
        """What the sandbox may find under `function`: one list of units per binding."""
        found: list[list[tuple[str, str]]] = []
        for module_name in manifest_modules:
            for group in program.bindings_of(module_name, function):
                if group not in found:
                    found.append(group)
        return found

    at_import = program.closure([(m, "<module>") for m in manifest_modules])
    findings: list[StaticFinding] = []
    everything: set[tuple[str, str]] = set(at_import)
    for task in manifest.tasks:
        seen: set[tuple[str, str, int]] = set()
        entries = [(f, _task_groups(task)) for f in task.functions]
        for used in task.uses:
            owner = owners.get(used)
            entries.append((used, _task_groups(task) | (_task_groups(owner) if owner else set())))
        for function, groups in entries:
            bindings = entry_bindings(function)
            if not bindings:
                continue
            entry_file = program.units[bindings[0][0]].filename
            reached = program.closure([k for group in bindings for k in group]) | at_import
            everything |= reached
            for key in sorted(reached):
                unit = program.units[key]
                for h in unit.hits:
                    if h.group not in groups or (h.group == "matmul" and unit.kernel):
                        continue
                    if (h.group, h.filename, h.line) in seen:
                        continue
                    seen.add((h.group, h.filename, h.line))
                    code = h.code if h.filename == entry_file else f"{h.filename}: {h.code}"
                    findings.append(StaticFinding(task.id, function, h.group, h.line, code))
            if "triton_launch" in task.requires:
                findings += _launched_kernel_findings(program, reached, task.id, function, seen)
                if not program.launches_kernel(program.closure([k for group in bindings for k in group])):
                    unit = program.units[bindings[0][0]]
                    findings.append(StaticFinding(
                        task.id, function, NO_TRITON_LAUNCH, unit.line,
                        f"{unit.filename}: {function} reaches no kernel[grid](...) launch of a "
                        f"@triton.jit kernel"))
    findings += _contract_findings(manifest, sources)
    for task in manifest.tasks:
        if EVASION in _task_groups(task):
            for filename in program.unreadable:
                findings.append(StaticFinding(task.id, "", EVASION, 1, f"{filename}: nested too deeply "
                                                                        f"for the grader to check"))
    course = sorted({h for key in everything for h in program.units[key].hits if h.group == COURSE_CODE},
                    key=lambda h: (h.filename, h.line, h.code))
    for task in manifest.tasks:
        for h in course:
            findings.append(StaticFinding(task.id, "", COURSE_CODE, h.line, f"{h.filename}: {h.code}"))
    return findings, program.problems
