"""The submitted program as the static checks read it: modules, units and what reaches what.

Every submitted .py file is parsed into a `ModuleInfo`; its code is cut into *units*
(a function or method, a class body, the value of a module-level assignment, a
module's import-time code), and each module-level name is bound to the units it may
stand for, across the student's own imports (`import helpers`, `from helpers import f`,
`from . import x`, `from x import *`). `Program.closure` follows those bindings from a
task's entry functions; `Program.launches_kernel` tells whether reached code launches
a @triton.jit kernel of the submission. What a unit *does* (its hits, references and
launches) is recorded by the walk in `grader.intake.static_rules`.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import PurePosixPath

TRY_NODES = tuple(getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name))  # TryStar: 3.11+

COMPILED_SUFFIXES: tuple[str, ...] = tuple(dict.fromkeys(
    [*importlib.machinery.EXTENSION_SUFFIXES, *importlib.machinery.BYTECODE_SUFFIXES, ".so", ".pyd"]))


@dataclass(frozen=True)
class SourceProblem:
    """A submitted file that could not be parsed."""

    filename: str
    message: str


@dataclass(frozen=True)
class Hit:
    group: str
    filename: str
    line: int
    code: str


@dataclass
class Unit:
    key: tuple[str, str]  # (module, name of the unit)
    filename: str
    line: int
    kernel: bool = False
    hits: list[Hit] = field(default_factory=list)
    refs: set[tuple[str, str]] = field(default_factory=set)  # module-level names it reads
    imports: set[str] = field(default_factory=set)  # student modules whose import-time code it runs
    whole: set[str] = field(default_factory=set)  # student modules it uses as objects
    launches: list[set[tuple[str, str]]] = field(default_factory=list)  # names launched as kernel[grid]
    open_launch: bool = False  # launches a kernel passed in as a parameter
    makes_kernel: bool = False  # a value built with triton.jit(...)


@dataclass
class ClassInfo:
    units: list[tuple[str, str]]  # methods, class body, nested classes' units
    node: ast.ClassDef


@dataclass
class ModuleInfo:
    name: str
    filename: str
    package: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)  # module-level imports: name → dotted
    bindings: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # name → unit keys
    classes: dict[tuple[str, str], ClassInfo] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # `from X import *` sources (dotted)
    functions: dict[str, ast.AST] = field(default_factory=dict)  # unit name → def node


def module_name_of(filename: str) -> tuple[str, str] | None:
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


def installed(root: str) -> bool:
    """Whether a top-level module exists in this Python (stdlib or installed), without importing it."""
    if root in sys.stdlib_module_names or root in sys.builtin_module_names:
        return True
    if root not in _INSTALLED:
        try:
            _INSTALLED[root] = root.isidentifier() and importlib.util.find_spec(root) is not None
        except (ImportError, ValueError):
            _INSTALLED[root] = False
    return _INSTALLED[root]


def fold(node: ast.AST | None) -> str | None:
    """The value of a string built only from literals ("soft" + "max", f"{'soft'}max"), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left), fold(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = fold(value.value)
                if inner is None or value.format_spec is not None:
                    return None
                parts.append(inner)
            else:
                parts.append(fold(value) or "")
        return "".join(parts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
        sep = fold(node.func.value)
        items = [fold(e) for e in node.args[0].elts]
        if sep is not None and all(i is not None for i in items):
            return sep.join(items)
    return None


def chain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    """`a.b.c` → (Name a, ["b", "c"]); the root may be any expression."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node, list(reversed(attrs))


def has_call(node: ast.AST | None) -> bool:
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


def is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    sides = [test.left, *test.comparators]
    return (len(sides) == 2 and isinstance(test.ops[0], ast.Eq)
            and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in target_names(e)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []


def scope_body(node: ast.AST) -> list[ast.AST]:
    """Nodes evaluated in `node`'s own scope (not in nested functions, classes or lambdas)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.body)
    if isinstance(node, ast.Lambda):
        return [node.body]
    return list(ast.iter_child_nodes(node))


class Scope:
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
                self.names.update(target_names(comp.target))
            return
        stack = scope_body(node)
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
                    for name in target_names(target):
                        self.values.setdefault(name, []).append(sub.value)
            stack.extend(ast.iter_child_nodes(sub))
        self.names -= self.globals


class Program:
    """All submitted modules, their units, and what each unit reaches."""

    def __init__(self, sources: dict[str, str], other_files: tuple[str, ...] = ()):
        self.problems: list[SourceProblem] = []
        self.modules: dict[str, ModuleInfo] = {}
        self.units: dict[tuple[str, str], Unit] = {}
        self.compiled: dict[str, str] = {}  # module name → a compiled file that shadows it
        self.unreadable: list[str] = []  # files too deeply nested for the parser
        for filename in other_files:
            for suffix in COMPILED_SUFFIXES:
                if filename.endswith(suffix):
                    stem = filename[: -len(suffix)]
                    named = module_name_of(stem.split(".cpython")[0] + ".py")
                    if named:
                        self.compiled[named[0]] = filename
        for filename, text in sorted(sources.items()):
            named = module_name_of(filename)
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
                self.modules[name] = ModuleInfo(name, filename, package, tree)
        for module in self.modules.values():
            self._collect(module)

    # ------------------------------------------------------------ structure
    def _unit(self, module: ModuleInfo, name: str, line: int, kernel: bool = False) -> Unit:
        unit = Unit((module.name, name), module.filename, line, kernel)
        self.units[unit.key] = unit
        return unit

    def bind(self, module: ModuleInfo, name: str, key: tuple[str, str]) -> None:
        module.bindings.setdefault(name, [])
        if key not in module.bindings[name]:
            module.bindings[name].append(key)

    def absolute(self, module: ModuleInfo, dotted: str) -> str:
        """Resolve a relative import path (".x", "..y.z") against `module`'s package."""
        if not dotted.startswith("."):
            return dotted
        level = len(dotted) - len(dotted.lstrip("."))
        rest = dotted[level:]
        base = module.package.split(".") if module.package else []
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, rest] if rest else base)

    def statements(self, body: list[ast.stmt]):
        """Module-level statements, inside if/try/with/for/while too; the main guard is skipped."""
        for node in body:
            if is_main_guard(node):
                continue
            yield node
            if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While)):
                yield from self.statements(node.body + node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                yield from self.statements(node.body)
            elif isinstance(node, TRY_NODES):
                handlers = [s for h in node.handlers for s in h.body]
                yield from self.statements(node.body + handlers + node.orelse + node.finalbody)

    def is_jit(self, module: ModuleInfo, decorator: ast.AST) -> bool:
        expr = decorator.func if isinstance(decorator, ast.Call) else decorator
        dotted = self._plain_dotted(module, expr)
        return dotted is not None and dotted.split(".")[0] == "triton" and dotted.endswith(".jit")

    def _plain_dotted(self, module: ModuleInfo, node: ast.AST) -> str | None:
        root, attrs = chain(node)
        if not isinstance(root, ast.Name):
            return None
        head = module.aliases.get(root.id, root.id)
        return ".".join([head, *attrs])

    def _collect(self, module: ModuleInfo) -> None:
        """Module-level names, units and classes of one module (before any walking)."""
        statements = list(self.statements(module.tree.body))
        for node in statements:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        module.aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        module.aliases[root] = root
            elif isinstance(node, ast.ImportFrom):
                base = self.absolute(module, "." * node.level + (node.module or ""))
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
                self.bind(module, node.name, (module.name, key))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in target_names(target):
                        key = f"{name}@{node.lineno}"
                        self._unit(module, key, node.lineno)
                        self.bind(module, name, (module.name, key))
                        # `sm = torch.softmax`: an alias of an imported name
                        root, attrs = chain(node.value)
                        if (isinstance(target, ast.Name) and isinstance(root, ast.Name)
                                and root.id in module.aliases and name not in module.aliases):
                            module.aliases[name] = ".".join([module.aliases[root.id], *attrs])
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else [
                    i.optional_vars for i in node.items if i.optional_vars is not None]
                for target in targets:
                    for name in target_names(target):
                        self.bind(module, name, (module.name, "<module>"))

    def _fresh(self, module: ModuleInfo, name: str, line: int) -> str:
        """A unit name for a definition: a second `def f` (in another branch) gets f#line."""
        taken = (module.name, name) in self.units or (module.name, f"{name}.<body>") in self.units
        return f"{name}#{line}" if taken else name

    def _function(self, module: ModuleInfo, node: ast.AST, name: str) -> None:
        kernel = any(self.is_jit(module, d) for d in node.decorator_list)
        self._unit(module, name, node.lineno, kernel)
        module.functions[name] = node

    def _class(self, module: ModuleInfo, node: ast.ClassDef, name: str) -> None:
        info = ClassInfo(units=[(module.name, f"{name}.<body>")], node=node)
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
        if not student or installed(parts[0]):  # a file named like a library: both, to be safe
            out.append(("ext", dotted))
        return out

    def lookup(self, module: ModuleInfo, name: str, rest: list[str], depth: int = 0) -> list[tuple]:
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
