"""Instructor material recognised by meaning, not bytes (used by grader/ship/release.py).

Re-indenting, re-wrapping, renaming or re-quoting a file changes its bytes,
not what it says, so two comparisons look past the layout:
- Python as syntax trees. A function or class is reduced to its canonical
  shape: docstrings, annotations and decorators dropped, and every name it
  binds or uses (its own name, arguments, locals, the globals it calls)
  replaced by a placeholder numbered in order of first use, afresh in each
  function or class body. Attribute names (`.exp`, `.sum`), keyword names
  (`dim=`), constants and operators stay, so a copy that was reformatted or
  renamed has the same shape and different code does not. A whole module is
  compared the same way.
- TOML as data. Files are parsed and their values compared: the same data
  as an instructor file, the answers of a quiz key (each value judged the
  way the quiz itself would grade it, so `1`, `"1"` and the choice's text
  are the same answer, and a number within the key's tolerance counts), or
  a long text of an instructor file (an explanation) as a value.
Stubs (a body of only a docstring, `pass`, `...` or `raise
NotImplementedError`) never count: every student gets those. Nor does a
bundled definition whose docstring says "Given; do not change": a helper the
handout gives students on purpose, the same code as in the reference. Nor
does a one-line definition that computes a formula the handout states as code
(`handout_formulas`, `states_formula`): a public file may state what the
handout states. What a release must never carry is the reference's behaviour:
hidden test bodies, mutants, the quiz key, and reference functions the handout
does not state; each refusal names the instructor file and what it is (`role_of`).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from grader.authoring.authored_source import is_stub
from grader.core.compat import tomllib
from grader.core.course import KERNELS_PACKAGE
from grader.core.quiz import Question, is_right

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
GIVEN_MARK = "given; do not change"  # in a bundled docstring: shipped to students on purpose
LONG_TEXT = 40  # characters: an instructor TOML string this long found in a bundle is a copy, not chance


# ------------------------------------------------------------------------- Python
class _Canonical(ast.NodeTransformer):
    """Names → placeholders in order of first use, per scope; docstrings, annotations, decorators dropped."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, str]] = [{}]

    def _name(self, name: str) -> str:
        names = self.scopes[-1]
        return names.setdefault(name, f"n{len(names)}")

    @staticmethod
    def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            return body[1:] or [ast.Pass()]
        return body

    def _definition(self, node):
        node.name = self._name(node.name)
        node.body = self._without_docstring(node.body)
        node.decorator_list = []
        if not isinstance(node, ast.ClassDef):
            node.returns, node.type_comment = None, None
        self.scopes.append({})
        try:
            return self.generic_visit(node)
        finally:
            self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_Module(self, node: ast.Module) -> ast.Module:
        node.body = self._without_docstring(node.body)
        return self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg, node.annotation, node.type_comment = self._name(node.arg), None, None
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._name(node.id)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign):
        node.annotation = ast.Constant(None)
        return self.generic_visit(node)

    def visit_Global(self, node: ast.Global | ast.Nonlocal):
        node.names = [self._name(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global

    def visit_ExceptHandler(self, node: ast.ExceptHandler):
        if node.name:
            node.name = self._name(node.name)
        return self.generic_visit(node)


def shape(node: ast.AST) -> str:
    """The canonical form of a module, function or class (see the module docstring)."""
    canonical = _Canonical().visit(copy.deepcopy(node))
    return ast.dump(canonical, annotate_fields=False, include_attributes=False)


def parse_python(text: str) -> ast.Module | None:
    """The module's syntax tree, or None when it does not parse (never raises)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def definitions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Every function and class of a module that is not a stub, nested ones and methods included."""
    for node in ast.walk(tree):
        if isinstance(node, DEFINITIONS) and not is_stub(node):
            yield node


def is_given(node: ast.AST) -> bool:
    """A bundled definition the handout gives on purpose (its docstring says "Given; do not change")."""
    try:
        docstring = ast.get_docstring(node, clean=False)  # type: ignore[arg-type]
    except TypeError:
        return False
    return bool(docstring) and GIVEN_MARK in " ".join(docstring.lower().split())


def has_substance(tree: ast.Module) -> bool:
    """False for a module of only imports, a docstring, `pass` and stubs (every bundle has those)."""
    for statement in tree.body:
        if isinstance(statement, ast.Import | ast.ImportFrom | ast.Pass):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, DEFINITIONS) and is_stub(statement):
            continue
        return True
    return False


def kind_of(node: ast.AST) -> str:
    return "class" if isinstance(node, ast.ClassDef) else "function"


def safe_shape(node: ast.AST) -> str | None:
    """shape(node), or None for a tree too deep to walk."""
    try:
        return shape(node)
    except (RecursionError, MemoryError):
        return None


# --------------------------------------------------------------------------- TOML
def parse_toml(data: bytes) -> dict | None:
    """The TOML document as data, or None when it is not UTF-8 TOML (never raises)."""
    try:
        return tomllib.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
        return None


def quiz_key_answers(document: dict) -> dict:
    """question id → expected answer, from a quiz key's [answers] table."""
    answers = document.get("answers", {})
    return answers if isinstance(answers, dict) else {}


def questions_of(document: dict | None) -> dict[str, Question]:
    """The questions of a quiz.toml document, by id (empty when there are none)."""
    found = {}
    for raw in (document or {}).get("questions", []) if isinstance(document, dict) else []:
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            choices = raw.get("choices", ())
            found[raw["id"]] = Question(raw["id"], str(raw.get("kind", "choice")), "",
                                        tuple(str(c) for c in choices) if isinstance(choices, list) else ())
    return found


def _values_by_key(value, key: str = "") -> Iterator[tuple[str, object]]:
    """(key, value) of every entry of every table, at any depth (arrays of tables included)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _values_by_key(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from _values_by_key(item, key)


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def answers_given(document: dict, key: dict, questions: dict[str, Question]) -> list[str]:
    """Ids of the key's questions that some value in `document` answers right."""
    right = set()
    for name, value in _values_by_key(document):
        if name not in key or name in right:
            continue
        given = value.get("value") if isinstance(value, dict) else value
        if isinstance(given, dict | list) or isinstance(given, bool):
            continue
        expected = key[name]
        kind = "numeric" if isinstance(expected, dict | float) else "choice"
        question = questions.get(name) or Question(name, kind, "")
        try:
            if is_right(question, expected, given) or \
                    (question.kind == "choice" and is_right(Question(name, "numeric", ""), expected, given)):
                right.add(name)
        except (TypeError, ValueError, KeyError, IndexError, OverflowError):
            continue
    return sorted(right)


def long_texts(document: dict) -> set[str]:
    """The instructor document's long strings, whitespace-normalised."""
    return {" ".join(s.split()) for s in _strings(document) if len(" ".join(s.split())) >= LONG_TEXT}


def texts_found(document: dict, texts: set[str]) -> bool:
    """Whether any string value of `document` is one of `texts` (whitespace-normalised)."""
    return any(" ".join(s.split()) in texts for s in _strings(document))


@dataclass(frozen=True)
class TomlFile:
    """An instructor TOML file, parsed once."""

    name: str
    data: dict
    key: dict  # question id → expected answer (empty unless it is a quiz key)
    texts: set[str]


# ----------------------------------------------------------------- what the handout states
# A public file may state what the handout states: a one-line helper that computes the handout's own
# formula (`x / x.norm(dim=-1, keepdim=True)`) is no leak, even though the reference computes it the
# same way. The handout's statements are its code: fenced and indented blocks and inline `code` in the
# README, and the same in the stubs' docstrings. A definition states one when its body is a single
# `return <expression>` whose expression is one of them, compared with its parameters as placeholders,
# and module prefixes set aside (`torch.nn.functional.elu`, `F.elu` and `elu` are one name).
MODULE_NAMES = frozenset({"torch", "F", "nn", "functional", "math", "np", "numpy", "tl", "triton"})
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_SPAN = re.compile(r"`([^`\n]+)`")


class _Formula(ast.NodeTransformer):
    """An expression with its variables as placeholders: `parameters` (a definition's) or, for a handout
    fragment (parameters None), every name that is not called; module-rooted attribute chains → their
    last name."""

    def __init__(self, parameters: set[str] | None, free_modules: set[str]):
        self.parameters = parameters
        self.modules = free_modules
        self.names: dict[str, str] = {}
        self.called: set[int] = set()

    def _placeholder(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Call(self, node: ast.Call):
        self.called.add(id(node.func))
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.modules:
            return ast.copy_location(ast.Name(id=node.attr, ctx=ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        if self.parameters is not None:
            if node.id in self.parameters:
                node.id = self._placeholder(node.id)
        elif id(node) not in self.called:
            node.id = self._placeholder(node.id)
        return node


def formula_shape(expression: ast.expr, parameters: set[str] | None) -> str | None:
    """The expression's formula (see _Formula), or None when it is too deep to walk."""
    modules = set(MODULE_NAMES) if parameters is None else None
    if modules is None:  # in a definition, every chain rooted at a name from outside is a module's
        modules = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)} - parameters
    try:
        shaped = _Formula(parameters, modules).visit(copy.deepcopy(expression))
        return ast.dump(shaped, annotate_fields=False, include_attributes=False)
    except (RecursionError, MemoryError):
        return None


def _fragments(text: str) -> Iterator[str]:
    yield from _FENCE.findall(text)
    without_fences = _FENCE.sub("", text)
    yield from _SPAN.findall(without_fences)
    block: list[str] = []
    for line in [*without_fences.splitlines(), ""]:
        if line.startswith("    ") and line.strip():
            block.append(line[4:])
        elif block:
            yield "\n".join(block)
            block = []


def _expressions(fragment: str) -> Iterator[ast.expr]:
    """The expressions a code fragment states: itself, or each statement's value (`y = ...`, `return ...`)."""
    try:
        yield ast.parse(fragment.strip(), mode="eval").body
        return
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    tree = parse_python(fragment)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign | ast.Return) and node.value is not None:
            yield node.value


def handout_formulas(handout: str, stubs: list[str]) -> set[str]:
    """The formulas the handout (README text) and the stubs' docstrings state, as formula_shape gives them."""
    texts = [handout]
    for text in stubs:
        tree = parse_python(text)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.Module, *DEFINITIONS)):
                texts.append(ast.get_docstring(node, clean=True) or "")
    shapes = set()
    for text in texts:
        for fragment in _fragments(text):
            for expression in _expressions(fragment):
                found = formula_shape(expression, None)
                if found:
                    shapes.add(found)
    return shapes


def states_formula(node: ast.AST, formulas: set[str]) -> bool:
    """Whether a definition is one `return <expression>` whose expression the handout states."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not formulas:
        return False
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return False
    arguments = node.args
    parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    return formula_shape(body[0].value, parameters) in formulas


def role_of(name: str) -> str:
    """What an instructor file is, in the words a release refusal uses (`name`: its path in the course)."""
    parts = PurePosixPath(name).parts
    if parts and parts[0] == KERNELS_PACKAGE:
        return "a reference kernel"
    if "similarity_sources" in parts:
        return "a similarity source"
    if "tests" in parts[:-1] or parts[-1].startswith("test_") or parts[-1] == "conftest.py":
        return "a hidden test file"
    if parts[-1] == "mutants.py":
        return "the mistake catalogue"
    if parts[-1].endswith("_key.toml"):
        return "the quiz key"
    if parts[-1].endswith(".py"):
        return "the reference solution"
    return "an instructor file"
