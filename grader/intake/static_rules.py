"""The walk of the static checks: what each unit of a submitted program calls and reads.

A `Walker` goes through one unit's code with Python's scoping and records, on the
unit, each *hit* (a forbidden API group, an evasion, course code), each module-level
name it reads or writes, the student modules it imports, and each `kernel[grid](...)`
launch. Aliases (`import torch.nn.functional as F`, `sm = torch.softmax`) are resolved
through `grader.intake.source_program`; the tables of what counts as evasion and the
API groups are in `grader.sandbox.forbidden`. `walk_program` walks every unit of a
`Program` once.
"""
# One module because the walk is one visitor: each node kind's rule needs the scopes, the unit being
# filled and the program's resolution at once, and splitting the visitor would pass all three around.

from __future__ import annotations

import ast

from grader.intake.resolution import (
    outside_attribute,
    resolve_outside,
    resolves_to_module,
    star_binds,
    store_outside,
)
from grader.intake.source_program import (
    TRY_NODES,
    Hit,
    ModuleInfo,
    Program,
    Scope,
    Unit,
    chain,
    fold,
    has_call,
    installed,
    target_names,
)
from grader.sandbox.forbidden import (
    ATTRIBUTES,
    CLASS_CHAIN_HARMLESS,
    COURSE_CODE,
    COURSE_MODULES,
    DOTTED,
    EVASION,
    EVASION_RULES,
    NUMPY_MODULES,
    module_allowed,
)

GETATTR_FAMILY = frozenset({"getattr", "setattr", "delattr", "hasattr"})
LOOKUP_METHODS = frozenset({"get", "pop", "setdefault", "__getitem__"})
IMPORT_CALLS = frozenset({"importlib.import_module", "importlib.__import__", "__import__",
                          "builtins.__import__", "importlib.util.find_spec"})
CODE_WIDTH = 100  # characters of source quoted in a finding

_PREFIX_RULES = [(p, r.why) for r in EVASION_RULES if r.kind == "prefix" for p in sorted(r.names)]
_PRIVATE_ROOTS = {n: r.why for r in EVASION_RULES if r.kind == "private" for n in r.names}
_BUILTINS = {n: r.why for r in EVASION_RULES if r.kind == "builtin" for n in r.names}
_NAME_ARG = {n: r.why for r in EVASION_RULES if r.kind == "name_arg" for n in r.names}
_ATTRIBUTES = {n: r.why for r in EVASION_RULES if r.kind == "attribute" for n in r.names}


def read_program(sources: dict[str, str], other_files: tuple[str, ...] = ()) -> Program:
    """Parse every submitted module and walk each of its units once."""
    program = Program(sources, other_files)
    for module in program.modules.values():
        try:
            _walk_module(program, module)
        except RecursionError:  # valid Python, nested deeper than the check can follow
            program.units[(module.name, "<module>")].hits.append(Hit(
                EVASION, module.filename, 1, f"{module.filename} — nested too deeply for the grader "
                                             f"to check; split long expressions"))
    return program


def _walk_module(program: Program, module: ModuleInfo) -> None:
    top = program.units[(module.name, "<module>")]
    walker = Walker(program, module, top, [])
    for node in program.statements(module.tree.body):
        walker.import_time(node)
    for name, node in module.functions.items():
        unit = program.units[(module.name, name)]
        Walker(program, module, unit, []).function(node)
    for (_, name), info in module.classes.items():
        unit = program.units[(module.name, f"{name}.<body>")]
        Walker(program, module, unit, []).class_body(info.node)
    for node in program.statements(module.tree.body):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in target_names(target):
                    unit = program.units[(module.name, f"{name}@{node.lineno}")]
                    walker = Walker(program, module, unit, [])
                    if isinstance(target, ast.Name) and name in module.aliases:  # `F = torch.nn.functional`
                        walker.not_values.add(id(node.value))
                    walker.visit(node.value)


class Walker:
    """Walks one unit's code with Python's scoping, recording hits, references and launches."""

    def __init__(self, program: Program, module: ModuleInfo, unit: Unit, scopes: list[Scope]):
        self.program = program
        self.module = module
        self.unit = unit
        self.scopes = scopes
        self.done: set[int] = set()  # ids of nodes already handled as part of a larger one
        # ids of names that read a module but do not pass it on as a value: a module-level alias's value
        # (`F = torch.nn.functional`), getattr's object with a literal name (`getattr(F, 'relu')`)
        self.not_values: set[int] = set()

    # ------------------------------------------------------------ entry points
    def function(self, node: ast.AST) -> None:
        """A top-level function or method: its arguments' defaults and its body."""
        self._arguments(node)
        self.scopes.append(Scope(node, "function"))
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    def class_body(self, node: ast.ClassDef) -> None:
        """A class's bases, keywords and non-method statements."""
        for expr in [*node.bases, *node.keywords]:
            self.visit(expr)
        self.scopes.append(Scope(node, "class"))
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
            if has_call(node.value):
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
            if has_call(expr):
                self.visit(expr)
        self._annotations(node)

    def _class_at_import(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        for expr in [*node.bases, *node.keywords]:
            if has_call(expr):
                self.visit(expr)
        self.scopes.append(Scope(node, "class"))
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._definition(stmt)
            elif isinstance(stmt, ast.ClassDef):
                self._class_at_import(stmt)
            elif has_call(stmt):
                self.visit(stmt)
        self.scopes.pop()

    def _arguments(self, node: ast.AST) -> None:
        a = node.args
        for expr in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            self.visit(expr)
        self._annotations(node)

    def _annotations(self, node: ast.AST) -> None:
        """A definition's annotations, as far as they run: one with a call runs when the definition does,
        and a string one is code that typing's evaluation runs (functools.singledispatch's register does)."""
        a = node.args
        found = [arg.annotation for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                 if arg is not None and arg.annotation is not None]
        found += [node.returns] if getattr(node, "returns", None) is not None else []
        for annotation in found:
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                try:
                    code = ast.parse(annotation.value.strip(), mode="eval").body
                except (SyntaxError, ValueError):
                    continue
                for sub in ast.walk(code):
                    ast.copy_location(sub, annotation)
                self.visit(code)
            elif has_call(annotation):
                self.visit(annotation)

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
        self.unit.hits.append(Hit(group, self.unit.filename, getattr(node, "lineno", self.unit.line), code))

    def _write(self, module_name: str, name: str) -> None:
        """This unit stores into a module-level name: reaching that name reaches this unit."""
        module = self.program.modules.get(module_name)
        if module is not None:
            self.program.bind(module, name, self.unit.key)

    # ------------------------------------------------------------ names
    def _local(self, name: str) -> Scope | None:
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
                return self.program.resolve(self.program.absolute(self.module, scope.imports[name]))
            return [("local", scope)]
        out = self.program.lookup(self.module, name, [])
        if out:
            return out
        for star in self.module.stars:
            if star not in self.program.modules:
                out.append(("ext", f"{star}.{name}", "star"))
        return [*out, ("builtin", name)]

    def _check_dotted(self, dotted: str, node: ast.AST, star: bool = False, whole: bool = False) -> None:
        """A library name `dotted` (aliases resolved) read at `node`; `whole`: used as a value, not as
        the object of a further attribute or call."""
        parts = dotted.split(".")
        for i in range(2, len(parts) + 1):
            prefix = ".".join(parts[:i])
            for group, names in DOTTED.items():
                if prefix in names:
                    self.hit(group, node)
        if star:  # `from torch import *`: the names it binds, resolved; others are builtins or undefined
            origin = ".".join(parts[:-1])
            if module_allowed(origin) and star_binds(origin, parts[-1]):
                self._resolved(dotted, node, whole)
            elif not module_allowed(origin) and origin.split(".")[0] not in COURSE_MODULES | NUMPY_MODULES \
                    and star_binds(origin, parts[-1]):
                self.hit(EVASION, node, f"{parts[-1]} may come from `from {origin} import *`, and {origin} is not "
                                        f"among the modules a submission may use")
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
        if any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            self.hit(EVASION, node, _PRIVATE_ROOTS.get(root, f"a private name of {root}"))
        if root not in NUMPY_MODULES and root not in COURSE_MODULES:
            self._resolved(dotted, node, whole)

    def _resolved(self, dotted: str, node: ast.AST, whole: bool) -> None:
        """Decide by resolution: what `dotted` is among the real objects, against the allow-list."""
        for group, why in resolve_outside(dotted):
            self.hit(group, node, why)
        if whole and id(node) not in self.not_values and resolves_to_module(dotted):
            self.hit(EVASION, node, f"{dotted} is a module used as a value; call its functions by name")

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
        for p in parts:  # getattr(torch, "__dict__"), methodcaller("__getattribute__", ...)
            if p in _ATTRIBUTES:
                self.hit(EVASION, node, _ATTRIBUTES[p])
                break
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
                self._check_dotted(".".join([kind[1], *attrs]), node, star=len(kind) > 2,
                                   whole=isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load))
            elif kind[0] == "builtin":
                name = kind[1]
                if name in _BUILTINS:
                    self.hit(EVASION, node, _BUILTINS[name])
                elif name in _NAME_ARG:
                    self.hit(EVASION, node, _NAME_ARG[name])


    def _resolve_chain(self, node: ast.AST) -> tuple[ast.AST, list[str], list[tuple]]:
        """(root, attributes, meanings) of `a.b.c`, following student modules' names."""
        root, attrs = chain(node)
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
            self._route_attributes(attrs, node)
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
                self._check_dotted(kind[1], node, star=len(kind) > 2, whole=isinstance(node.ctx, ast.Load))
                if not isinstance(node.ctx, ast.Load) and self._local(root.id) is None:
                    why = store_outside(kind[1])
                    if why:
                        self.hit(EVASION, node, why)
            elif kind[0] == "builtin":
                self._reference([kind], root, [])
        if not kinds or any(k[0] in ("local", "builtin", "bind") for k in kinds):
            self._route_attributes(attrs, node)
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

    def _route_attributes(self, attrs: list[str], node: ast.AST) -> None:
        """Attributes read from an object the check cannot follow that can hold a module running strings."""
        for attr in attrs:
            why = outside_attribute(attr)
            if why:
                self.hit(EVASION, node, why)
                return

    def _store_attribute(self, name: str, attrs: list[str]) -> None:
        """`STATE.fn = g` or `helpers.f = g`: this unit becomes part of that name."""
        for kind in self.meanings(name):
            if kind[0] == "bind":
                self._write(kind[1], kind[2])
            elif kind[0] == "module":
                for where in self.program.resolve(".".join([kind[1], *attrs[:-1]])) if attrs[:-1] else [kind]:
                    if where[0] == "module" and where[1] in self.program.modules:
                        self.program.bind(self.program.modules[where[1]], attrs[-1], self.unit.key)
                    elif where[0] == "bind":
                        self._write(where[1], where[2])

    def _visit_Subscript(self, node: ast.Subscript) -> None:
        key = fold(node.slice)
        if key is not None:
            target = self._dotted_of(node.value)
            self._literal(key, node, importing=target == "sys.modules")
        if not isinstance(node.ctx, ast.Load):
            self._store_into(node.value)
        self.visit(node.value)
        self.visit(node.slice)

    def _store_into(self, target: ast.AST) -> None:
        root, _ = chain(target)
        while isinstance(root, ast.Subscript):
            root, _ = chain(root.value)
        if isinstance(root, ast.Name) and self._local(root.id) is None:
            for kind in self.program.lookup(self.module, root.id, []):
                if kind[0] == "bind":
                    self._write(kind[1], kind[2])

    def _dotted_of(self, node: ast.AST) -> str | None:
        root, attrs = chain(node)
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
            name = fold(node.args[1]) if len(node.args) > 1 else None
            if name is None:
                self.hit(EVASION, node, _NAME_ARG[func.id])
            else:
                self._literal(name, node)
                if func.id == "setattr" and node.args:
                    self._setattr(node.args[0], name)
                self._named_attribute(func.id, node.args[0], name, node)
                self.not_values.add(id(node.args[0]))
        elif dotted in ("operator.attrgetter", "operator.methodcaller"):
            self.done.add(id(func))
            args = node.args if dotted == "operator.attrgetter" else node.args[:1]
            names = [fold(a) for a in args]
            if not names or any(n is None for n in names):
                self.hit(EVASION, node, _NAME_ARG[dotted])
            for name in names:
                if name is not None:
                    self._literal(name, node)
        elif dotted in IMPORT_CALLS:
            for arg in node.args[:1]:
                text = fold(arg)
                if text is not None:
                    self._literal(text, node, importing=True)
        if isinstance(func, ast.Attribute) and func.attr in LOOKUP_METHODS and node.args:
            key = fold(node.args[0])
            if key is not None:
                self._literal(key, node)
        if isinstance(func, ast.Attribute):  # CACHE.append(g): g flows into CACHE
            root, _ = chain(func.value)
            if isinstance(root, ast.Name) and self._local(root.id) is None and node.args + node.keywords:
                for kind in self.program.lookup(self.module, root.id, []):
                    if kind[0] == "bind" and self.program.modules[kind[1]].classes.get(
                            (kind[1], kind[2])) is None:
                        self._write(kind[1], kind[2])
        if isinstance(func, ast.Call) and self._dotted_of(func.func) == "operator.attrgetter" and node.args:
            self._attrgetter_applied(func, node.args[0], node)
        if isinstance(func, ast.Subscript):
            self._launch(func.value)
        if dotted is not None and dotted.split(".")[0] == "triton" and dotted.endswith(".jit"):
            self.unit.makes_kernel = True
        self.generic(node)

    def _named_attribute(self, how: str, target: ast.AST, name: str, node: ast.AST) -> None:
        """`getattr(torch.serialization, "pickle")` is `torch.serialization.pickle`, resolved; a literal name
        that can hold a module running strings is refused on any object, as an attribute would be."""
        if "." in name:
            return  # not an attribute name getattr can read (a literal checked by _literal)
        dotted = self._dotted_of(target)
        if dotted is not None and any(k[0] == "ext" for k in self._resolve_chain(target)[2]):
            if how in ("setattr", "delattr"):
                why = store_outside(f"{dotted}.{name}")
                if why:
                    self.hit(EVASION, node, why)
            else:
                self._check_dotted(f"{dotted}.{name}", node)
        elif how != "hasattr":
            self._route_attributes([name], node)

    def _attrgetter_applied(self, getter: ast.Call, target: ast.AST, node: ast.AST) -> None:
        """`operator.attrgetter("nn.functional.relu")(torch)`: the literal names, resolved on a library object."""
        names = [fold(a) for a in getter.args]
        dotted = self._dotted_of(target)
        if dotted is None or not names or any(n is None for n in names):
            return
        if any(k[0] == "ext" for k in self._resolve_chain(target)[2]):
            self.not_values.add(id(target))
            for name in names:
                self._check_dotted(f"{dotted}.{name}", node)

    def _setattr(self, target: ast.AST, name: str) -> None:
        root, attrs = chain(target)
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
        base = self.program.absolute(self.module, "." * node.level + (node.module or ""))
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
        if not student or installed(parts[0]):
            self._check_imported(dotted, node)

    def _check_imported(self, dotted: str, node: ast.AST) -> None:
        """An import of something that is not the student's: what running the import itself does.

        Evasion modules (inspect, torch._C, ...) count where their names are used, not here:
        importing them does nothing, and an unused import must not cost a task."""
        root = dotted.split(".")[0]
        if root in COURSE_MODULES:
            self.hit(COURSE_CODE, node)
            return
        if not self.program.student_module(root) and not installed(root):
            self.hit(EVASION, node, f"{root} is neither one of your files nor an installed library")

    def _nested(self, node: ast.AST, kind: str) -> None:
        self.scopes.append(Scope(node, kind))
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
