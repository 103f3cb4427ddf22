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
anything. `vet_kernel` accepts inside a `@triton.jit` function only what Triton
compiles: `tl.*` operations, other `@triton.jit` functions of the file, the
file's constants, Triton's builtins (range, min, max, float, int, len, print,
isinstance, list), the kernel's own arguments and locals, and the attributes a
Triton tensor or dtype has. So a CPU grade means what a GPU grade means.

A constant is a module-level `NAME = value` whose value is made of literals,
earlier constants, `tl.constexpr(...)`, Triton dtypes (`tl.float16`) and
Python's `math`: nothing that runs student code.

Standard library only (the trusted side parses; nothing here is imported into a worker).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# What Triton's code generator accepts as builtins (triton.compiler.code_generator), without
# getattr/hasattr, whose names are computed.
KERNEL_BUILTINS = frozenset({"range", "min", "max", "float", "int", "len", "print", "isinstance", "list"})
# Public attributes of Triton's tensor, dtype, pointer, block and constexpr types (Triton 3.9's
# triton.language classes), and the instance attributes those types carry. `handle` (the
# interpreter's numpy array) is not among them.
TENSOR_ATTRIBUTES = frozenset({
    "FP_TYPES", "KIND", "OTHER_TYPES", "SIGNEDNESS", "SINT_TYPES", "STANDARD_FP_TYPES", "T", "UINT_TYPES",
    "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_load", "atomic_max", "atomic_min", "atomic_or", "atomic_poll", "atomic_store", "atomic_xchg",
    "atomic_xor", "broadcast_to", "cast", "cdiv", "ceil", "cos", "cumprod", "cumsum", "erf", "exp", "exp2",
    "expand_dims", "flip", "floor", "gather", "get_block_shapes", "get_int_max_value", "get_int_min_value",
    "histogram", "is_bf16", "is_block", "is_bool", "is_const", "is_dtype", "is_floating", "is_fp16", "is_fp32",
    "is_fp64", "is_fp8", "is_fp8e4b15", "is_fp8e4b8", "is_fp8e4nv", "is_fp8e5", "is_fp8e5b16", "is_int",
    "is_int1", "is_int16", "is_int32", "is_int64", "is_int8", "is_int_signed", "is_int_unsigned", "is_ptr",
    "is_standard_floating", "is_uint16", "is_uint32", "is_uint64", "is_uint8", "is_void", "item", "kind", "log",
    "log2", "logical_and", "logical_or", "max", "min", "nbytes", "permute", "ravel", "reduce", "reduce_or",
    "reshape", "rsqrt", "scalar", "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store",
    "sum", "to", "trans", "view", "with_element_ty", "xor_sum",
    # instance attributes
    "dtype", "shape", "type", "numel", "element_ty", "primitive_bitwidth", "int_bitwidth", "int_signedness",
    "fp_mantissa_width", "exponent_bias", "name", "value", "address_space", "const",
})
# Submodules of triton.language a kernel may not reach into: the compiler's own machinery.
LANGUAGE_INTERNALS = frozenset({"core", "semantic", "target_info"})
STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.If, ast.For, ast.While, ast.Return,
              ast.Pass, ast.Break, ast.Continue, ast.Assert)
EXPRESSIONS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.BinOp,
               ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.expr_context,
               ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
LOOP_RANGES = frozenset({"range", "triton.language.range", "triton.language.static_range"})
IMPORTABLE = ("triton", "math", "__future__")  # imports copied into the kernel module
KERNEL_SECTION = "§24"


@dataclass(frozen=True)
class KernelProblem:
    """Something in a kernel (or what it needs) that the grader will not run: one line each."""

    kernel: str  # the @triton.jit function it is in ("" for the file)
    line: int
    text: str  # what is wrong and what to write instead


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


def _constant_value(scope: KernelScope, node: ast.AST, known: set[str]) -> bool:
    """A value the grader may copy: literals, earlier constants, tl.constexpr(...), dtypes, math."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, str, bool, type(None)))
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.UnaryOp):
        return _constant_value(scope, node.operand, known)
    if isinstance(node, ast.BinOp):
        return _constant_value(scope, node.left, known) and _constant_value(scope, node.right, known)
    if isinstance(node, ast.Tuple):
        return all(_constant_value(scope, e, known) for e in node.elts)
    if isinstance(node, ast.Attribute):
        dotted = scope.dotted(node)
        return dotted is not None and (dotted.startswith("triton.language.") or dotted.startswith("math.")) \
            and not any(part.startswith("_") for part in dotted.split("."))
    if isinstance(node, ast.Call):
        dotted = scope.dotted(node.func)
        callable_ = dotted in ("triton.language.constexpr", "triton.language.core.constexpr") or (
            dotted is not None and dotted.startswith("math.") and "_" not in dotted.split(".")[1][:1])
        return callable_ and not node.keywords and all(_constant_value(scope, a, known) for a in node.args)
    return False


def scan_module(tree: ast.Module) -> KernelScope:
    """The imports, @triton.jit functions and constants at the top level of a file."""
    scope = KernelScope()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                scope.aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
            if all(a.name.split(".")[0] in IMPORTABLE for a in node.names):
                scope.imports.append(node)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                scope.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
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
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and \
                    _constant_value(scope, node.value, set(scope.constants)):
                scope.constants[targets[0].id] = node
            else:  # a name bound to something else is no constant, even if an earlier line made it one
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            scope.constants.pop(name.id, None)
                            scope.values.add(name.id)
    return scope


class _Vetter:
    """Checks one @triton.jit function's body; collects problems and what it needs."""

    def __init__(self, scope: KernelScope, node: ast.FunctionDef, contract: bool):
        self.scope = scope
        self.node = node
        self.contract = contract  # the grader launches it itself: plain @triton.jit only
        self.problems: list[KernelProblem] = []
        self.calls: set[str] = set()  # jit functions it calls
        self.constants: set[str] = set()  # constants it reads
        arguments = node.args
        self.params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
        self.locals: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                self.locals.add(sub.id)

    def problem(self, node: ast.AST, text: str) -> None:
        self.problems.append(KernelProblem(self.node.name, getattr(node, "lineno", self.node.lineno), text))

    def run(self) -> None:
        arguments = self.node.args
        if arguments.vararg or arguments.kwarg:
            self.problem(self.node, f"{self.node.name} takes *args or **kwargs: Triton kernels take named "
                                    f"arguments only")
        for default in (*arguments.defaults, *[d for d in arguments.kw_defaults if d is not None]):
            if not _constant_value(self.scope, default, set(self.scope.constants)):
                self.problem(default, f"a default value of {self.node.name} is not a constant")
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if argument.annotation is not None:
                self.expression(argument.annotation)
        for decorator in self.node.decorator_list:
            if _is_jit_decorator(self.scope, decorator) and isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if not _constant_value(self.scope, keyword.value, set()) and not (
                            isinstance(keyword.value, ast.List) and
                            all(_constant_value(self.scope, e, set()) for e in keyword.value.elts)):
                        self.problem(decorator, f"@triton.jit's {keyword.arg}= must be a constant")
        for others in self.scope.decorated.get(self.node.name, []) if self.contract else ():
            self.problem(self.node, f"{self.node.name} is decorated with @{others}: the grader launches your "
                                    f"kernel itself with the contract's arguments, so keep it a plain "
                                    f"@triton.jit function (choose tile sizes with BLOCK_M and BLOCK_N)")
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
        if isinstance(node, ast.Name):
            self.name(node)
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node)
            return
        if isinstance(node, ast.Call):
            self.call(node)
            return
        for child in ast.iter_child_nodes(node):
            self.expression(child)

    def name(self, node: ast.Name) -> None:
        name = node.id
        if isinstance(node.ctx, ast.Store) or name in self.params or name in self.locals:
            return
        if name in self.scope.jit:
            self.calls.add(name)
        elif name in self.scope.constants:
            self.constants.add(name)
        elif name in self.scope.aliases:
            dotted = self.scope.aliases[name]
            if not dotted.startswith("triton"):
                self.problem(node, f"{self.node.name} uses {name} ({dotted}): inside a kernel only triton.language "
                                   f"(tl.*) runs; compute it in the kernel with tl.* or pass it as an argument")
        elif name not in KERNEL_BUILTINS:
            where = ("a Python function" if name in self.scope.functions else
                     "a module-level value that is not a constant" if name in self.scope.values else
                     "a name the file does not define")
            self.problem(node, f"{self.node.name} uses {name}, {where}: a kernel may use only tl.*, other "
                               f"@triton.jit functions, its arguments and module-level constants (NAME = 64)")

    def attribute(self, node: ast.Attribute) -> None:
        dotted = self.scope.dotted(node)
        root = node
        attrs: list[str] = []
        while isinstance(root, ast.Attribute):
            attrs.append(root.attr)
            root = root.value
        if dotted is not None and isinstance(root, ast.Name) and root.id not in self.params | self.locals:
            parts = dotted.split(".")
            inside = parts[:2] == ["triton", "language"] or dotted == "triton.cdiv"
            private = any(p.startswith("_") for p in parts) or (len(parts) > 2 and parts[2] in LANGUAGE_INTERNALS)
            if not inside or private:
                self.problem(node, f"{self.node.name} uses {ast.unparse(node)}: inside a kernel only the public "
                                   f"triton.language operations (tl.load, tl.dot, tl.exp2, ...) run")
            return
        strange = [a for a in attrs if a not in TENSOR_ATTRIBUTES]
        if strange:
            self.problem(node, f"{self.node.name} reads .{strange[-1]} of {ast.unparse(root)}: a Triton tensor has "
                               f"no such attribute in a compiled kernel")
        self.expression(root)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.params | self.locals:
            if func.id in self.scope.jit:
                self.calls.add(func.id)
            elif func.id not in KERNEL_BUILTINS:
                self.name(func)
        elif isinstance(func, (ast.Attribute, ast.Name)):
            self.expression(func)
        else:
            self.problem(node, f"{self.node.name} calls the result of an expression: call tl.* operations or "
                               f"@triton.jit functions by name")
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
                                          f"statement: put each kernel, import and constant on lines of its own"))
            continue
        out[first - 1:last] = lines[first - 1:last]
    source = "\n".join(out) + "\n" if out else ""
    return KernelModule(filename, source, found, missing, tuple(sorted(set(problems), key=lambda p: p.line)))
