"""The consistency checks `grade validate` runs first, in seconds, before any grading.

An assignment states each fact once and the rest is derived or checked here: task ids, function
names and points live in the manifest; a function's parameters in its stub; quiz ids in quiz.toml;
the lecture's sections in the course's section list. Each check reads the files (as syntax trees,
or pytest's collection) and says what disagrees, where, and how to fix it:

* **signatures**: every function a task names is in the stubs and the reference, with the same
  parameters (names, kinds, defaults, annotations); so are the given helpers and the kernels both
  define; each stub raises NotImplementedError first (or says it is given) and cites a section;
* **test calls**: what the hidden and public tests pass each function (`check.close("f", x,
  dim=0)`) is what its stub takes, and names a function some task owns;
* **tests and tasks**: every test names one task of the manifest; every task with tests to pass has
  hidden tests, and every code task a public test;
* **quiz**: quiz.toml, the key, the blank answers template and the reference's answers agree;
* **sections**: every "§N" cited anywhere in the assignment is a section of the lecture;
* **reference calls**: no reference function calls another task's function (a mutant of that one
  would cost points on both tasks);
* **mutants**: ids unique, each owned by a task, its parameters the reference's, its names both the
  reference module's (validate runs it there) and the catalogue module's (the diagnosis runs it
  there), its patch applying once, and never the reference's own code;
* **handout**: the handout's points table says what the manifest says.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.authoring import authored_source as source
from grader.authoring.authored_source import Function, Signature
from grader.core.assignment import Assignment
from grader.core.compat import tomllib
from grader.core.errors import GraderError
from grader.core.handout import table_problems
from grader.core.lecture import citations, describe_range, load_sections
from grader.core.manifest import Manifest, Task
from grader.core.quiz import ANSWERS_FILE, grade_quiz, load_key, load_questions
from grader.harness.catalogue import Mutant

HANDOUT = "README.md"
GIVEN_MARK = "given; do not change"


def tolerates_others(task: Task) -> bool:
    """Tasks built on other tasks' functions by design (a bonus, a timed kernel): a mistake in those may
    cost points there too (grader.authoring.validate judges mutants the same way)."""
    return task.bonus or task.kind == "timing"


@dataclass(frozen=True)
class Check:
    """One consistency check: what it checked (`name`), and each problem it found with its fix."""

    name: str
    problems: tuple[str, ...]
    passed: str  # what holds, when nothing is wrong
    suite: str = "static"

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def detail(self) -> str:
        return "; ".join(self.problems) if self.problems else self.passed


@dataclass
class Authored:
    """An assignment's files, parsed once for every check."""

    assignment: Assignment
    stubs: dict[str, ast.Module | None] = field(default_factory=dict)  # manifest file → tree
    references: dict[str, ast.Module | None] = field(default_factory=dict)

    @classmethod
    def read(cls, assignment: Assignment) -> Authored:
        files = assignment.manifest.files
        return cls(assignment, {f: source.parse(assignment.folder / f) for f in files},
                   {f: source.parse(assignment.reference / f) for f in files})

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.assignment.course.root).as_posix()
        except ValueError:
            return str(path)

    def defined(self, trees: dict[str, ast.Module | None]) -> dict[str, tuple[str, Function]]:
        """function name → (file, definition), over the manifest's files."""
        found = {}
        for filename, tree in trees.items():
            for name, node in (source.top_functions(tree) if tree else {}).items():
                found.setdefault(name, (filename, node))
        return found

    def contract_signatures(self) -> dict[str, Signature]:
        """The kernel contract's launchers, from the course's launcher module."""
        module = self.assignment.contract_module
        tree = source.parse(module) if module else None
        if tree is None:
            return {}
        launchers = set(self.assignment.manifest.contract.launcher_names)
        return {name: source.signature(node) for name, node in source.top_functions(tree).items()
                if name in launchers}

    def test_files(self, folder: Path) -> list[Path]:
        return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts) if folder.is_dir() else []


# ------------------------------------------------------------------------------ signatures
def signature_problems(authored: Authored) -> list[str]:
    manifest = authored.assignment.manifest
    problems = [f"{authored.rel(authored.assignment.folder / f)}: not valid Python (or missing)"
                for f, tree in authored.stubs.items() if tree is None]
    problems += [f"{authored.rel(authored.assignment.reference / f)}: not valid Python (or missing)"
                 for f, tree in authored.references.items() if tree is None]
    stubs, references = authored.defined(authored.stubs), authored.defined(authored.references)
    kernels = set(manifest.contract.kernels) if manifest.contract else set()
    for task in manifest.tasks:
        for name in task.functions:
            if manifest.is_launcher(name):
                continue
            for what, found, folder in (("stub", stubs, authored.assignment.folder),
                                        ("reference", references, authored.assignment.reference)):
                if name not in found:
                    problems.append(f"task {task.id} names {name}, which no {what} module defines "
                                    f"({', '.join(authored.rel(folder / f) for f in manifest.files)}): "
                                    f"define it there, or fix the manifest's functions")
    compared = [n for n in stubs if n in references and (n in manifest.functions or n in kernels
                                                           or not n.startswith("_"))]
    for name in compared:
        (stub_file, stub), (ref_file, ref) = stubs[name], references[name]
        mine, theirs = source.signature(stub), source.signature(ref)
        if mine.parameters != theirs.parameters:
            problems.append(f"{authored.rel(authored.assignment.folder / stub_file)}:{stub.lineno}: the stub is "
                            f"{mine.text()}, the reference ({authored.rel(authored.assignment.reference / ref_file)}:"
                            f"{ref.lineno}) is {theirs.text()}: give both the same parameters")
    for name in manifest.functions:
        if name not in stubs or manifest.is_launcher(name):
            continue
        filename, stub = stubs[name]
        where = f"{authored.rel(authored.assignment.folder / filename)}:{stub.lineno}"
        given = GIVEN_MARK in " ".join(source.docstring(stub).lower().split())
        message = source.not_implemented_message(stub)
        task = manifest.task_for_function(name)
        if not given and message is None:
            problems.append(f"{where}: the stub of {name} must raise NotImplementedError first (or its docstring "
                            f"say 'Given; do not change.'), so that the untouched starter earns 0")
        elif not given and task is not None and task.id not in (message or ""):
            problems.append(f"{where}: the stub of {name} raises NotImplementedError without its task's id: write "
                            f"raise NotImplementedError({task.id!r}), so plain pytest says which task to do")
        if "§" not in source.docstring(stub):
            problems.append(f"{where}: the docstring of {name} cites no lecture section (§N): say where to read")
    return problems


# ------------------------------------------------------------------------------ test calls
def call_problems(authored: Authored) -> list[str]:
    manifest = authored.assignment.manifest
    stubs = {name: source.signature(node) for name, (_, node) in authored.defined(authored.stubs).items()}
    references = {name: source.signature(node) for name, (_, node) in authored.defined(authored.references).items()}
    launchers = authored.contract_signatures()
    problems = []
    for folder in (authored.assignment.hidden_tests, authored.assignment.public_tests):
        for path in authored.test_files(folder):
            for call in source.test_calls(path, authored.rel(path)):
                where = f"{call.path}:{call.line}"
                if call.how == "reference":
                    target = references.get(call.function) or launchers.get(call.function)
                    if target is None:
                        problems.append(f"{where}: check.reference.{call.function} is not a function of the "
                                        f"reference modules")
                        continue
                    problems += [f"{where}: check.reference.{call.function} {p}"
                                 for p in source.call_problems(call, target)]
                    continue
                if call.function in launchers:
                    target = launchers[call.function]
                elif manifest.task_for_function(call.function) is None and call.function not in stubs:
                    problems.append(f"{where}: check.{call.how}({call.function!r}, ...) names a function no task "
                                    f"owns (functions: {', '.join(manifest.functions)}): fix the name, or add it to "
                                    f"a task's functions in the manifest")
                    continue
                else:
                    target = stubs.get(call.function) or references.get(call.function)
                    if target is None:
                        continue  # reported by the signature check
                problems += [f"{where}: check.{call.how}({call.function!r}, ...) {p}"
                             for p in source.call_problems(call, target)]
    return problems


# ------------------------------------------------------------------------------ tests and tasks
def collected(assignment: Assignment) -> dict[str, tuple[dict[str, str], list[str]]]:
    """hidden/public → (test name → task, collection problems), by pytest's own collection (nothing runs)."""
    from grader.harness.suite import collected_tasks

    found = {}
    for suite, folder in (("hidden", assignment.hidden_tests), ("public", assignment.public_tests)):
        found[suite] = collected_tasks(folder, assignment.manifest)
    return found


def coverage_problems(manifest: Manifest, suites: dict[str, tuple[dict[str, str], list[str]]]) -> list[str]:
    problems = []
    hidden = set(suites["hidden"][0].values())
    public = set(suites["public"][0].values())
    for task in manifest.tasks:
        if task.kind != "quiz" and task.id not in hidden:
            problems.append(f"task {task.id} has no hidden test, so nothing grades it: add a test marked "
                            f"@pytest.mark.task({task.id!r}) under reference/{manifest.id}/tests/")
        if task.kind == "code" and task.id not in public:
            problems.append(f"task {task.id} has no public test, so grade check says nothing about it: add one "
                            f"marked @pytest.mark.task({task.id!r}) under assignments/{manifest.id}/tests/")
    return problems


# ------------------------------------------------------------------------------ quiz
def _toml(path: Path, problems: list[str], rel: Callable[[Path], str]) -> dict | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError:
        problems.append(f"{rel(path)}: missing")
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{rel(path)}: not valid TOML ({exc})")
    return None


def quiz_problems(authored: Authored) -> list[str]:
    assignment = authored.assignment
    quiz_tasks = [t for t in assignment.manifest.tasks if t.kind == "quiz"]
    if not quiz_tasks:
        return []
    problems: list[str] = []
    rel = authored.rel
    quiz = _toml(assignment.quiz_questions, problems, rel)
    key = _toml(assignment.quiz_key, problems, rel)
    template = _toml(assignment.folder / ANSWERS_FILE, problems, rel)
    reference_answers = assignment.reference / ANSWERS_FILE  # optional: makes reference/<id>/ a whole submission
    if reference_answers.is_file():
        _toml(reference_answers, problems, rel)
    if problems:
        return problems
    questions = [q for q in quiz.get("questions", []) if isinstance(q, dict)]
    ids = [q.get("id") for q in questions]
    quiz_ids = set(ids)
    if len(ids) != len(quiz_ids):
        problems.append(f"{rel(assignment.quiz_questions)}: question ids repeat: "
                        f"{sorted({i for i in ids if ids.count(i) > 1})}")
    answers, explanations = key.get("answers", {}), key.get("explanations", {})
    template = template.get("answers", template)
    for what, table, path in (("the key's [answers]", answers, assignment.quiz_key),
                              ("the key's [explanations]", explanations, assignment.quiz_key),
                              ("the blank answers template", template, assignment.folder / ANSWERS_FILE)):
        extra, missing = sorted(set(table) - quiz_ids), sorted(quiz_ids - set(table))
        if extra:
            problems.append(f"{rel(path)}: {what} answers question(s) the quiz does not have: {', '.join(extra)} "
                            f"(the quiz's ids: {', '.join(sorted(map(str, quiz_ids)))})")
        if missing:
            problems.append(f"{rel(path)}: {what} lacks question(s) {', '.join(missing)}")
    if any(value != "" for value in template.values()):
        problems.append(f"{rel(assignment.folder / ANSWERS_FILE)}: the template must leave every answer blank (\"\")")
    for question in questions:
        qid, kind, answer = question.get("id"), question.get("kind"), answers.get(question.get("id"))
        if not str(question.get("section", "")).startswith("§"):
            problems.append(f"{rel(assignment.quiz_questions)}: question {qid} cites no lecture section "
                            f"(section = \"§N\")")
        if answer is None:
            continue
        if kind == "choice" and not (isinstance(answer, int) and not isinstance(answer, bool)
                                     and 0 <= answer < len(question.get("choices", []))):
            problems.append(f"{rel(assignment.quiz_key)}: {qid} is a choice question; its answer must be the index "
                            f"of a choice (0 to {len(question.get('choices', [])) - 1}), not {answer!r}")
        elif kind == "numeric" and not (isinstance(answer, dict) and "value" in answer
                                        and answer.get("tolerance", -1) >= 0):
            problems.append(f"{rel(assignment.quiz_key)}: {qid} is numeric; its answer must be "
                            f"{{ value = ..., tolerance = ... }} (tolerance >= 0), not {answer!r}")
    if problems:
        return problems
    loaded, expected = load_questions(assignment.quiz_questions), load_key(assignment.quiz_key)
    if reference_answers.is_file():
        wrong = [o.name for o in grade_quiz(loaded, expected, reference_answers.read_text(encoding="utf-8"))
                 if o.status != "passed"]
        if wrong:
            problems.append(f"{rel(reference_answers)}: the reference's answers are not the key's for "
                            f"{', '.join(wrong)} (they make reference/{assignment.id}/ a complete submission)")
    blank = (assignment.folder / ANSWERS_FILE).read_text(encoding="utf-8")
    if any(o.status == "passed" for o in grade_quiz(loaded, expected, blank)):
        problems.append(f"{rel(assignment.folder / ANSWERS_FILE)}: the blank template earns points")
    return problems


# ------------------------------------------------------------------------------ sections
def cited_files(assignment: Assignment) -> list[Path]:
    """Every file of the assignment that may cite the lecture (both folders, but caches)."""
    found = []
    for folder in (assignment.folder, assignment.reference):
        if folder.is_dir():
            found += sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".toml", ".md")
                            and "__pycache__" not in p.parts and "similarity_sources" not in p.parts)
    return found


def section_problems(authored: Authored, sections: dict[int, str]) -> list[str]:
    problems = []
    known = describe_range(sections)
    for path in cited_files(authored.assignment):
        text = path.read_text(encoding="utf-8", errors="replace")
        for citation in citations(text, authored.rel(path)):
            if citation.section not in sections:
                problems.append(f"{citation.describe()}, which the lecture does not have (it has {known})")
    return problems


# ------------------------------------------------------------------------------ reference calls
def reference_call_problems(authored: Authored) -> list[str]:
    manifest = authored.assignment.manifest
    problems = []
    for filename, tree in authored.references.items():
        if tree is None:
            continue
        functions = source.top_functions(tree)
        for task in manifest.tasks:
            if tolerates_others(task):
                continue
            for name in task.functions:
                if name not in functions:
                    continue
                for called, path in source.reaches(name, functions).items():
                    owner = manifest.task_for_function(called)
                    if owner is None or owner.id == task.id:
                        continue
                    node = functions[path[-2]]
                    via = " → ".join(path)
                    problems.append(
                        f"{authored.rel(authored.assignment.reference / filename)}:{node.lineno}: the reference's "
                        f"{name} (task {task.id}) calls {called}, the function of task {owner.id} ({via}), so every "
                        f"mutant of {called} also costs points on {task.id}. Move what {called} computes into a "
                        f"private helper (_{called.lstrip('_')}) that both functions call")
    return problems


# ------------------------------------------------------------------------------ mutants
def mutant_problems(authored: Authored, mutants: list[Mutant]) -> list[str]:
    assignment = authored.assignment
    manifest = assignment.manifest
    problems = []
    ids = [m.id for m in mutants]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        problems.append(f"mutant id(s) registered more than once: {', '.join(repeated)}")
    references = authored.defined(authored.references)
    catalogue = authored.rel(assignment.reference / "mutants.py")
    for mutant in mutants:
        line = mutant.fn.__code__.co_firstlineno
        where = f"{catalogue}:{line}: mutant {mutant.id}"
        if manifest.task_for_function(mutant.function) is None:
            problems.append(f"{where} replaces {mutant.function}, which no task owns (functions: "
                            f"{', '.join(manifest.functions)})")
            continue
        missing = [what for what in ("title", "section", "explanation") if not getattr(mutant, what).strip()]
        if missing:
            problems.append(f"{where} has no {', '.join(missing)}: the feedback a student reads is made of them")
        problems += _catalogue_name_problems(mutant, where, catalogue)
        if mutant.patch:
            problems += _patch_problems(authored, mutant, where)
            continue
        if mutant.function not in references:
            continue  # reported by the signature check
        filename, reference = references[mutant.function]
        node = _mutant_node(mutant)
        if node is None:
            continue
        mine, theirs = source.signature(node), source.signature(reference)
        if mine.names != theirs.names:
            problems.append(f"{where} takes ({', '.join(mine.names)}) but {mutant.function} takes "
                            f"({', '.join(theirs.names)}): keep the student function's parameters")
        if source.same_code(node, reference):
            problems.append(f"{where} is the reference's own {mutant.function} (the same code once names and layout "
                            f"are set aside): no test can catch it. Write the mistake it names "
                            f"({mutant.title!r}), or remove it")
        unknown = sorted(source.free_names(node) - source.module_names(authored.references[filename])
                         - source.BUILTINS)
        if unknown:
            problems.append(f"{where} uses {', '.join(unknown)}, which reference/{assignment.id}/{filename} does not "
                            f"define: grade validate runs the mutant inside that module, so define them there "
                            f"(a private helper) or write them out in the mutant")
    return problems


def _catalogue_name_problems(mutant: Mutant, where: str, catalogue: str) -> list[str]:
    """The diagnosis runs `mutant.fn` in the catalogue module itself (its globals, plus the `vary` names): a
    name the body reads that the module neither defines nor imports raises NameError there, and the mutant
    can never be named, whatever validate (which runs it inside the reference module) saw."""
    node = _mutant_node(mutant)
    if node is None:
        return []
    known = set(mutant.fn.__globals__) | {name for name, _ in mutant.vary} | source.BUILTINS
    unknown = sorted(source.free_names(node) - known)
    if not unknown:
        return []
    return [f"{where} uses {', '.join(unknown)}, which {catalogue} neither defines nor imports: the diagnosis runs "
            f"the mutant there and would stop on a NameError, so no student with this mistake is told of it. "
            f"Import {'them' if len(unknown) > 1 else 'it'} in {catalogue} (e.g. from the reference module)"]


def _mutant_node(mutant: Mutant) -> Function | None:
    try:
        tree = ast.parse(mutant.source())
    except SyntaxError:
        return None
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)


def _patch_problems(authored: Authored, mutant: Mutant, where: str) -> list[str]:
    from grader.authoring.workspaces import defining_file, patched

    assignment = authored.assignment
    try:
        filename = defining_file(assignment.manifest, assignment.reference, mutant.function)
        text = (assignment.reference / filename).read_text(encoding="utf-8")
        changed = patched(mutant, text, filename)
    except (OSError, ValueError) as exc:
        return [f"{where}: {exc}"]
    try:
        same = ast.dump(ast.parse(changed)) == ast.dump(ast.parse(text))
    except SyntaxError as exc:
        return [f"{where}: its patch leaves {filename} unparsable ({exc.msg}, line {exc.lineno})"]
    if same:
        return [f"{where}'s patch leaves the reference's code as it is (only layout or comments change): no test can "
                f"catch it. Patch in the mistake it names ({mutant.title!r}), or remove it"]
    return []


# ------------------------------------------------------------------------------ all of them
def consistency_checks(assignment: Assignment, mutants: list[Mutant]) -> list[Check]:
    """Every consistency check of `assignment` (with its catalogue, already loaded), in order."""
    authored = Authored.read(assignment)
    manifest = assignment.manifest
    checks = [Check("signatures", tuple(signature_problems(authored)),
                    "stubs and reference define every task's function with the same parameters; each stub "
                    "raises NotImplementedError and cites a section"),
              Check("test calls", tuple(call_problems(authored)),
                    "every call the tests make names a task's function with parameters its stub takes")]
    suites = collected(assignment)
    for suite in ("hidden", "public"):
        tasks, problems = suites[suite]
        checks.append(Check(f"{suite} tests", tuple(problems),
                            f"all {len(tasks)} {suite} tests collect and name one task of the manifest", suite))
    checks.append(Check("tests and tasks", tuple(coverage_problems(manifest, suites)),
                        "every task has hidden tests and every code task a public test"))
    if any(t.kind == "quiz" for t in manifest.tasks):
        checks.append(Check("quiz", tuple(quiz_problems(authored)),
                            "quiz, key, blank template and the reference's answers agree"))
    checks.append(_sections_check(authored))
    checks.append(Check("reference calls", tuple(reference_call_problems(authored)),
                        "no reference function calls another task's function"))
    checks.append(Check("mutants", tuple(mutant_problems(authored, mutants)),
                        f"{len(mutants)} mutant(s), each a task function's mistake with its parameters"))
    handout = assignment.folder / HANDOUT
    if handout.is_file():
        parameters = {name: source.signature(node).names
                      for name, (_, node) in authored.defined(authored.stubs).items()}
        problems, tables = table_problems(handout.read_text(encoding="utf-8"), manifest, parameters,
                                          authored.rel(handout))
        checks.append(Check("handout", tuple(problems), "the handout's points table agrees with the manifest"
                            if tables else "the handout has no points table (points are stated in the manifest only)"))
    return checks


def _sections_check(authored: Authored) -> Check:
    settings = authored.assignment.settings.lecture
    course = authored.assignment.course
    if not settings.sections:
        return Check("sections", (), "not checked: the course declares no lecture section list (course.toml: "
                                     "[lecture] sections = \"lecture/sections.toml\")")
    try:
        sections = load_sections(course.root / settings.sections)
    except GraderError as exc:
        return Check("sections", (str(exc),), "")
    return Check("sections", tuple(section_problems(authored, sections)),
                 f"every § cited is a section of the lecture ({describe_range(sections)})")
