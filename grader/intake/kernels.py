"""The student's Triton kernels, vetted and taken out of their file for a launch by construction.

A kernel task is graded by construction: the grader launches the student's
`@triton.jit` kernel itself, with the course's launcher (the assignment's
contract module, e.g. assignments/assignment3/contract.py), into buffers it
allocated, in a sandbox worker that holds no other code of the student. This
module makes that worker's copy of the student's file (`kernel_module`): the
kernels the contract names, the `@triton.jit` helpers they call, the file's
constants and its triton/math imports, each at its own line (so a traceback
cites the student's line numbers), and nothing else.

In Triton's interpreter a kernel body runs as Python, so a kernel could call
anything, and a name proves nothing (Python can compute one, and triton.language
re-exports modules: tl.math.core is triton.language.core, which holds `builtins`).
So `vet_kernel` resolves every name, attribute and call inside a `@triton.jit`
function, against the table of the installed Triton (grader.intake.triton_table),
to one of: a triton.language function, type or dtype reached through its own
namespaces (tl, tl.math, tl.extra...libdevice); another `@triton.jit` function of
the file (vetted in turn); the kernel's arguments and locals and the attributes a
Triton value has; plain-number module constants; the few Python builtins Triton
compiles itself (range, min, max, int, float, len, isinstance, list). A module, any
other builtin (exec, getattr, print...), a private or dunder attribute, a name that
an import binds and other code binds again: a KernelProblem with its kind as data,
and the kernel earns nothing. So a CPU grade means what a GPU grade means.

A constant is a module-level `NAME = value` whose value is a plain number (or
string) made of literals, earlier constants, their arithmetic, `tl.constexpr(...)`
and Python's `math` (math.pi, math.log2(...)): nothing that runs student code.

The trusted side parses, and reads the installed Triton's objects; nothing here is imported
into a worker and nothing of the student's runs.
"""

from __future__ import annotations

import ast
import builtins
import math
import types
from dataclasses import dataclass, field

from grader.intake.triton_table import ABSENT, DTYPE, NAMESPACE, NUMBER, TYPE, triton_table

# Python builtins a kernel may call: Triton's code generator compiles these itself (range loops,
# min/max as tl.minimum/tl.maximum, int/float/len/isinstance/list on compile-time values). Not
# print (tl.device_print / tl.static_print are Triton's), nor getattr/hasattr, whose names are computed.
KERNEL_BUILTINS = frozenset({"range", "min", "max", "float", "int", "len", "isinstance", "list"})
STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.If, ast.For, ast.While, ast.Return,
              ast.Pass, ast.Break, ast.Continue, ast.Assert)
EXPRESSIONS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.BinOp,
               ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.expr_context,
               ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
LOOP_RANGES = frozenset({"range", "triton.language.range", "triton.language.static_range"})
IMPORTABLE = ("triton", "math", "__future__")  # imports copied into the kernel module
CONSTANT_LITERALS = (int, float, bool, str, type(None))
KERNEL_SECTION = "§24"
DECORATOR_ADVICE = ("the grader launches your kernel itself with the contract's arguments, so keep it a plain "
                    "@triton.jit function: choose tile sizes with the constants BLOCK_M and BLOCK_N (autotuning "
                    "needs a GPU to time its configurations; see the handout)")

# What a kernel problem is, as data (KernelProblem.kind)
UNRESOLVED = "unresolved"  # a name or attribute that resolves to something other than Triton's
PRIVATE = "private"  # a dunder or private attribute
NOT_TRITON = "not_triton"  # a statement or expression Triton does not compile
REBOUND = "rebound"  # a name bound by an import and again by something else
DECORATOR = "decorator"  # a decorator other than @triton.jit on a kernel the grader launches
LAYOUT = "layout"  # a kept statement shares its lines with another
COMPILE = "compile"  # Triton's compiler refused the kernel for a GPU target


@dataclass(frozen=True)
class KernelProblem:
    """Something in a kernel (or what it needs) that the grader will not run: one line each."""

    kernel: str  # the @triton.jit function it is in ("" for the file)
    line: int
    text: str  # what is wrong and what to write instead
    kind: str = NOT_TRITON  # UNRESOLVED, PRIVATE, NOT_TRITON, REBOUND, DECORATOR, LAYOUT or COMPILE


@dataclass
class KernelScope:
    """The module-level names of one file as a kernel sees them."""

    aliases: dict[str, str] = field(default_factory=dict)  # local name → dotted module path or object
    jit: dict[str, ast.FunctionDef] = field(default_factory=dict)  # @triton.jit functions
    functions: set[str] = field(default_factory=set)  # every other top-level def and class
    values: set[str] = field(default_factory=set)  # module-level names bound to something not constant
    constants: dict[str, ast.stmt] = field(default_factory=dict)  # NAME = constant value
    imports: list[ast.stmt] = field(default_factory=list)  # triton / math / __future__ imports
    decorated: dict[str, list[str]] = field(default_factory=dict)  # jit function → other decorators
    rebound: dict[str, int] = field(default_factory=dict)  # imported name → line of another binding of it

    def dotted(self, node: ast.AST) -> str | None:
        """`tl.math.exp` → "triton.language.math.exp" (None unless rooted in an imported name)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])


@dataclass(frozen=True)
class KernelModule:
    """The student's file as the kernel worker sees it: only vetted kernels, helpers and constants."""

    filename: str
    source: str  # as many lines as the student's file; only the kept lines are filled in
    found: tuple[str, ...]  # the requested kernels that are there
    missing: tuple[str, ...]  # requested kernels the file does not define as @triton.jit functions
    problems: tuple[KernelProblem, ...]


def _is_jit_decorator(scope: KernelScope, decorator: ast.AST) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return scope.dotted(target) in ("triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit")


def _math_member(dotted: str | None, call: bool) -> bool:
    """`math.pi`, `math.log2` (call): a number or a number function of Python's math module."""
    if dotted is None or not dotted.startswith("math.") or dotted.count(".") != 1:
        return False
    name = dotted.split(".")[1]
    member = None if name.startswith("_") else getattr(math, name, None)
    return isinstance(member, types.BuiltinFunctionType) if call else isinstance(member, float)


def _constant_value(scope: KernelScope, node: ast.AST, known: set[str]) -> bool:
    """A plain-number value the grader may copy: literals, earlier constants, their arithmetic,
    tl.constexpr(...) of them and Python's math (math.pi, math.log2(...))."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, CONSTANT_LITERALS)
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.UnaryOp):
        return _constant_value(scope, node.operand, known)
    if isinstance(node, ast.BinOp):
        return _constant_value(scope, node.left, known) and _constant_value(scope, node.right, known)
    if isinstance(node, ast.Tuple):
        return all(_constant_value(scope, e, known) for e in node.elts)
    if isinstance(node, ast.Attribute):
        return _math_member(scope.dotted(node), call=False)
    if isinstance(node, ast.Call):
        dotted = scope.dotted(node.func)
        callable_ = dotted == "triton.language.constexpr" or _math_member(dotted, call=True)
        return callable_ and not node.keywords and all(_constant_value(scope, a, known) for a in node.args)
    return False


def _module_level(tree: ast.Module):
    """Every statement that runs at import: the module's own, and those nested in its if/for/with/try
    blocks (not the bodies of functions or classes)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop(0)
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
            for handler in getattr(node, "handlers", ()):
                stack += handler.body


def _bound_names(node: ast.stmt) -> list[str]:
    """The module-level names a statement (re)binds, other than by an import."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    elif isinstance(node, ast.Try):
        return [h.name for h in node.handlers if h.name]
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        names += [n.target.id for n in ast.walk(node.value)
                  if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)]
    return names


def _rebindings(tree: ast.Module, imported: set[str], jit: set[str]) -> dict[str, int]:
    """Imported names that module-level code, or a function through `global`, binds again, and
    @triton.jit functions bound more than once: name → the line of another binding."""
    found: dict[str, int] = {}
    defined: set[str] = set()
    for node in _module_level(tree):
        for name in _bound_names(node):
            if name in imported or (name in jit and name in defined):
                found.setdefault(name, node.lineno)
            defined.add(name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                if name in imported or name in jit:
                    found.setdefault(name, node.lineno)
    return found


def scan_module(tree: ast.Module) -> KernelScope:
    """The imports, @triton.jit functions and constants at the top level of a file."""
    scope = KernelScope()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                scope.aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
                imported.add(alias.asname or alias.name.split(".")[0])
            if all(a.name.split(".")[0] in IMPORTABLE for a in node.names):
                scope.imports.append(node)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                scope.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                imported.add(alias.asname or alias.name)
            if node.module.split(".")[0] in IMPORTABLE and not any(a.name == "*" for a in node.names):
                scope.imports.append(node)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if any(_is_jit_decorator(scope, d) for d in node.decorator_list):
                scope.jit[node.name] = node
                others = [ast.unparse(d) for d in node.decorator_list if not _is_jit_decorator(scope, d)]
                if others:
                    scope.decorated[node.name] = others
            else:
                scope.functions.add(node.name)
        elif isinstance(node, (ast.AsyncFunctionDef, ast.ClassDef)):
            scope.functions.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id not in imported and \
                    _constant_value(scope, node.value, set(scope.constants)):
                scope.constants[targets[0].id] = node
            else:  # a name bound to something else is no constant, even if an earlier line made it one
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            scope.constants.pop(name.id, None)
                            scope.values.add(name.id)
    scope.rebound = _rebindings(tree, imported, set(scope.jit))
    return scope


@dataclass(frozen=True)
class _Resolved:
    """What a name or attribute in a kernel is: a kind of the Triton table (namespace, function,
    type, dtype, number), or jit (a function of the file), local, constant, builtin, value."""

    kind: str
    path: str = ""  # the dotted path in the table, for namespaces, types and functions


VALUE_KINDS = frozenset({"local", "constant", "value", DTYPE, NUMBER})


class _Vetter:
    """Checks one @triton.jit function's body by resolving every name in it; collects problems and
    what it needs."""

    def __init__(self, scope: KernelScope, node: ast.FunctionDef, contract: bool):
        self.scope = scope
        self.node = node
        self.contract = contract  # the grader launches it itself: plain @triton.jit only
        self.table = triton_table()
        self.problems: list[KernelProblem] = []
        self.calls: set[str] = set()  # jit functions it calls
        self.constants: set[str] = set()  # constants it reads
        arguments = node.args
        self.params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
        self.reported: set[str] = set()  # rebound names already reported
        self.locals: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                self.locals.add(sub.id)

    def problem(self, node: ast.AST, text: str, kind: str = NOT_TRITON) -> None:
        self.problems.append(KernelProblem(self.node.name, getattr(node, "lineno", self.node.lineno), text, kind))

    def run(self) -> None:
        arguments = self.node.args
        if arguments.vararg or arguments.kwarg:
            self.problem(self.node, f"{self.node.name} takes *args or **kwargs: Triton kernels take named "
                                    f"arguments only")
        for default in (*arguments.defaults, *[d for d in arguments.kw_defaults if d is not None]):
            if not _constant_value(self.scope, default, set(self.scope.constants)):
                self.problem(default, f"a default value of {self.node.name} is not a plain-number constant")
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if argument.annotation is not None:
                self.expression(argument.annotation)
        for decorator in self.node.decorator_list:
            root = decorator.func if isinstance(decorator, ast.Call) else decorator
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.scope.rebound:
                self.resolve_name(root)
            if _is_jit_decorator(self.scope, decorator) and isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if not _constant_value(self.scope, keyword.value, set()) and not (
                            isinstance(keyword.value, ast.List) and
                            all(_constant_value(self.scope, e, set()) for e in keyword.value.elts)):
                        self.problem(decorator, f"@triton.jit's {keyword.arg}= must be a constant")
        for others in self.scope.decorated.get(self.node.name, []) if self.contract else ():
            self.problem(self.node, f"{self.node.name} is decorated with @{others}: {DECORATOR_ADVICE}", DECORATOR)
        for statement in self.node.body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if not isinstance(node, STATEMENTS):
            what = type(node).__name__.lower()
            self.problem(node, f"`{what}` statement in {self.node.name}: Triton compiles assignments, if, for "
                               f"over range/tl.range/tl.static_range, while, return and assert only")
            return
        if isinstance(node, ast.For):
            iterator = node.iter
            name = self._callee(iterator.func) if isinstance(iterator, ast.Call) else None
            if name not in LOOP_RANGES:
                self.problem(node, f"{self.node.name} loops over something other than range(...), "
                                   f"tl.range(...) or tl.static_range(...)")
            self.expression(node.target)
            self.expression(iterator)
            for statement in node.body + node.orelse:
                self.statement(statement)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.statement(child)
            elif isinstance(child, ast.expr):
                self.expression(child)

    def _callee(self, func: ast.AST) -> str | None:
        if isinstance(func, ast.Name):
            if func.id in self.params | self.locals:
                return None
            if func.id in self.scope.aliases:
                return self.scope.aliases[func.id]
            return func.id
        return self.scope.dotted(func)

    def expression(self, node: ast.AST) -> None:
        if not isinstance(node, EXPRESSIONS):
            what = {ast.Lambda: "a lambda", ast.JoinedStr: "an f-string", ast.Starred: "*unpacking",
                    ast.NamedExpr: "an assignment expression (:=)", ast.Dict: "a dict",
                    ast.Set: "a set"}.get(type(node), type(node).__name__)
            self.problem(node, f"{what} in {self.node.name}: not something Triton compiles")
            return
        if isinstance(node, (ast.Name, ast.Attribute)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                return
            found = self.resolve(node)
            if found is not None and found.kind == NAMESPACE:
                self.problem(node, f"{self.node.name} uses the module {found.path} as a value: inside a kernel "
                                   f"call its operations (tl.exp2(x), tl.load(p))", UNRESOLVED)
            return
        if isinstance(node, ast.Call):
            self.call(node)
            return
        for child in ast.iter_child_nodes(node):
            self.expression(child)

    def resolve(self, node: ast.AST) -> _Resolved | None:
        """What `node` (a name, an attribute chain, or any expression as the base of one) is; None
        once a problem is recorded."""
        if isinstance(node, ast.Name):
            return self.resolve_name(node)
        if isinstance(node, ast.Attribute):
            return self.resolve_attribute(node)
        self.expression(node)  # a call's result, a subscript...: a value, its own parts vetted
        return _Resolved("value")

    def resolve_name(self, node: ast.Name) -> _Resolved | None:
        name = node.id
        if name in self.params or name in self.locals:
            return _Resolved("local")
        if name in self.scope.rebound:
            if name in self.reported:  # once per name and kernel
                return None
            self.reported.add(name)
            self.problem(node, f"{self.node.name} uses {name}, which line {self.scope.rebound[name]} binds again: "
                               f"import a name (or define a @triton.jit function) once and never assign to it",
                         REBOUND)
            return None
        if name in self.scope.jit:
            self.calls.add(name)
            return _Resolved("jit")
        if name in self.scope.constants:
            self.constants.add(name)
            return _Resolved("constant")
        if name in self.scope.aliases:
            path = self.scope.aliases[name]
            kind = self.table.paths.get(path)
            if kind is None and self.table.absent(path):
                return _Resolved(ABSENT, path)
            if kind is None:
                what = self.table.refused.get(path, "not part of triton.language")
                self.problem(node, f"{self.node.name} uses {name} ({path}, {what}): inside a kernel only "
                                   f"triton.language (tl.*) runs; compute it with tl.* or pass it as an argument",
                             UNRESOLVED)
                return None
            return _Resolved(kind, path)
        if name in KERNEL_BUILTINS:
            return _Resolved("builtin", name)
        where = ("a Python function" if name in self.scope.functions else
                 "a module-level value that is not a plain-number constant" if name in self.scope.values else
                 "Python's print (Triton's are tl.device_print and tl.static_print)" if name == "print" else
                 "a Python builtin" if name in dir(builtins) else
                 "a name the file does not define")
        self.problem(node, f"{self.node.name} uses {name}, {where}: a kernel may use only tl.*, other "
                           f"@triton.jit functions, its arguments and plain-number module constants (NAME = 64)",
                     UNRESOLVED)
        return None

    def resolve_attribute(self, node: ast.Attribute) -> _Resolved | None:
        if node.attr.startswith("_"):
            self.problem(node, f"{self.node.name} reads .{node.attr}: a kernel reads no private or dunder "
                               f"attribute", PRIVATE)
            return None
        base = self.resolve(node.value)
        if base is None:
            return None
        if base.kind == ABSENT:  # raises AttributeError before anything past it runs
            return base
        if base.path and base.kind in (NAMESPACE, TYPE):
            path = f"{base.path}.{node.attr}"
            kind = self.table.paths.get(path)
            if kind is not None:
                return _Resolved(kind, path)
            if base.kind == NAMESPACE and self.table.absent(path):
                return _Resolved(ABSENT, path)
            if base.kind == NAMESPACE:
                what = self.table.refused.get(path, f"not in the installed Triton {self.table.version}")
                self.problem(node, f"{self.node.name} uses {ast.unparse(node)} ({what}): inside a kernel only "
                                   f"the public triton.language operations (tl.load, tl.dot, tl.exp2, ...) run",
                             UNRESOLVED)
                return None
        if base.kind in VALUE_KINDS and node.attr in self.table.value_attributes:
            return _Resolved("value")
        self.problem(node, f"{self.node.name} reads .{node.attr} of {ast.unparse(node.value)}: a Triton tensor, "
                           f"dtype or operation has no such attribute in a compiled kernel", UNRESOLVED)
        return None

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, (ast.Name, ast.Attribute)):
            found = self.resolve(func)
            if found is not None and found.kind == NAMESPACE:
                self.problem(node, f"{self.node.name} calls the module {found.path}", UNRESOLVED)
        else:
            self.problem(node, f"{self.node.name} calls the result of an expression: call tl.* operations or "
                               f"@triton.jit functions by name")
            self.expression(func)
        for argument in node.args:
            self.expression(argument)
        for keyword in node.keywords:
            if keyword.arg is None:
                self.problem(node, f"**unpacking in {self.node.name}: not something Triton compiles")
            else:
                self.expression(keyword.value)


def vet_kernel(scope: KernelScope, name: str, contract: bool = False) -> tuple[list[KernelProblem], set[str], set[str]]:
    """Problems of one @triton.jit function of `scope`, the jit functions it calls and the constants it reads.

    `contract`: the grader launches it through the kernel contract, so it may carry no other
    decorator (autotune or heuristics would choose the launch's arguments)."""
    vetter = _Vetter(scope, scope.jit[name], contract)
    vetter.run()
    return vetter.problems, vetter.calls, vetter.constants


def _lines(node: ast.stmt) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return first, node.end_lineno or node.lineno


def kernel_module(filename: str, text: str, kernels: tuple[str, ...]) -> KernelModule:
    """The kernel worker's copy of `filename`: the kernels named, the @triton.jit functions they call,
    every constant and the triton/math imports, each on its own lines; with the problems found."""
    try:
        tree = ast.parse(text, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # reported by the static check
        return KernelModule(filename, "", (), tuple(kernels), ())
    scope = scan_module(tree)
    found = tuple(k for k in kernels if k in scope.jit)
    missing = tuple(k for k in kernels if k not in scope.jit)
    problems: list[KernelProblem] = []
    needed, frontier = set(), list(found)
    while frontier:
        name = frontier.pop()
        if name in needed:
            continue
        needed.add(name)
        found_problems, calls, _constants = vet_kernel(scope, name, contract=True)
        problems += found_problems
        frontier += [c for c in calls if c not in needed]
    kept = [*scope.imports, *scope.constants.values(), *(scope.jit[n] for n in needed)]
    lines = text.splitlines()
    occupied: dict[int, ast.stmt] = {}
    for node in tree.body:
        first, last = _lines(node)
        for line in range(first, last + 1):
            occupied.setdefault(line, node)
    out = [""] * len(lines)
    for node in sorted(kept, key=lambda n: _lines(n)[0]):
        first, last = _lines(node)
        if node.col_offset != 0 or any(occupied.get(line) is not node for line in range(first, last + 1)):
            problems.append(KernelProblem(getattr(node, "name", ""), first, f"line {first} holds more than one "
                                          f"statement: put each kernel, import and constant on lines of its own",
                                          LAYOUT))
            continue
        out[first - 1:last] = lines[first - 1:last]
    source = "\n".join(out) + "\n" if out else ""
    return KernelModule(filename, source, found, missing, tuple(sorted(set(problems), key=lambda p: p.line)))
