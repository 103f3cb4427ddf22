"""`grade new`: a new assignment's two folders, complete and valid, so an instructor edits from green.

`new_assignment(course, "linear_attention", ["feature_map", "linear_attention"])` writes

    assignments/<id>/   assignment.toml (tasks, points, sections, forbidden APIs, the quiz task),
                        README.md (the handout, its points table written from the manifest),
                        <module> (a stub per task: typed signature, docstring with shapes and §,
                        raise NotImplementedError), quiz.toml, answers.toml (blank),
                        tests/test_public.py (a public test per task)
    reference/<id>/     __init__.py, <module> (the reference), mutants.py (one known mistake per task),
                        quiz_key.toml, answers.toml (the key's answers), tests/test_<task>.py (hidden)

Every task starts as the same placeholder computation, each row of x scaled to unit length
(`x / x.norm(dim=-1, keepdim=True)`, stated in the handout), with one mistake catalogued (the norm
taken over the wrong axis), so `grade validate` passes as written: the reference earns full marks, the
stubs 0, each mutant is caught and named by the hidden tests and fails a public test on its values.
The instructor then replaces the placeholder task by task, keeping validate green. Each fact is written
once: task ids, function names and points in the manifest (the handout's table is written from it and
checked against it by validate), parameters in the stubs, quiz ids in quiz.toml.
"""

from __future__ import annotations

import keyword
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.core.course import Course
from grader.core.errors import GraderError
from grader.core.handout import points_table
from grader.core.manifest import load_manifest
from grader.sandbox.forbidden import allow_list_text

ID_RULE = re.compile(r"^[a-z][a-z0-9_]*$")
QUIZ_POINTS = 10
CODE_POINTS = 90  # shared by the code tasks
SECTION = "§10"  # the placeholder's section: the attention matrix, whose rows are normalised


@dataclass(frozen=True)
class NewAssignment:
    """What `grade new` wrote: the two folders and every file, relative to the course root."""

    assignment_dir: Path
    reference_dir: Path
    files: tuple[str, ...]


def _check_names(assignment_id: str, tasks: list[str], module: str) -> None:
    problems = []
    if not ID_RULE.match(assignment_id) or keyword.iskeyword(assignment_id):
        problems.append(f"the assignment id {assignment_id!r} must be lower-case letters, digits and _, starting "
                        f"with a letter (it names the package reference.{assignment_id})")
    if not tasks:
        problems.append("give the tasks: --tasks a,b,c")
    for task in tasks:
        if not ID_RULE.match(task) or keyword.iskeyword(task) or task == "quiz":
            problems.append(f"task {task!r} must be a Python name of lower-case letters, digits and _ (each task "
                            f"starts with one function of that name), and not 'quiz'")
    repeated = sorted({t for t in tasks if tasks.count(t) > 1})
    if repeated:
        problems.append(f"task(s) named twice: {', '.join(repeated)}")
    if not module.endswith(".py") or not ID_RULE.match(module[:-3]) or keyword.iskeyword(module[:-3]):
        problems.append(f"the module {module!r} must be a lower-case Python name ending in .py")
    if problems:
        raise GraderError("grade new: " + "; ".join(problems))


def _points(count: int) -> list[int]:
    base, extra = divmod(CODE_POINTS, count)
    return [base + (1 if i < extra else 0) for i in range(count)]


def _manifest(assignment_id: str, title: str, module: str, tasks: list[str]) -> str:
    lines = [f"# {title}: the manifest. Points, task ids and function names live here and nowhere else;",
             "# tests name their task with @pytest.mark.task(\"<id>\"), and grade validate checks the handout's",
             "# points table, the stubs, the reference, the tests and the quiz against this file.",
             f'id = "{assignment_id}"', f'title = "{title}"', f'sections = "{SECTION}–§11"', f'files = ["{module}"]',
             '# deadline = "2027-01-31T23:59:00+00:00"   # ISO 8601 with a time zone; without one, no late policy',
             "", "[late_policy]", "grace_minutes = 15", "penalty_per_day = 0.1", "max_days_late = 5", "",
             "[limits]", "call_timeout_s = 30", "submission_budget_s = 300"]
    for task, points in zip(tasks, _points(len(tasks)), strict=True):
        lines += ["", "[[tasks]]", f'id = "{task}"', f'title = "{task}: rows scaled to unit length (placeholder)"',
                  f"points = {points}", f'functions = ["{task}"]', f'sections = ["{SECTION}"]',
                  'forbidden = ["numpy"]   # API groups the task may not use: softmax, sdpa, matmul, '
                  'multihead_attention, numpy']
    lines += ["", "[[tasks]]", 'id = "quiz"', 'title = "Check yourself"', 'kind = "quiz"', f"points = {QUIZ_POINTS}"]
    return "\n".join(lines) + "\n"


def _handout(assignment_id: str, title: str, module: str, table: str, tasks: list[str]) -> str:
    listed = ", ".join(f"`{t}`" for t in tasks)
    return f"""# {title} ({SECTION}–§11)

<!-- Written by grade new. Replace each task's placeholder here, in the stubs, the reference, the tests
     and the catalogue; grade validate checks that they agree (docs/AUTHORING.md). -->

Write each function in `{module}`. Its docstring gives the shapes and the
lecture section to read; its body raises `NotImplementedError` until you
replace it.

## What you write

{table}
Each task's points are shared equally by its hidden tests.

## The tasks

Each task ({listed}) asks for every row of `x` scaled to unit length:
`x / x.norm(dim=-1, keepdim=True)`, with the input's shape and dtype ({SECTION}).

## Conventions

- Inputs are `[..., n]`: the last axis holds features; anything in front is
  matched one to one.
- float32 and float64; return the input's dtype. Inputs may be non-contiguous
  views; never change them in place.

## Modules you may use

{allow_list_text()}

## Checking your work

    grade check {assignment_id}               # the public tests, in the sandbox
    grade check {assignment_id} --task {tasks[0]}
    pytest tests                         # the same tests with plain pytest, in this folder

Answer the quiz (`quiz.toml`) in `answers.toml`.
"""


def _stub(title: str, tasks: list[str]) -> str:
    parts = [f'"""{title}: your code. Each function raises NotImplementedError until you write it."""', "",
             "from __future__ import annotations", "", "import torch"]
    for task in tasks:
        parts += ["", "", f"def {task}(x: torch.Tensor) -> torch.Tensor:",
                  f'    """Each row of x scaled to unit length (lecture {SECTION}).', "",
                  "    x: (..., n). Returns (..., n), the dtype of x: x / ‖x‖, the norm taken over the last axis.",
                  '    """', f'    raise NotImplementedError("{task}")']
    return "\n".join(parts) + "\n"


def _reference(title: str, tasks: list[str]) -> str:
    parts = [f'"""Reference solution of {title}.', "",
             "No function here calls another task's function: grade validate swaps in one known mistake at a",
             "time, and each must cost points on its own task only. What two tasks share goes in a private",
             'helper (a name starting with _) that both call."""', "", "from __future__ import annotations", "",
             "import torch"]
    for task in tasks:
        parts += ["", "", f"def {task}(x: torch.Tensor) -> torch.Tensor:",
                  f'    """Each row of x scaled to unit length ({SECTION})."""',
                  "    return x / x.norm(dim=-1, keepdim=True)  # (..., n) / (..., 1)"]
    return "\n".join(parts) + "\n"


def _mutants(assignment_id: str, tasks: list[str]) -> str:
    parts = [f'"""Misconception catalogue of {assignment_id}: known wrong versions of each task\'s function.', "",
             "When a student's output is wrong, the grader runs these on the same inputs and names the one that",
             "reproduces it, here, in this module: a body may use what this module imports or defines (import",
             "a helper of the reference from its module). grade validate appends it to the reference module and",
             "grades it as a submission, which must lose points on its own task only, be named there, and fail",
             'a public test on its values."""', "",
             "from __future__ import annotations", "", "from grader.harness.catalogue import mutant"]
    for task in tasks:
        parts += ["", "", f'@mutant(function="{task}", id="{task}_wrong_axis", title="rows scaled along the wrong '
                          f'axis",', f'        section="{SECTION}",',
                  '        explanation="Each row must have length 1: take the norm over the last axis (dim=-1), '
                  'keep it (keepdim=True) and divide by it.")',
                  f"def {task}_wrong_axis(x):", "    return x / x.norm(dim=0, keepdim=True)"]
    return "\n".join(parts) + "\n"


def _hidden_tests(task: str) -> str:
    return f'''"""Hidden tests of task {task} ({SECTION}): each row scaled to unit length."""

import pytest
import torch

pytestmark = pytest.mark.task("{task}")


def test_{task}_rows(check):
    check.close("{task}", check.randn(3, 5))


def test_{task}_batched_float64(check):
    check.close("{task}", check.randn(2, 4, 6, dtype=torch.float64))


def test_{task}_non_contiguous_view(check):
    x = check.randn(6, 3).transpose(-2, -1)  # (3, 6), a transposed view
    check.close("{task}", x)
'''


def _public_tests(assignment_id: str, tasks: list[str]) -> str:
    parts = [f'"""Public tests of {assignment_id}: a first check of each task (grade check, or pytest tests here).',
             "", "Each test computes its expected answer here, from the handout's formula. The hidden tests try",
             'every rule again on more inputs."""', "", "import pytest", "", "",
             "def _unit_rows(x):", '    """The handout\'s formula: each row of x divided by its length."""',
             "    return x / x.norm(dim=-1, keepdim=True)"]
    for task in tasks:
        parts += ["", "", f'@pytest.mark.task("{task}")', f"def test_{task}_unit_rows(check):",
                  "    x = check.randn(4, 3)  # more rows than columns: a norm over the wrong axis shows",
                  f'    check.close("{task}", x, expected=_unit_rows(x))']
    return "\n".join(parts) + "\n"


QUIZ = """[[questions]]
id = "row_sum"
kind = "choice"
prompt = "Each row of attention weights is a softmax over the keys. What is the sum of one row?"
choices = ["0", "1", "the number of keys", "√d"]
section = "§11"
"""
KEY = """[answers]
row_sum = 1

[explanations]                  # shown to staff in reports, never to students
row_sum = "A softmax over the keys is a probability distribution: its weights add up to one."
"""


def files_of(assignment_id: str, tasks: list[str], module: str, title: str) -> dict[str, str]:
    """Every file of a new assignment: path relative to the course root → text."""
    manifest_text = _manifest(assignment_id, title, module, tasks)
    with tempfile.TemporaryDirectory() as temp:
        (Path(temp) / "assignment.toml").write_text(manifest_text, encoding="utf-8")
        manifest = load_manifest(Path(temp) / "assignment.toml")  # what validate reads: proves it parses
    table = points_table(manifest, {task: f"{task}(x)" for task in tasks})
    a, r = f"assignments/{assignment_id}", f"reference/{assignment_id}"
    files = {f"{a}/assignment.toml": manifest_text,
             f"{a}/README.md": _handout(assignment_id, title, module, table, tasks),
             f"{a}/{module}": _stub(title, tasks),
             f"{a}/quiz.toml": QUIZ,
             f"{a}/answers.toml": '# Your quiz answers (questions in quiz.toml): the index of a choice, or a number.\n'
                                  'row_sum = ""\n',
             f"{a}/tests/test_public.py": _public_tests(assignment_id, tasks),
             f"{r}/__init__.py": "",
             f"{r}/{module}": _reference(title, tasks),
             f"{r}/mutants.py": _mutants(assignment_id, tasks),
             f"{r}/quiz_key.toml": KEY,
             f"{r}/answers.toml": "# The quiz key's answers: this folder is a complete submission.\nrow_sum = 1\n"}
    for task in tasks:
        files[f"{r}/tests/test_{task}.py"] = _hidden_tests(task)
    return files


def new_assignment(course: Course, assignment_id: str, tasks: list[str], module: str | None = None,
                   title: str | None = None) -> NewAssignment:
    """Write a new assignment's folders into `course` (see the module docstring); refuse to touch one that
    exists. Written into a temporary folder first, then moved, so a failure leaves nothing half-made."""
    if course.bundle:
        raise GraderError("grade new writes into a course (a folder with assignments/), not a student bundle")
    module = module or f"{assignment_id}.py"
    _check_names(assignment_id, tasks, module)
    assignment_dir, reference_dir = course.assignments_dir / assignment_id, course.reference_for(assignment_id)
    existing = [str(p) for p in (assignment_dir, reference_dir) if p.exists()]
    if existing:
        raise GraderError(f"grade new: {', '.join(existing)} already exist(s); choose another id or remove them")
    files = files_of(assignment_id, tasks, module, title or assignment_id.replace("_", " ").capitalize())
    course.assignments_dir.mkdir(parents=True, exist_ok=True)
    course.reference_dir.mkdir(parents=True, exist_ok=True)
    package = course.reference_dir / "__init__.py"
    if not package.exists():  # reference/ is a package: hidden tests and mutants import reference.<id>
        package.write_text("", encoding="utf-8")
    staging = Path(tempfile.mkdtemp(prefix=f".new-{assignment_id}-", dir=course.root))
    try:
        for name, text in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (staging / "assignments" / assignment_id).rename(assignment_dir)
        (staging / "reference" / assignment_id).rename(reference_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return NewAssignment(assignment_dir, reference_dir, tuple(sorted(files)))
