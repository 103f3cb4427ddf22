"""Static checks of the student's source: syntax, and forbidden APIs via the AST.

A forbidden API is attributed to the top-level function that uses it, and to
every task function that calls that function (directly or through helpers),
so moving `torch.softmax` into a helper does not hide it. Aliases
(`import torch.nn.functional as F`, `from torch import softmax as s`,
`sm = torch.softmax`) are resolved. Code inside `@triton.jit` kernels is not
torch code and is skipped for the matmul group.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from grader.forbidden import ATTRIBUTES, DOTTED
from grader.manifest import Manifest
from grader.outcomes import StaticFinding


@dataclass(frozen=True)
class SourceProblem:
    filename: str
    message: str


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    head = aliases.get(node.id, node.id)
    return ".".join([head, *reversed(parts)])


def _aliases(tree: ast.Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in tree.body:  # module-level `sm = torch.softmax`
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                dotted = _dotted(node.value, aliases)
                if dotted:
                    aliases[target.id] = dotted
    return aliases


def _is_triton_kernel(func: ast.FunctionDef) -> bool:
    for decorator in func.decorator_list:
        text = ast.unparse(decorator)
        if "jit" in text or "autotune" in text or "heuristics" in text:
            return True
    return False


def _groups_in(node: ast.AST, aliases: dict[str, str], kernel: bool) -> list[tuple[str, int, str]]:
    found = []
    for sub in ast.walk(node):
        hit: str | None = None
        if isinstance(sub, (ast.Attribute, ast.Name)):
            dotted = _dotted(sub, aliases)
            for group, names in DOTTED.items():
                if dotted in names:
                    hit = group
            if hit is None and isinstance(sub, ast.Attribute):
                for group, attrs in ATTRIBUTES.items():
                    if sub.attr in attrs:
                        hit = group
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "getattr":
            if len(sub.args) >= 2 and isinstance(sub.args[1], ast.Constant):
                for group, attrs in ATTRIBUTES.items():
                    if sub.args[1].value in attrs:
                        hit = group
        elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
            hit = "matmul"
        if hit == "matmul" and kernel:
            continue
        if hit:
            found.append((hit, getattr(sub, "lineno", 0), ast.unparse(sub)[:80]))
    return found


def _called_names(func: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def check_sources(manifest: Manifest, sources: dict[str, str]) -> tuple[list[StaticFinding], list[SourceProblem]]:
    """Forbidden-API findings per task, and files that do not parse."""
    findings: list[StaticFinding] = []
    problems: list[SourceProblem] = []
    for filename, text in sources.items():
        try:
            tree = ast.parse(text, filename=filename)
        except SyntaxError as exc:
            problems.append(SourceProblem(filename, f"{exc.msg} (line {exc.lineno})"))
            continue
        aliases = _aliases(tree)
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        direct = {name: _groups_in(fn, aliases, _is_triton_kernel(fn)) for name, fn in functions.items()}
        module_level = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        calls = {name: _called_names(fn) & functions.keys() for name, fn in functions.items()}
        for task in manifest.tasks:
            if not task.forbidden:
                continue
            for function in task.functions:
                if function not in functions:
                    continue
                reached, frontier = {function}, [function]
                while frontier:  # functions reachable through helpers
                    for callee in calls.get(frontier.pop(), ()):
                        if callee not in reached:
                            reached.add(callee)
                            frontier.append(callee)
                hits = [h for name in sorted(reached) for h in direct[name]]
                for node in module_level:  # e.g. an nn.Module class at module level
                    hits += _groups_in(node, aliases, False)
                seen = set()
                for group, line, code in hits:
                    if group in task.forbidden and (group, line) not in seen:
                        seen.add((group, line))
                        findings.append(StaticFinding(task.id, function, group, line, code))
    return findings, problems
