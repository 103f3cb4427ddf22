"""The student bundle: `assignments/<id>/` alone, as a zip and a notebook.

The layout already keeps instructor material out (the bundle is built from
one folder), but a file can be copied into the wrong folder by hand. So
before anything is written, every bundled file is checked against every
file under `reference/<id>/` and `course_kernels/`:
- same bytes (sha256), or the same text once whitespace, blank lines and
  comments are dropped;
- a function or class of an instructor `.py` file (one that does something:
  not only a docstring, `pass`, `...` or `raise NotImplementedError`) found
  inside a bundled file;
- the same meaning in another layout (grader/ship/leaks.py): a bundled `.py`
  module, function or class whose syntax tree matches an instructor one
  once layout, docstrings, annotations and names are set aside; a bundled
  `.toml` with the same data as an instructor one, the answers of a quiz
  key (in any quoting, order or table), or a long text of an instructor
  TOML (an explanation). A bundled definition whose docstring says "Given;
  do not change" is a helper shipped on purpose and exempt from the
  syntax-tree comparison (the byte and text checks still apply);
- but a public file may state what the handout states: a one-line definition
  computing a formula the README or a stub's docstring writes as code is no
  leak (grader/ship/leaks.py, `states_formula`);
- names that are instructor-only wherever they are (`quiz_key.toml`,
  `*_key.toml`, `mutants.py`), test files outside `tests/`, and symlinks.
Any hit raises ReleaseLeak (exit code 3) naming every problem, each with the
instructor file it comes from and what that file is (a hidden test file, the
mistake catalogue, the quiz key, the reference solution, a kernel), and nothing
is written.

Then the starter itself must be blank (`pristine_problems`): every function a
task names is in the manifest's files and still raises NotImplementedError
first (unless its docstring says it is given), and every answer in
`answers.toml` is "". A solved stub or a filled-in answer raises
StarterNotPristine (exit code 3), naming each function and question.

The bundle is made to work on its own, away from the course: it carries the
manifest, the stubs and the public tests, `grade check` and the pytest plugin
recognise an unzipped bundle (grader.core.course.find_course), and the README
in the zip ends with how to work from that folder.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import nbformat

from grader.authoring.authored_source import is_stub, not_implemented_message
from grader.core.assignment import Assignment
from grader.core.compat import tomllib
from grader.core.errors import ReleaseLeak, StarterNotPristine
from grader.core.files import SKIPPED_PARTS, write_atomic, zip_bytes
from grader.core.manifest import Manifest
from grader.core.quiz import ANSWERS_FILE
from grader.intake.notebook import ANSWERS_TAG
from grader.ship import leaks

INSTRUCTOR_ONLY_NAMES = {"quiz_key.toml", "mutants.py"}
TEST_FILE = re.compile(r"^(test_.*|.*_test|conftest)\.py$")


@dataclass(frozen=True)
class Release:
    zip_path: Path
    notebook_path: Path
    files: tuple[str, ...]
    install: str = ""  # the command the bundle's README gives for installing the grader
    install_configured: bool = False  # from course.toml's [release] install, or the default


def bundle_files(assignment: Assignment) -> dict[str, bytes]:
    """relative path → bytes of everything students get; symlinks are a leak risk, refused."""
    root, assignment_id = assignment.folder, assignment.id
    files: dict[str, bytes] = {}
    links = []
    for item in sorted(root.rglob("*")):
        relative = item.relative_to(root)
        if any(part in SKIPPED_PARTS for part in relative.parts):
            continue
        if item.is_symlink():
            links.append(relative.as_posix())
        elif item.is_file():
            files[relative.as_posix()] = item.read_bytes()
    if links:
        raise ReleaseLeak(f"refusing to release {assignment_id}: symbolic link(s) {', '.join(links)} "
                          f"could point at instructor files; replace them with real files")
    return files


def normalise(text: str) -> str:
    """Text with indentation, blank lines and whole-line comments dropped."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("#"))


def _definitions(text: str, formulas: set[str]) -> list[tuple[str, str]]:
    """(name, normalised source) of each top-level function and class that does something, but a formula
    the handout states."""
    tree = leaks.parse_python(text)
    if tree is None:
        return []
    lines = text.splitlines()
    return [(node.name, normalise("\n".join(lines[node.lineno - 1:node.end_lineno])))
            for node in tree.body if isinstance(node, leaks.DEFINITIONS) and not is_stub(node)
            and not leaks.states_formula(node, formulas)]


def instructor_files(assignment: Assignment) -> dict[str, bytes]:
    """Every file under reference/<id>/ and course_kernels/ (display path → bytes)."""
    course = assignment.course
    found = {}
    for folder in (assignment.reference, course.kernels_dir):
        if not folder.is_dir():
            continue
        for item in sorted(folder.rglob("*")):
            if item.is_file() and "__pycache__" not in item.parts:
                found[item.relative_to(course.root).as_posix()] = item.read_bytes()
    return found


def _python_index(texts: dict[str, str]) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """Instructor .py files: module shape → file, and definition shape → (file, kind, name)."""
    modules: dict[str, str] = {}
    shapes: dict[str, tuple[str, str, str]] = {}
    for name, text in texts.items():
        tree = leaks.parse_python(text) if name.endswith(".py") else None
        if tree is None:
            continue
        if leaks.has_substance(tree):
            module_shape = leaks.safe_shape(tree)
            if module_shape:
                modules.setdefault(module_shape, name)
        for node in leaks.definitions(tree):
            node_shape = leaks.safe_shape(node)
            if node_shape:
                shapes.setdefault(node_shape, (name, leaks.kind_of(node), node.name))
    return modules, shapes


def _toml_index(instructor: dict[str, bytes]) -> list[leaks.TomlFile]:
    found = []
    for name, data in instructor.items():
        document = leaks.parse_toml(data) if name.endswith(".toml") else None
        if document:
            key = leaks.quiz_key_answers(document) if PurePosixPath(name).name.endswith("_key.toml") else {}
            found.append(leaks.TomlFile(name, document, key, leaks.long_texts(document)))
    return found


def _from(source_name: str) -> str:
    """'reference/x/tests/test_y.py, a hidden test file': the instructor file and what it is."""
    return f"{source_name}, {leaks.role_of(source_name)}"


def _only_definitions(tree: ast.Module) -> bool:
    """A module of imports, a docstring and definitions only (nothing else runs when it is imported)."""
    return all(isinstance(node, (ast.Import, ast.ImportFrom, *leaks.DEFINITIONS)) or
               (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) for node in tree.body)


def _python_leaks(path: str, text: str, modules: dict, shapes: dict, reported: set, formulas: set[str]) -> list[str]:
    tree = leaks.parse_python(text)
    if tree is None:
        return []
    stated = all(leaks.states_formula(node, formulas) for node in tree.body
                 if isinstance(node, leaks.DEFINITIONS) and not is_stub(node))
    if leaks.has_substance(tree) and leaks.safe_shape(tree) in modules and not (stated and _only_definitions(tree)):
        return [f"{path}: same code as {_from(modules[leaks.safe_shape(tree)])} (compared as syntax trees)"]
    problems = []
    for node in leaks.definitions(tree):
        if leaks.is_given(node) or leaks.states_formula(node, formulas):  # shipped on purpose, or the handout's
            continue
        match = shapes.get(leaks.safe_shape(node) or "")
        if match is None or (match[0], match[2]) in reported:
            continue
        reported.add((match[0], match[2]))
        source_name, kind, what = match
        renamed = "" if node.name == what else f" (renamed {node.name})"
        problems.append(f"{path}: contains {kind} {what} from {_from(source_name)}{renamed}, "
                        f"the same code in another layout")
    return problems


def _toml_leaks(path: str, data: bytes, tomls: list[leaks.TomlFile], questions: dict) -> list[str]:
    document = leaks.parse_toml(data)
    if not document:
        return []
    problems = []
    for instructor in tomls:
        if document == instructor.data:
            problems.append(f"{path}: same TOML data as {_from(instructor.name)}")
            continue
        answered = leaks.answers_given(document, instructor.key, questions) if instructor.key else []
        if answered:
            problems.append(f"{path}: carries the answers of {_from(instructor.name)}, to {len(answered)} of "
                            f"{len(instructor.key)} question(s) ({', '.join(answered)})")
        elif instructor.texts and leaks.texts_found(document, instructor.texts):
            problems.append(f"{path}: carries text from {_from(instructor.name)}")
    return problems


def stated_formulas(bundle: dict[str, bytes]) -> set[str]:
    """What the bundle's handout states as code: its README and the docstrings of its modules (not tests)."""
    stubs = [data.decode("utf-8", errors="replace") for path, data in bundle.items()
             if path.endswith(".py") and not TEST_FILE.match(PurePosixPath(path).name)
             and PurePosixPath(path).parts[0] != "tests"]
    return leaks.handout_formulas(bundle.get("README.md", b"").decode("utf-8", errors="replace"), stubs)


def find_leaks(bundle: dict[str, bytes], instructor: dict[str, bytes]) -> list[str]:
    """Every reason the bundle must not ship (empty when it is clean): the reference's behaviour (hidden
    test bodies, mutants, the quiz key, reference functions the handout does not state), each named with
    the instructor file it comes from."""
    problems = []
    by_hash = {hashlib.sha256(data).hexdigest(): name for name, data in instructor.items() if data.strip()}
    texts = {name: data.decode("utf-8", errors="replace") for name, data in instructor.items()}
    by_text = {normalise(text): name for name, text in texts.items() if normalise(text)}
    formulas = stated_formulas(bundle)
    definitions = [(name, what, source) for name, text in texts.items() if name.endswith(".py")
                   for what, source in _definitions(text, formulas)]
    modules, shapes = _python_index({n: t for n, t in texts.items() if n.endswith(".py")})
    tomls = _toml_index(instructor)
    questions = leaks.questions_of(leaks.parse_toml(bundle.get("quiz.toml", b"")))
    for path, data in sorted(bundle.items()):
        pure = PurePosixPath(path)
        if pure.name in INSTRUCTOR_ONLY_NAMES or pure.name.endswith("_key.toml"):
            problems.append(f"{path}: instructor-only file name")
        if TEST_FILE.match(pure.name) and pure.parts[0] != "tests":
            problems.append(f"{path}: a test file outside tests/ (hidden tests live in reference/)")
        digest = hashlib.sha256(data).hexdigest()
        if digest in by_hash:
            problems.append(f"{path}: same bytes as {_from(by_hash[digest])}")
            continue
        decoded = data.decode("utf-8", errors="replace")
        text = normalise(decoded)
        if text and text in by_text:
            problems.append(f"{path}: same text as {_from(by_text[text])}")
            continue
        reported: set[tuple[str, str]] = set()
        for source_name, what, source in definitions:
            if source and source in text:
                problems.append(f"{path}: contains {what} from {_from(source_name)}")
                reported.add((source_name, what))
        if pure.suffix == ".py":
            problems += _python_leaks(path, decoded, modules, shapes, reported, formulas)
        elif pure.suffix == ".toml":
            problems += _toml_leaks(path, data, tomls, questions)
    return problems


def _blank_answers(data: bytes) -> tuple[list[str], str]:
    """(questions with an answer, a problem reading the file) of an answers.toml."""
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [], f"{ANSWERS_FILE}: not valid TOML ({exc}); ship the blank answers file"
    answers = document.get("answers", document)
    if not isinstance(answers, dict):
        return [], f"{ANSWERS_FILE}: has no table of answers"
    return sorted(name for name, value in answers.items() if value != ""), ""


def pristine_problems(bundle: dict[str, bytes], manifest: Manifest) -> list[str]:
    """Why the bundle's starter is not blank (empty when it is): each task function that is missing
    or does not raise NotImplementedError first, a kernel contract's missing launcher module, and
    each answered question of answers.toml."""
    problems = []
    defined: dict[str, tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    every_module_read = True
    for module in manifest.files:
        tree = leaks.parse_python(bundle[module].decode("utf-8", errors="replace")) if module in bundle else None
        if tree is None:
            every_module_read = False
            problems.append(f"{module}: missing (the manifest lists it among the student's files)"
                            if module not in bundle else f"{module}: not valid Python")
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                defined[node.name] = (module, node)
    if manifest.contract is not None and manifest.contract.module not in bundle:
        problems.append(f"{manifest.contract.module}: missing (the kernel contract: how the grader launches the "
                        f"students' kernels)")
    for name in manifest.functions:
        if manifest.is_launcher(name):  # the course's launcher, in the contract module: no student stub
            continue
        if name not in defined:
            if every_module_read:
                problems.append(f"{name}: no stub in {', '.join(manifest.files)} (a task names it)")
            continue
        module, node = defined[name]
        if leaks.is_given(node) or not_implemented_message(node) is not None:
            continue
        what = "does not raise NotImplementedError" if is_stub(node) else "has a body"
        problems.append(f"{module}: {name} {what}; its stub must raise NotImplementedError first "
                        f"(or its docstring say it is given: 'Given; do not change.')")
    if ANSWERS_FILE in bundle:
        answered, problem = _blank_answers(bundle[ANSWERS_FILE])
        if problem:
            problems.append(problem)
        problems += [f"{ANSWERS_FILE}: {name} is answered; every answer must be blank (\"\")" for name in answered]
    return problems


def readme_for_bundle(assignment_id: str, handout: bytes | None, install: str | None = None) -> bytes:
    """The handout, followed by how to work from the unzipped folder alone; `install`: the command that
    installs the grader (default: the course settings' default, grader.core.settings.default_install)."""
    from grader.core.settings import default_install

    text = (handout or f"# {assignment_id}\n".encode()).decode("utf-8", errors="replace").rstrip()
    return (text + "\n\n" + BUNDLE_README.format(assignment=assignment_id, install=install or default_install(),
                                                 cpu_torch=CPU_TORCH)).encode()


CPU_TORCH = "python -m pip install torch --index-url https://download.pytorch.org/whl/cpu"

BUNDLE_README = """## Working from this folder

This folder is complete on its own: the manifest (`assignment.toml`), your
starter files, the quiz (`quiz.toml`, answered in `answers.toml` where the
assignment has one) and the public tests (`tests/`).

1. Install the grader once, with Python 3.10 or newer (Linux; on Windows, in
   WSL). It provides the `grade` command and the pytest plugin the tests use.
   In this folder:

   ```bash
   python -m venv .venv && . .venv/bin/activate
   nvidia-smi >/dev/null 2>&1 || {cpu_torch}   # no NVIDIA GPU: the CPU build of torch (not 5 GB of CUDA)
   {install}
   ```

2. In this folder, run the public tests in the sandbox, the way grading runs
   them: `grade check {assignment}`. It first prints the folder it checks.
   `grade check {assignment} --json results.json` also writes the results in
   Gradescope's results.json format, for your own scripts.
3. Or run them with plain pytest, in this folder: `python -m pytest tests`.

Every test fails with `NotImplementedError` until you write its function. The
public tests are a subset: the official grade runs more tests.
"""


def _markdown_cells(readme: str) -> list[str]:
    """The handout split at headings (never inside a fenced code block)."""
    cells: list[list[str]] = [[]]
    fenced = False
    for line in readme.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and re.match(r"^#{1,6}\s", line) and any(s.strip() for s in cells[-1]):
            cells.append([])
        cells[-1].append(line)
    return ["\n".join(c).strip() for c in cells if any(s.strip() for s in c)]


def _quiz_cells(files: dict[str, bytes]) -> list:
    """The quiz's questions, then a raw cell tagged `answers` holding the blank answers.toml: the grader
    reads the answers from that cell (grader/intake/notebook.py), so a notebook alone can earn the quiz."""
    v4 = nbformat.v4
    lines = ["## Quiz", "", "Write your answers in the next cell (it is `answers.toml`: `question = answer`; "
             "a choice by its number, counted from 0, or its text). Keep the cell's `answers` tag.", ""]
    try:
        questions = tomllib.loads(files["quiz.toml"].decode("utf-8")).get("questions", [])
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        questions = []
    for question in questions if isinstance(questions, list) else []:
        if not isinstance(question, dict):
            continue
        choices = question.get("choices") or []
        listed = "; ".join(f"{i}: {c}" for i, c in enumerate(choices)) if isinstance(choices, list) else ""
        lines.append(f"- `{question.get('id', '?')}`: {question.get('prompt', '')}"
                     + (f" ({listed})" if listed else "") + (f" {question['section']}" if question.get("section")
                                                             else ""))
    blank = files.get("answers.toml", b"").decode("utf-8", "replace")
    if not blank.strip():
        blank = "".join(f"{q['id']} = \"\"\n" for q in questions if isinstance(q, dict) and "id" in q)
    answers = v4.new_raw_cell(blank)
    answers.metadata["tags"] = [ANSWERS_TAG]
    return [v4.new_markdown_cell("\n".join(lines)), answers]


def build_notebook(assignment_id: str, title: str, files: dict[str, bytes],
                   modules: tuple[str, ...]) -> nbformat.NotebookNode:
    """Handout as markdown cells, each stub module as a code cell, then how to check."""
    v4 = nbformat.v4
    cells = [v4.new_markdown_cell(f"# {title}\n\nAssignment `{assignment_id}`. Write your code in the "
                                  f"cells below; only definitions (imports, functions, classes, "
                                  f"constants) are graded, so experiments in other cells are fine.")]
    readme = files.get("README.md")
    if readme:
        cells += [v4.new_markdown_cell(text) for text in _markdown_cells(readme.decode("utf-8", "replace"))]
    for module in modules:
        if module in files:
            cells.append(v4.new_markdown_cell(f"## `{module}`"))
            cells.append(v4.new_code_cell(files[module].decode("utf-8", "replace").rstrip() + "\n"))
    quiz = ""
    if "quiz.toml" in files:
        cells += _quiz_cells(files)
        quiz = " The quiz is graded from the cell tagged `answers` above."
    cells.append(v4.new_markdown_cell(
        "## Check your work\n\n"
        f"Run the public tests on this notebook (in a terminal, in the course folder):\n\n"
        f"```\ngrade check {assignment_id} --workspace {assignment_id}.ipynb\n```\n\n"
        f"or from the unzipped folder: `pytest tests`. All tests fail with `NotImplementedError` "
        f"at first. The public tests are a subset: the official grade uses more tests.{quiz}"))
    cells.append(v4.new_code_cell(f"!grade check {assignment_id} --workspace {assignment_id}.ipynb"))
    notebook = v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.validate(notebook)
    return notebook


def release(assignment: Assignment, out_dir: str | Path | None = None) -> Release:
    """Check, then write DIR/ASSIGNMENT.zip and DIR/ASSIGNMENT.ipynb (default DIR: <course>/.grade/release)."""
    course, assignment_id, manifest = assignment.course, assignment.id, assignment.manifest
    files = bundle_files(assignment)
    problems = find_leaks(files, instructor_files(assignment))
    if problems:
        raise ReleaseLeak(f"refusing to release {assignment_id}: {len(problems)} instructor-only "
                          f"item(s) in assignments/{assignment_id}/: " + "; ".join(problems))
    unfinished = pristine_problems(files, manifest)
    if unfinished:
        raise StarterNotPristine(f"refusing to release {assignment_id}: the starter in assignments/"
                                 f"{assignment_id}/ is not blank ({len(unfinished)} problem(s)): "
                                 + "; ".join(unfinished))
    out = Path(out_dir) if out_dir else course.state_dir / "release"
    if out.resolve().is_relative_to(assignment.folder.resolve()):
        raise ReleaseLeak("the release folder must not be inside the assignment it releases")
    out.mkdir(parents=True, exist_ok=True)
    zip_path = out / f"{assignment_id}.zip"
    shipped = {**files, "README.md": readme_for_bundle(assignment_id, files.get("README.md"),
                                                       assignment.settings.release.install)}
    write_atomic(zip_path, zip_bytes((f"{assignment_id}/{name}", data, 0o644)
                                     for name, data in sorted(shipped.items())))
    notebook_path = out / f"{assignment_id}.ipynb"
    notebook = nbformat.writes(build_notebook(assignment_id, manifest.title, files, manifest.files))
    write_atomic(notebook_path, notebook if notebook.endswith("\n") else notebook + "\n")
    settings = assignment.settings.release
    return Release(zip_path, notebook_path, tuple(sorted(files)), settings.install, settings.install_configured)
