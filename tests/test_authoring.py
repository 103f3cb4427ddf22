"""An instructor's new assignment, from `grade new` to a release: the skeleton is consistent and green, and
each mistake an instructor makes while editing it is named by `grade validate` (its consistency checks,
in seconds, or its gradings), while `grade release` refuses only what leaks the reference's behaviour."""

from __future__ import annotations

import ast
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.authoring.authored_source import is_stub, not_implemented_message
from grader.authoring.scaffold import new_assignment
from grader.authoring.validate import FIRST_SEED, PUBLIC_SUFFIX, ValidateOptions, validate
from grader.authoring.validated import shipping_check
from grader.cli.main import main
from grader.core.course import Course
from grader.core.errors import GraderError, ReleaseLeak, ValidateRequired
from grader.harness.reference import load_reference
from grader.ship.release import release
from tests.conftest import MINI_COURSE, ROOT, assignment_of, copy_mini_course

NEW = "linear_attention"
TASKS = ["feature_map", "linear_attention"]


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """An empty course that declares the lecture's sections, with a new assignment written by `grade new`."""
    root = tmp_path / "course"
    (root / "assignments").mkdir(parents=True)
    shutil.copy(ROOT / "course.toml", root / "course.toml")
    shutil.copytree(ROOT / "lecture", root / "lecture")
    result = CliRunner().invoke(main, ["--course", str(root), "new", NEW, "--tasks", ",".join(TASKS)])
    assert result.exit_code == 0, result.output
    assert "grade validate linear_attention" in result.output
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def problems(course: Path) -> dict[str, list[str]]:
    """What `grade validate --checks-only` (its consistency checks, nothing graded) says fails: check → [detail]."""
    verdicts = validate(assignment_of(course, NEW), options=ValidateOptions(checks_only=True))
    assert all(v.suite in ("static", "hidden", "public") for v in verdicts)
    return {v.subject: [v.detail] for v in verdicts if not v.ok}


# ------------------------------------------------------------------ the skeleton
def test_grade_new_writes_every_file_and_they_agree(course: Path):
    folder, reference = course / "assignments" / NEW, course / "reference" / NEW
    written = sorted(p.relative_to(course).as_posix() for p in course.rglob("*") if p.is_file()
                     and p.parts[len(course.parts)] in ("assignments", "reference"))
    assert written == sorted([
        f"assignments/{NEW}/{name}" for name in ("assignment.toml", "README.md", f"{NEW}.py", "quiz.toml",
                                                 "answers.toml", "tests/test_public.py")]
        + [f"reference/{NEW}/{name}" for name in ("__init__.py", f"{NEW}.py", "mutants.py", "quiz_key.toml",
                                                  "answers.toml", "tests/test_feature_map.py",
                                                  "tests/test_linear_attention.py")] + ["reference/__init__.py"])
    assert problems(course) == {}
    manifest = assignment_of(course, NEW).manifest
    assert [t.id for t in manifest.tasks] == [*TASKS, "quiz"] and manifest.max_points == 100
    handout = (folder / "README.md").read_text()
    assert "| `feature_map` | `feature_map(x)` | 45 |" in handout and "**100**" in handout  # from the manifest
    assert "`x / x.norm(dim=-1, keepdim=True)`" in handout  # the formula the public tests' helper computes
    assert 'raise NotImplementedError("feature_map")' in (folder / f"{NEW}.py").read_text()
    assert (reference / "answers.toml").read_text().endswith("row_sum = 1\n")
    # It ships: the public tests' helper states the handout's formula, which the reference computes too.
    bundle = release(assignment_of(course, NEW), course / "out")
    assert "tests/test_public.py" in bundle.files


def test_grade_new_refuses_bad_names_and_existing_folders(course: Path):
    for tasks, words in ((["feature map"], "must be a Python name"), (["quiz"], "not 'quiz'"),
                         (["a", "a"], "named twice"), ([], "give the tasks")):
        with pytest.raises(GraderError, match=words):
            new_assignment(Course(course), "other", tasks)
    with pytest.raises(GraderError, match="already exist"):
        new_assignment(Course(course), NEW, ["x"])
    assert not (course / "assignments" / "other").exists()


# ------------------------------------------------------------------ mistakes the consistency checks name
def test_a_renamed_stub_parameter_the_tests_still_pass_by_keyword(course: Path):
    hidden = course / "reference" / NEW / "tests" / "test_feature_map.py"
    hidden.write_text(hidden.read_text() + '\n\ndef test_feature_map_by_keyword(check):\n'
                                           '    check.close("feature_map", x=check.randn(2, 3))\n')
    assert problems(course) == {}
    edit(course / "assignments" / NEW / f"{NEW}.py", "def feature_map(x: torch.Tensor)",
         "def feature_map(inputs: torch.Tensor)")
    found = problems(course)
    assert set(found) == {"signatures", "test calls", "handout"}, found
    assert "the stub is feature_map(inputs: torch.Tensor), the reference" in found["signatures"][0]
    assert "tests/test_feature_map.py:" in found["test calls"][0]
    assert "passes x= to feature_map(inputs: torch.Tensor), which has no such parameter" in found["test calls"][0]
    assert "the table writes feature_map(x); the stub's parameters are (inputs)" in found["handout"][0]


def test_a_quiz_key_answering_a_question_the_quiz_does_not_have(course: Path):
    key = course / "reference" / NEW / "quiz_key.toml"
    edit(key, "row_sum = 1\n", "row_sum = 1\nrow_total = 1\n")
    found = problems(course)
    assert list(found) == ["quiz"]
    assert ("the key's [answers] answers question(s) the quiz does not have: row_total (the quiz's ids: row_sum)"
            in found["quiz"][0])


def test_a_mutant_citing_a_section_the_lecture_does_not_have(course: Path):
    edit(course / "reference" / NEW / "mutants.py", 'id="feature_map_wrong_axis", title="rows scaled along the wrong '
         'axis",\n        section="§10"', 'id="feature_map_wrong_axis", title="rows scaled along the wrong axis",\n'
         '        section="§40"')
    found = problems(course)
    assert list(found) == ["sections"]
    assert re.fullmatch(rf"reference/{NEW}/mutants\.py:\d+ cites §40, which the lecture does not have \(it has "
                        r"§1–§32\)", found["sections"][0]), found


def test_a_reference_calling_another_tasks_function_is_named_with_the_fix(course: Path):
    edit(course / "reference" / NEW / f"{NEW}.py", "def linear_attention(x: torch.Tensor) -> torch.Tensor:\n"
         '    """Each row of x scaled to unit length (§10)."""\n    return x / x.norm(dim=-1, keepdim=True)',
         "def linear_attention(x: torch.Tensor) -> torch.Tensor:\n"
         '    """Each row of x scaled to unit length (§10)."""\n    return feature_map(x)')
    found = problems(course)
    assert list(found) == ["reference calls"], found
    assert "the reference's linear_attention (task linear_attention) calls feature_map, the function of task " \
           "feature_map" in found["reference calls"][0]
    assert "every mutant of feature_map also costs points on linear_attention" in found["reference calls"][0]
    assert "private helper (_feature_map) that both functions call" in found["reference calls"][0]


def test_a_mutant_equal_to_the_reference_is_named_as_such(course: Path):
    edit(course / "reference" / NEW / "mutants.py", "def feature_map_wrong_axis(x):\n"
         "    return x / x.norm(dim=0, keepdim=True)", "def feature_map_wrong_axis(x):\n"
         "    return (x /\n            x.norm(dim = -1, keepdim = True))  # copied, and the mistake not made yet")
    found = problems(course)
    assert list(found) == ["mutants"], found
    assert "mutant feature_map_wrong_axis is the reference's own feature_map (the same code once names and layout " \
           "are set aside): no test can catch it" in found["mutants"][0]


def test_points_in_the_handout_that_the_manifest_does_not_give(course: Path):
    edit(course / "assignments" / NEW / "assignment.toml", 'points = 45\nfunctions = ["feature_map"]',
         'points = 40\nfunctions = ["feature_map"]')
    found = problems(course)
    assert list(found) == ["handout"], found
    assert any("the table gives task feature_map 45; the manifest gives it 40" in p for p in found["handout"])
    assert any("the table's total is 100; the manifest's tasks add up to 95" in p for p in found["handout"])


def test_a_hidden_test_of_a_task_the_manifest_does_not_have(course: Path):
    hidden = course / "reference" / NEW / "tests" / "test_more.py"
    hidden.write_text('import pytest\n\n\n@pytest.mark.task("linear_atention")\ndef test_misspelt(check):\n'
                      '    check.close("linear_attention", check.randn(2, 3))\n')
    found = problems(course)
    assert list(found) == ["hidden tests"], found
    assert "test_more::test_misspelt: is marked with task 'linear_atention', which linear_attention " \
           "does not have" in found["hidden tests"][0]


@pytest.mark.slow
def test_plain_pytest_fails_a_hidden_test_that_grading_would_not_run(course: Path):
    hidden = course / "reference" / NEW / "tests" / "test_more.py"
    hidden.write_text('import pytest\n\n\n@pytest.mark.task("linear_atention")\ndef test_misspelt(check):\n'
                      '    check.close("linear_attention", check.randn(2, 3))\n')
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(hidden)],
                          capture_output=True, text=True, cwd=course, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode != 0 and "test_misspelt is marked with task 'linear_atention'" in done.stdout, done.stdout


# ------------------------------------------------------------------ release refuses only the real leak
def test_release_refuses_what_leaks_the_reference_not_what_the_handout_states(course: Path):
    public = course / "assignments" / NEW / "tests" / "test_public.py"
    hidden = course / "reference" / NEW / "tests" / "test_feature_map.py"
    original = public.read_text()
    # A hidden test's body, renamed, in the public tests: refused, naming the hidden file it comes from.
    public.write_text(original + "\n\ndef test_copied(check):\n    check.close(\"feature_map\", check.randn(3, 5))\n")
    with pytest.raises(ReleaseLeak) as refused:
        release(assignment_of(course, NEW), course / "out")
    assert (f"tests/test_public.py: contains function test_feature_map_rows from reference/{NEW}/tests/"
            f"test_feature_map.py, a hidden test file (renamed test_copied)") in str(refused.value)
    assert hidden.is_file()
    # The handout's formula in a helper ships; without the handout stating it, the same helper is refused.
    public.write_text(original)
    release(assignment_of(course, NEW), course / "out")
    edit(course / "assignments" / NEW / "README.md", "`x / x.norm(dim=-1, keepdim=True)`", "x divided by its norm")
    with pytest.raises(ReleaseLeak) as refused:
        release(assignment_of(course, NEW), course / "out2")
    assert f"from reference/{NEW}/{NEW}.py, the reference solution (renamed _unit_rows)" in str(refused.value)


# ------------------------------------------------------------------ validate grades the skeleton
@pytest.mark.sandbox
def test_the_skeleton_validates_green_and_graded_mistakes_are_named(course: Path):
    seen: list[str] = []
    verdicts = validate(assignment_of(course, NEW), options=ValidateOptions(jobs=2), announce=seen.append)
    failing = [(v.subject, v.detail) for v in verdicts if not v.ok]
    assert not failing, failing
    by_subject = {v.subject: v for v in verdicts}
    assert by_subject["reference"].score == 100 and by_subject["stubs"].score == 0
    assert "diagnosed as itself" in by_subject["feature_map_wrong_axis"].detail
    assert by_subject["reference"].seeds == (FIRST_SEED, FIRST_SEED + 1)
    assert any("11 to grade" in line for line in seen), seen
    assert shipping_check(assignment_of(course, NEW), "the student bundle") == ""  # validated: it ships, unsaid

    # A second run grades nothing: every grading is read back by its fingerprint.
    seen.clear()
    again = validate(assignment_of(course, NEW), options=ValidateOptions(jobs=2), announce=seen.append)
    graded = [v for v in again if (v.seeds and v.subject != "seeds") or v.subject == "degenerate answers"]
    assert len(graded) == 9 and all(v.cached for v in graded), [v.subject for v in graded if not v.cached]
    assert any("11 from the cache, 0 to grade" in line for line in seen), seen

    # A hidden test whose verdict depends on the draw: on odd seeds its input is one number, where the norm's
    # axis does not matter, so the wrong-axis mutant passes it under one seed and fails it under the next.
    hidden = course / "reference" / NEW / "tests" / "test_feature_map.py"
    hidden.write_text(hidden.read_text() + "\n\ndef test_feature_map_by_luck(check):\n"
                                           "    x = check.randn(3, 5)\n"
                                           "    if check.seed % 2:\n"
                                           "        x = x[:1, :1]\n"
                                           "    check.close(\"feature_map\", x)\n")
    with pytest.raises(ValidateRequired, match="its files changed since its last complete validate"):
        shipping_check(assignment_of(course, NEW), "the student bundle")
    seen.clear()
    narrowed = validate(assignment_of(course, NEW), announce=seen.append,
                        options=ValidateOptions(jobs=2, mutant_ids=("feature_map_wrong_axis",)))
    by_subject = {v.subject: v for v in narrowed}
    assert "linear_attention_wrong_axis" not in by_subject  # --mutant narrows the gradings
    seeds = by_subject["seeds"]
    assert not seeds.ok and seeds.seed_dependent == ("test_feature_map::test_feature_map_by_luck",)
    assert "test_feature_map::test_feature_map_by_luck (for feature_map_wrong_axis)" in seeds.detail
    mutant = by_subject["feature_map_wrong_axis"]
    assert mutant.ok and mutant.seed_dependent == seeds.seed_dependent
    assert f"passed under seed {FIRST_SEED + 1}" in mutant.detail and f"failed under seed {FIRST_SEED}" in mutant.detail
    hidden.write_text(hidden.read_text().split("\n\ndef test_feature_map_by_luck")[0] + "\n")

    # A reference that calls another task's function: the other task's mutant costs points here too.
    reference = course / "reference" / NEW / f"{NEW}.py"
    text = reference.read_text()
    head, tail = text.split("def linear_attention(")
    reference.write_text(head + "def linear_attention(" + tail.replace(
        "return x / x.norm(dim=-1, keepdim=True)  # (..., n) / (..., 1)", "return feature_map(x)"))
    narrowed = {v.subject: v for v in validate(assignment_of(course, NEW), options=ValidateOptions(
        jobs=2, tasks=("feature_map",)))}
    assert not narrowed["reference calls"].ok
    caught = narrowed["feature_map_wrong_axis"]
    assert not caught.ok and "also loses points on linear_attention" in caught.detail
    assert "have both call a private helper" in caught.detail
    reference.write_text(text)

    # A mutant equal to the reference: named as such, and no advice to add a public test alone.
    edit(course / "reference" / NEW / "mutants.py", "def feature_map_wrong_axis(x):\n"
         "    return x / x.norm(dim=0, keepdim=True)", "def feature_map_wrong_axis(x):\n"
         "    return x / x.norm(dim=-1, keepdim=True)")
    narrowed = {v.subject: v for v in validate(assignment_of(course, NEW), options=ValidateOptions(
        jobs=2, mutant_ids=("feature_map_wrong_axis",)))}
    assert "is the reference's own feature_map" in narrowed["mutants"].detail
    assert "not caught" in narrowed["feature_map_wrong_axis"].detail
    public = narrowed["feature_map_wrong_axis" + PUBLIC_SUFFIX]
    assert not public.ok and "the hidden tests do not catch it either" in public.detail
    assert "if it computes what the reference computes on every input, it is no mistake" in public.detail


# ------------------------------------------------------------------ interrupted
def _descendants(pid: int) -> set[int]:
    """Every live process under `pid` (by parent links in /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found.update(children)
        frontier += children
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.sandbox
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_an_interrupted_validate_stops_at_once_and_leaves_no_process(tmp_path: Path, how):
    course = tmp_path / "course"
    copy_mini_course(course)
    command = [sys.executable, "-m", "grader.cli", "--course", str(course), "validate", "mini", "--no-cache",
               "--jobs", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines, started = [], time.monotonic()
    try:
        while time.monotonic() - started < 300:  # the gradings have started once a grading's verdict is out
            ready, _, _ = select.select([process.stdout], [], [], 300)
            line = process.stdout.readline().decode() if ready else ""
            lines.append(line)
            if not line or line.lstrip().startswith("✓ stubs"):
                break
        assert lines[-1].lstrip().startswith("✓ stubs"), "".join(lines)
        under = _descendants(process.pid)
        assert under, "the pool's workers and their sandboxes run under the command"
        # Ctrl-C on a terminal reaches the whole foreground group; SIGTERM (kill, a scheduler) only the command.
        os.killpg(process.pid, how) if how == signal.SIGINT else process.send_signal(how)
        rest = process.communicate(timeout=120)[0].decode()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == (130 if how == signal.SIGINT else 143), "".join(lines) + rest
    assert "interrupted" in rest and "no grading is left running" in rest
    assert "✓ seeds" not in rest and "check(s) passed" not in rest  # it stopped, with gradings still to do
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in under) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in under if _alive(pid)], "processes left behind"


# ------------------------------------------------------------------ what a re-run grades again
def _keys(course: Path, tmp: Path) -> dict[tuple[str, str, int], str]:
    from grader.authoring.validate import plan
    from grader.authoring.validate_cache import Fingerprints

    assignment = assignment_of(course, NEW)
    _, mutants = load_reference(assignment)
    groups = plan(assignment, mutants, ValidateOptions(), tmp, Fingerprints(assignment, mutants))
    return {(g.subject, g.suite, g.seed): g.key for group in groups for g in group.gradings}


def test_editing_one_mutant_regrades_its_task_only(course: Path, tmp_path: Path):
    before = _keys(course, tmp_path / "a")
    assert len(before) == 11 and len(set(before.values())) == 11
    assert _keys(course, tmp_path / "b") == before  # nothing changed: every grading is read back
    edit(course / "reference" / NEW / "mutants.py", "def linear_attention_wrong_axis(x):\n"
         "    return x / x.norm(dim=0, keepdim=True)", "def linear_attention_wrong_axis(x):\n"
         "    return x / x.norm(dim=-2, keepdim=True)")
    changed = {key for key, value in _keys(course, tmp_path / "c").items() if before[key] != value}
    assert changed == {("linear_attention_wrong_axis", "hidden", FIRST_SEED),
                       ("linear_attention_wrong_axis", "hidden", FIRST_SEED + 1),
                       ("linear_attention_wrong_axis", "public", FIRST_SEED)}
    # A hidden test grades the reference and every mutant again; the public gradings do not read it.
    hidden = course / "reference" / NEW / "tests" / "test_feature_map.py"
    hidden.write_text(hidden.read_text() + "\n# a comment changes the file\n")
    edited = _keys(course, tmp_path / "d")
    moved = {key for key, value in edited.items() if value != before[key]} - changed
    assert {suite for _, suite, _ in moved} == {"hidden"} and len(moved) == 5  # reference ×2, stubs, a mutant ×2


def test_points_tables_in_the_course_layouts_are_read(course: Path):
    from grader.core.handout import table_problems

    manifest = assignment_of(ROOT, "assignment3").manifest
    text = (ROOT / "assignments" / "assignment3" / "README.md").read_text()
    assert table_problems(text, manifest, {}, "README.md") == ([], 1)
    drifted = (text.replace("| `kv_cache_bytes` | kv_cache | 5 |", "| `kv_cache_bytes` | kv_cache | 6 |")
               .replace("| bonus: GQA inside the kernel | flash_gqa | +5 |",
                        "| bonus: GQA inside the kernel | flash_gqa | 5 |"))
    found, tables = table_problems(drifted, manifest, {}, "README.md")
    assert tables == 1 and len(found) == 1 and "task kv_cache 6; the manifest gives it 5" in found[0]
    # A bonus written without its "+" still has the manifest's points: only the number is read.


def test_a_reference_that_does_not_import_is_named_and_nothing_is_graded(course: Path):
    (course / "reference" / NEW / f"{NEW}.py").write_text("def feature_map(x:\n")
    verdicts = {v.subject: v for v in validate(assignment_of(course, NEW))}  # no pool starts: fast lane
    assert not verdicts["reference"].ok and "cannot be imported (SyntaxError" in verdicts["reference"].detail
    assert "nothing was graded" in verdicts["reference"].detail
    assert f"reference/{NEW}/{NEW}.py: not valid Python" in verdicts["signatures"].detail
    assert "stubs" not in verdicts and "seeds" not in verdicts


def test_a_formula_the_handout_states_is_no_leak_in_any_spelling():
    from grader.ship.release import find_leaks

    instructor = {"reference/x/a.py": b"import torch\n\n\ndef phi(x):\n    return torch.nn.functional.elu(x) + 1\n"}
    helper = b"import torch\n\n\ndef _phi(q):\n    return torch.nn.functional.elu(q) + 1\n"
    for handout in (b"The feature map is `F.elu(x) + 1`.\n", b"Compute\n\n    phi = elu(x) + 1\n",
                    b"```python\ndef phi(x):\n    return F.elu(x) + 1\n```\n"):
        assert find_leaks({"README.md": handout, "tests/test_public.py": helper}, instructor) == [], handout
    for handout in (b"The feature map is `F.relu(x) + 1`.\n", b"The feature map is elu(x) + 1.\n"):
        assert find_leaks({"README.md": handout, "tests/test_public.py": helper}, instructor) == [
            "tests/test_public.py: same code as reference/x/a.py, the reference solution (compared as syntax "
            "trees)"], handout


def test_narrowing_to_a_task_or_mutant_that_does_not_exist_is_refused_before_any_work(course: Path):
    from grader.core.errors import UnknownTask

    with pytest.raises(UnknownTask, match="has no task feature_mapp"):
        validate(assignment_of(course, NEW), options=ValidateOptions(tasks=("feature_mapp",)))
    with pytest.raises(UnknownTask, match="catalogue has no mutant nope .mutants: feature_map_wrong_axis, "):
        validate(assignment_of(course, NEW), options=ValidateOptions(mutant_ids=("nope",)))


@pytest.mark.parametrize("body, stub, message", [
    ('"""Doc."""\n    raise NotImplementedError("f: your code")', True, "f: your code"),
    ("raise NotImplementedError", True, ""),
    ("pass", True, None),
    ("...", True, None),
    ('"""Doc."""\n    raise NotImplementedError("f")\n    return x', False, "f"),  # a body after the raise
    ('raise ValueError("NotImplementedError")', False, None),
    ("return x * 2", False, None),
])
def test_the_one_stub_detector(body, stub, message):
    """What the consistency checks, the release's blank-starter check and the leak check call a stub."""
    node = ast.parse(f"def f(x):\n    {body}\n").body[0]
    assert (is_stub(node), not_implemented_message(node)) == (stub, message)



def test_a_mutant_calling_a_reference_helper_its_catalogue_does_not_import_is_refused(course: Path):
    edit(course / "reference" / NEW / f"{NEW}.py", "def linear_attention(x: torch.Tensor) -> torch.Tensor:\n"
         '    """Each row of x scaled to unit length (§10)."""\n    return x / x.norm(dim=-1, keepdim=True)',
         "def _unit_rows(x: torch.Tensor, dim: int) -> torch.Tensor:\n"
         "    return x / x.norm(dim=dim, keepdim=True)\n\n\n"
         "def linear_attention(x: torch.Tensor) -> torch.Tensor:\n"
         '    """Each row of x scaled to unit length (§10)."""\n    return _unit_rows(x, -1)')
    mutants = course / "reference" / NEW / "mutants.py"
    edit(mutants, "def linear_attention_wrong_axis(x):\n    return x / x.norm(dim=0, keepdim=True)",
         "def linear_attention_wrong_axis(x):\n    return _unit_rows(x, 0)")
    found = problems(course)  # validate would run it inside the reference module, where _unit_rows exists
    assert list(found) == ["mutants"], found
    assert re.search(rf"reference/{NEW}/mutants\.py:\d+: mutant linear_attention_wrong_axis uses _unit_rows, which "
                     rf"reference/{NEW}/mutants\.py neither defines nor imports: the diagnosis runs the mutant there "
                     r"and would stop on a NameError", found["mutants"][0]), found
    edit(mutants, "from grader.harness.catalogue import mutant\n",
         f"from grader.harness.catalogue import mutant\nfrom reference.{NEW}.{NEW} import _unit_rows\n")
    assert problems(course) == {}


# ------------------------------------------------------------------ a broken quiz key marks nothing
@pytest.mark.parametrize("key, words", [
    ({"row_sum": 1}, "it has no answer for question ratio"),
    ({"row_sum": 3, "ratio": 1.43}, "row_sum is a choice question; its answer must be the index of a choice (0 to 2)"),
    ({"row_sum": 1, "ratio": {"tolerance": 0.03}}, "ratio is numeric; its answer must be a number"),
])
def test_a_broken_quiz_key_refuses_to_mark_instead_of_marking_a_right_answer_wrong(key: dict, words: str):
    from grader.core.errors import ManifestError
    from grader.core.quiz import grade_quiz, load_questions

    questions = load_questions(MINI_COURSE / "assignments" / "mini" / "quiz.toml")
    right = "row_sum = 1\nratio = 1.43\n"
    assert all(o.status == "passed" for o in grade_quiz(questions, {"row_sum": 1, "ratio": 1.43}, right))
    with pytest.raises(ManifestError, match=re.escape(words)):
        grade_quiz(questions, key, right)


def test_grade_submit_refuses_a_quiz_key_that_lacks_a_question(tmp_path: Path):  # before any sandbox starts
    course = tmp_path / "course"
    copy_mini_course(course)
    key = course / "reference" / "mini" / "quiz_key.toml"
    edit(key, "ratio = { value = 1.43, tolerance = 0.03 }\n", "")
    workspace = tmp_path / "work"
    shutil.copytree(course / "reference" / "mini", workspace, ignore=shutil.ignore_patterns("__pycache__"))
    (workspace / "answers.toml").write_text("row_sum = 1\nratio = 1.43\n")
    done = CliRunner().invoke(main, ["--course", str(course), "submit", "mini", "--workspace", str(workspace),
                                     "--student", "ada"])
    assert done.exit_code == 2, done.output
    assert "cannot mark this quiz: it has no answer for question ratio" in " ".join(done.output.split())
    assert "no answer was marked" in done.output and not (course / ".grade" / "gradebook.sqlite").exists()


# ------------------------------------------------------------------ shipping needs a passing validate
def test_release_and_autograder_refuse_an_assignment_whose_last_validate_failed_or_is_stale(course: Path,
                                                                                           tmp_path: Path):
    def ship(*args: str) -> tuple[int, str]:
        done = CliRunner().invoke(main, ["--course", str(course), *args])
        return done.exit_code, " ".join(done.output.split())

    code, said = ship("release", NEW, "--out", str(tmp_path / "r0"))
    assert code == 0 and f"{NEW} was never validated here: run grade validate {NEW}" in said
    stub = course / "reference" / NEW / f"{NEW}.py"
    good = stub.read_text()
    stub.write_text("def feature_map(x:\n")
    assert not all(v.ok for v in validate(assignment_of(course, NEW)))  # complete, and failed (no pool starts)
    for args in (("release", NEW, "--out", str(tmp_path / "r1")), ("autograder", "gradescope", NEW, "--out",
                                                                  str(tmp_path / "a1.zip"))):
        code, said = ship(*args)
        assert code == 5, said
        assert f"{NEW} is not shipped: its last complete validate (" in said and ") failed: reference, signatures" \
            in said and "Run grade validate linear_attention until it passes (or ship it anyway with --force)" in said
    assert not (tmp_path / "r1").exists() and not (tmp_path / "a1.zip").exists()
    code, said = ship("release", NEW, "--out", str(tmp_path / "r2"), "--force")
    assert code == 0 and f"Warning: shipping the student bundle of {NEW} unvalidated (--force): its last " \
                         "complete validate (" in said and (tmp_path / "r2" / f"{NEW}.zip").is_file()
    stub.write_text(good)  # fixed, but not validated since
    code, said = ship("release", NEW, "--out", str(tmp_path / "r3"))
    assert code == 5 and "its files changed since its last complete validate (" in said, said
    assert validate(assignment_of(course, NEW), options=ValidateOptions(checks_only=True))
    code, said = ship("release", NEW, "--out", str(tmp_path / "r4"))
    assert code == 5 and "a later run of these files covered the consistency checks only and passed" in said, said
