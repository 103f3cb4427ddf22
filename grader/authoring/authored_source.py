"""What an assignment's own files say, read from their syntax trees (for grader.authoring.consistency).

Nothing here imports or runs the files: stubs, reference modules and tests are parsed, so a
consistency check answers in a fraction of a second and names the file and line at fault.

* `Signature`: a function's parameters as written (names, kinds, defaults, annotations);
* `test_calls`: every call a test makes through `check` (`check.close("softmax", x, dim=0)`),
  with the function it names and the keywords it passes on to it;
* `reaches`: the module-level functions a function calls, directly or through helpers;
* `same_code`: two functions that are the same code once layout, docstrings, annotations and the
  names they bind (parameters, locals) are set aside; the names they use from outside (`torch`,
  `_stable_softmax`) must be the same, so a mutant that calls another helper is not "the same".
"""

from __future__ import annotations

import ast
import builtins
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

Function = ast.FunctionDef | ast.AsyncFunctionDef

# check's methods that call a student function: → the keywords check itself takes (the rest go to the function)
CHECK_CALLS = {
    "close": {"expected", "rtol", "atol", "heatmap", "region"},
    "call": set(),
    "call_with_facts": {"fresh_worker", "track_tensors", "timeout_s"},
    "raises": {"exception", "because"},
}
CHECK_NAMED = ("time_against", "returns_kernel_output")  # name the function, pass it nothing themselves


@dataclass(frozen=True)
class Signature:
    """A function's parameters as written: (kind, name, default, annotation) each, in order."""

    name: str
    parameters: tuple[tuple[str, str, str, str], ...]
    line: int

    @property
    def names(self) -> list[str]:
        return [name for kind, name, _, _ in self.parameters if kind not in ("*", "**")]

    @property
    def takes_any_keyword(self) -> bool:
        return any(kind == "**" for kind, *_ in self.parameters)

    @property
    def takes_any_positional(self) -> bool:
        return any(kind == "*" for kind, *_ in self.parameters)

    @property
    def positional(self) -> int:
        return sum(kind in ("positional", "positional-only") for kind, *_ in self.parameters)

    def text(self) -> str:
        parts = []
        for kind, name, default, annotation in self.parameters:
            shown = {"*": "*", "**": "**"}.get(kind, "") + name
            shown += f": {annotation}" if annotation else ""
            shown += f" = {default}" if default else ""
            parts.append(shown)
        return f"{self.name}({', '.join(parts)})"


def _text(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def signature(node: Function) -> Signature:
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parameters = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = "positional-only" if index < len(args.posonlyargs) else "positional"
        parameters.append((kind, arg.arg, _text(default), _text(arg.annotation)))
    if args.vararg:
        parameters.append(("*", args.vararg.arg, "", _text(args.vararg.annotation)))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parameters.append(("keyword-only", arg.arg, _text(default), _text(arg.annotation)))
    if args.kwarg:
        parameters.append(("**", args.kwarg.arg, "", _text(args.kwarg.annotation)))
    return Signature(node.name, tuple(parameters), node.lineno)


def parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def top_functions(tree: ast.Module) -> dict[str, Function]:
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def docstring(node: Function) -> str:
    return ast.get_docstring(node, clean=False) or ""


# ------------------------------------------------------------------------ stubs (the one detector)
def _after_docstring(node: ast.AST) -> list[ast.stmt]:
    """A definition's body without its docstring."""
    body = list(getattr(node, "body", []))
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _raised_not_implemented(statement: ast.stmt) -> ast.expr | None:
    """The raised expression when `statement` is `raise NotImplementedError` (or `...(...)`), else None."""
    if not isinstance(statement, ast.Raise) or statement.exc is None:
        return None
    exc = statement.exc
    raised = exc.func if isinstance(exc, ast.Call) else exc
    return exc if isinstance(raised, ast.Name) and raised.id == "NotImplementedError" else None


def not_implemented_message(node: Function) -> str | None:
    """The message of the function's first statement after the docstring when it is `raise
    NotImplementedError(...)` ("" without a constant message), else None."""
    body = _after_docstring(node)
    exc = _raised_not_implemented(body[0]) if body else None
    if exc is None:
        return None
    first = exc.args[0] if isinstance(exc, ast.Call) and exc.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def is_stub(node: ast.AST) -> bool:
    """A definition whose body is only a docstring, `pass`, `...` or `raise NotImplementedError`."""
    return all(isinstance(statement, ast.Pass)
               or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))  # `...`
               or _raised_not_implemented(statement) is not None
               for statement in _after_docstring(node))


# ------------------------------------------------------------------------ what tests call
@dataclass(frozen=True)
class TestCall:
    """One call a test makes of a student (or reference) function through `check`."""

    __test__ = False  # not a pytest test class

    path: str
    line: int
    how: str  # "close", "call", ..., "reference" (check.reference.NAME(...)), "diagnose_with"
    function: str
    positional: int  # positional arguments passed on to the function (-1: unknown, a *splat)
    keywords: tuple[str, ...]  # keyword names passed on to the function


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "text" assignments (tests often name their function once: FLASH = "...")."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _literal(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _passed_on(args: list[ast.expr], keywords: list[ast.keyword], own: set[str]) -> tuple[int, tuple[str, ...]]:
    positional = -1 if any(isinstance(a, ast.Starred) for a in args) else len(args)
    names = tuple(k.arg for k in keywords if k.arg is not None and k.arg not in own)
    return positional, names


def test_calls(path: Path, display: str) -> Iterator[TestCall]:
    """Every `check.<method>("name", ...)` and `check.reference.name(...)` call in a test file."""
    tree = parse(path)
    if tree is None:
        return
    constants = _constants(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method, receiver = node.func.attr, node.func.value
        if isinstance(receiver, ast.Attribute) and receiver.attr == "reference":
            positional, keywords = _passed_on(node.args, node.keywords, set())
            yield TestCall(display, node.lineno, "reference", method, positional, keywords)
            continue
        if method in CHECK_CALLS or method in CHECK_NAMED:
            function = _literal(node.args[0], constants) if node.args else None
            if function is None:
                continue
            if method in CHECK_CALLS:
                positional, keywords = _passed_on(node.args[1:], node.keywords, CHECK_CALLS[method])
            else:
                positional, keywords = -1, ()
            yield TestCall(display, node.lineno, method, function, positional, keywords)
        for keyword in node.keywords:  # check.compare(..., diagnose_with=(name, args, kwargs))
            value = keyword.value
            if keyword.arg == "diagnose_with" and isinstance(value, ast.Tuple) and len(value.elts) == 3:
                function = _literal(value.elts[0], constants)
                args, kwargs = value.elts[1], value.elts[2]
                positional = len(args.elts) if isinstance(args, ast.Tuple) and not any(
                    isinstance(a, ast.Starred) for a in args.elts) else -1
                names = tuple(k.value for k in kwargs.keys if isinstance(k, ast.Constant)) \
                    if isinstance(kwargs, ast.Dict) else ()
                if function is not None:
                    yield TestCall(display, node.lineno, "diagnose_with", function, positional, names)


def call_problems(call: TestCall, target: Signature) -> list[str]:
    """What a test passes that the function's signature does not take."""
    problems = []
    unknown = [k for k in call.keywords if k not in target.names]
    if unknown and not target.takes_any_keyword:
        problems.append(f"passes {', '.join(f'{k}=' for k in unknown)} to {target.text()}, which has no such "
                        f"parameter")
    if call.positional > target.positional and not target.takes_any_positional:
        problems.append(f"passes {call.positional} positional argument(s) to {target.text()}, which takes "
                        f"{target.positional}")
    return problems


# ------------------------------------------------------------------------ what calls what
def called_names(node: Function) -> set[str]:
    """The plain names a function calls (`helper(x)`, not `x.helper()`)."""
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def reaches(start: str, functions: dict[str, Function]) -> dict[str, list[str]]:
    """Every module-level function `start` calls, directly or through others: name → the path to it."""
    paths: dict[str, list[str]] = {}
    frontier = [(start, [start])]
    while frontier:
        name, path = frontier.pop()
        for called in sorted(called_names(functions[name])):
            if called in functions and called not in paths and called != start:
                paths[called] = [*path, called]
                frontier.append((called, paths[called]))
    return paths


# ------------------------------------------------------------------------ the same code
def _bound_names(node: Function) -> set[str]:
    """Names a function binds: itself, its parameters, its locals, its nested definitions."""
    bound = {node.name}
    for inner in ast.walk(node):
        if isinstance(inner, ast.arg):
            bound.add(inner.arg)
        elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store | ast.Del):
            bound.add(inner.id)
        elif isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and inner is not node:
            bound.add(inner.name)
        elif isinstance(inner, ast.ExceptHandler) and inner.name:
            bound.add(inner.name)
        elif isinstance(inner, ast.alias):
            bound.add((inner.asname or inner.name).split(".")[0])
    return bound


class _Renamed(ast.NodeTransformer):
    """Bound names → placeholders in order of first use; docstrings, annotations, decorators dropped."""

    def __init__(self, bound: set[str]):
        self.bound = bound
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"_{len(self.names)}") if name in self.bound else name

    def _definition(self, node):
        node.name = self._name(node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:] or [ast.Pass()]
        node.body, node.decorator_list = body, []
        if not isinstance(node, ast.ClassDef):
            node.returns = None
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._name(node.id)
        return node


def code_shape(node: Function) -> str:
    """The function's code with its own names set aside (see the module docstring)."""
    renamed = _Renamed(_bound_names(node)).visit(copy.deepcopy(node))
    return ast.dump(renamed, annotate_fields=False, include_attributes=False)


def same_code(one: Function, other: Function) -> bool:
    return code_shape(one) == code_shape(other)


def free_names(node: Function) -> set[str]:
    """The names a function reads from outside itself (globals and builtins it uses)."""
    bound = _bound_names(node)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in bound}


def module_names(tree: ast.Module) -> set[str]:
    """What a module defines at its top level: functions, classes, assignments, imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


BUILTINS = frozenset(dir(builtins))
