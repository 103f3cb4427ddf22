"""The class report for staff: links to each student's report, why every zero is a zero, overrides,
extensions and regrade history, and tables that fit a laptop screen in a real headless Chromium.

The gradebook is built from scored (not graded) results that carry what real gradings carry
(a syntax error's note and import failures, a missing file, a forbidden API finding, a
timeout...), so the page is checked in seconds.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.course import Course
from grader.core.manifest import load_manifest
from grader.core.records import FAILED, PASSED, FileProblem, GradeResult, StaticFinding, TestOutcome
from grader.core.scoring import score
from grader.intake.submission import Submission
from grader.render.class_report import class_view_model
from grader.storage.gradebook import Gradebook
from tests.browser import chromium, render
from tests.conftest import assignment_of, copy_mini_course, write_report

LAPTOP = (1366, 768)
IMPORT_FAILED = "your module mini could not be imported, so {f} could not run: {why}"


@pytest.fixture
def course(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


def outcome(task: str, name: str, status: str = PASSED, kind: str = "", message: str = "") -> TestOutcome:
    return TestOutcome(name=name, task=task, status=status, kind=kind, message=message,
                       fraction=1.0 if status == PASSED else 0.0)


def result(course: Path, student: str, outcomes: list[TestOutcome], *, notes: tuple[str, ...] = (),
           findings: tuple[StaticFinding, ...] = (), submitted_at: str | None = None,
           file_problems: tuple[FileProblem, ...] = ()) -> GradeResult:
    manifest = load_manifest(course / "assignments" / "mini" / "assignment.toml")
    when = datetime.fromisoformat(submitted_at) if submitted_at else None
    return GradeResult(assignment_id="mini", assignment_title=manifest.title, student=student, mode="submit",
                       score=score(manifest, outcomes, findings, when), outcomes=tuple(outcomes), findings=findings,
                       submission_sha256=(student.encode().hex() * 64)[:64], submission_form="folder",
                       submitted_at=submitted_at, graded_at="2026-12-01T13:00:00+00:00", seed=5,
                       isolation="process", isolation_level="process", duration_s=3.0, notes=notes,
                       fingerprint=assignment_of(course, "mini").fingerprint, file_problems=file_problems)


def failing_imports(why: str) -> list[TestOutcome]:
    return [outcome(task, f"test_{task}_{n}", FAILED, "import_failed", IMPORT_FAILED.format(f=task, why=why))
            for task in ("double", "normalize") for n in range(2)]


def quiz(right: bool = True) -> list[TestOutcome]:
    return [outcome("quiz", "quiz::row_sum", PASSED if right else FAILED, "" if right else "wrong",
                    "" if right else "no answers.toml was submitted")]


def the_class(course: Path) -> list[GradeResult]:
    forbidden = StaticFinding("normalize", "normalize", "softmax", 9, "torch.softmax(x, -1)")
    return [
        result(course, "ada", [outcome("double", "t1"), outcome("normalize", "t2"), *quiz()]),
        result(course, "syn", failing_imports("SyntaxError: expected ':' (mini.py, line 3)") + quiz(False),
               notes=("mini.py: syntax error: expected ':' (line 3)",),
               file_problems=(FileProblem("syntax", "mini.py", "expected ':' (line 3)"),)),
        result(course, "gone", failing_imports("FileNotFoundError: mini.py was not handed in") + quiz(False),
               notes=("missing file(s): mini.py",), file_problems=(FileProblem("missing", "mini.py"),)),
        result(course, "cheat", [outcome("double", "t1", FAILED, "wrong", "wrong values"),
                                 outcome("normalize", "t2", FAILED, "forbidden", "forbidden API"), *quiz(False)],
               findings=(forbidden,)),
        result(course, "slow", [outcome("double", "t1", FAILED, "timeout", "double did not return within 5 s"),
                                outcome("normalize", "t2", FAILED, "timeout", "timed out"), *quiz(False)]),
        result(course, "late", [outcome("double", "t1"), outcome("normalize", "t2"), *quiz()],
               submitted_at="2026-12-05T08:00:00+00:00"),  # more than 2 days late: 0
        result(course, "stub", [outcome("double", "t1", FAILED, "not_implemented", "NotImplementedError"),
                                outcome("normalize", "t2", FAILED, "not_implemented", "NotImplementedError"),
                                *quiz()]),
    ]


def record_all(course: Path, book: Gradebook, results: list[GradeResult]) -> None:
    for graded in results:
        book.record(graded, Submission(files={"mini.py": f"# {graded.student}\n".encode()}, source="x",
                                       form="folder", student=graded.student))


def test_every_zero_says_why_and_every_student_links_to_their_report(course: Path, tmp_path: Path):
    gradebook = tmp_path / "gb.sqlite"
    with Gradebook(gradebook) as book:
        results = the_class(course)
        record_all(course, book, results)
        book.add_override("ada", "mini", None, 0, "copied the exam", sha256=results[0].submission_sha256,
                          total_before=100, total_after=0, author="prof")
        for graded in results[:3]:  # reports written by submit/batch for three of them
            write_report(graded, Course(course).report_path(graded.student, "mini"), Course(course).templates_dir)
        model = class_view_model(assignment_of(course, "mini"), book, with_histogram=False, with_similarity=False)
    zeros = {(z["student"], z["task"]): z["why"] for z in model["zeros"]}
    assert zeros[("syn", "total")] == "syntax error in mini.py: expected ':' (line 3); no answers.toml was submitted"
    assert zeros[("gone", "total")] == "missing file: mini.py; no answers.toml was submitted"
    assert zeros[("cheat", "total")] == ("wrong result in every test; forbidden API (softmax); "
                                         "no answers.toml was submitted")
    assert zeros[("slow", "total")].startswith("timed out")
    assert zeros[("late", "total")] == "late by 4 day(s), past the 2 day(s) late work is accepted"
    assert zeros[("ada", "total")] == "set to 0 by prof: copied the exam"
    assert zeros[("stub", "double")] == "not implemented (still raises NotImplementedError)"
    assert ("stub", "total") not in zeros and ("stub", "quiz") not in zeros  # the quiz earned its points
    assert model["staff"]["zeros"] == 6
    links = {s["student"]: s["report"] for s in model["students"]}
    assert links == {"ada": "ada/mini.html", "syn": "syn/mini.html", "gone": "gone/mini.html", "cheat": None,
                     "slow": None, "late": None, "stub": None}
    out = tmp_path / "elsewhere" / "class.html"  # a page written elsewhere links back to the reports
    result_cli = CliRunner().invoke(main, ["--course", str(course), "report", "mini", "--out", str(out),
                                           "--gradebook", str(gradebook)])
    assert result_cli.exit_code == 0, result_cli.output
    html = out.read_text()
    for student in ("ada", "syn", "gone"):
        href = re.search(rf'<a href="([^"]+)" data-report="{student}">', html).group(1)
        assert (out.parent / href).resolve() == Course(course).report_path(student, "mini").resolve()
    assert 'data-report="slow"' not in html
    assert 'data-zero="syn|total"' in html and "syntax error in mini.py" in html
    assert 'title="not implemented (still raises NotImplementedError)"' in html


def test_overrides_extensions_and_history_are_shown(course: Path, tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        results = the_class(course)
        record_all(course, book, results)
        late = results[5]
        book.record(late, Submission(files={"mini.py": b"# late\n"}, source="x", form="folder", student="late"),
                    replaced_because="regraded with --force")
        book.set_extension("late", "mini", until=datetime.fromisoformat("2026-12-05T12:00:00+00:00"),
                           reason="hospital", author="ta1")
        book.add_override("stub", "mini", "double", 20, "explained it in office hours", sha256="s" * 64,
                          total_before=20, total_after=40, author="ta2")
        model = class_view_model(assignment_of(course, "mini"), book, with_histogram=False, with_similarity=False)
    students = {s["student"]: s for s in model["students"]}
    assert students["late"]["total"] == 100 and students["late"]["late_days"] == 0  # the extension counts
    assert students["late"]["notes"] == ["extension until 2026-12-05T12:00:00+00:00"]
    assert students["stub"]["total"] == 40 and students["stub"]["tasks"]["double"] == 20
    assert students["stub"]["notes"] == ["overridden: double 0 → 20"]
    assert [(o["student"], o["task"], o["earlier_files"]) for o in model["overrides"]] == [("stub", "double", True)]
    assert model["extensions"][0]["student"] == "late" and model["extensions"][0]["reason"] == "hospital"
    assert [(h["student"], h["counts"], h["why"]) for h in model["history"]] == [
        ("late", False, "regraded with --force"), ("late", True, "counts now")]
    assert model["staff"] == {"overrides": 1, "extensions": 1, "regraded": 1, "stale": 0, "zeros": 4}
    assert model["late"] == []


def laptop_probe(page: Path) -> Path:
    """The page plus a script that opens every <details> and reports each table wider than the page."""
    probe = page.with_name("probe.html")
    script = """<script>
window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const page = document.documentElement.clientWidth;
  const wide = [];
  document.querySelectorAll('table').forEach((table, i) => {
    const box = table.getBoundingClientRect();
    const room = table.parentElement.getBoundingClientRect();
    if (box.right > page + 0.5 || box.right > room.right + 0.5 || table.scrollWidth > table.clientWidth + 1) {
      wide.push(((table.closest('section') || {}).id || 'page') + ':' + i + ':' + Math.round(box.width));
    }
  });
  document.body.dataset.viewport = window.innerWidth + 'x' + window.innerHeight;
  document.body.dataset.pageWidth = document.documentElement.scrollWidth + '/' + page;
  document.body.dataset.tables = String(document.querySelectorAll('table').length);
  document.body.dataset.wide = wide.join(' ');
});
</script></body>"""
    probe.write_text(page.read_text().replace("</body>", script))
    return probe


LONG_TASKS = [("scaled_dot_product_attention_with_masks", 14), ("grouped_query_attention_repeat_kv", 12),
              ("sliding_window_attention_linear_memory", 12), ("streaming_attention_with_sinks", 10),
              ("flash_attention_forward_online_softmax", 14), ("flash_attention_backward_pass", 10),
              ("rotary_position_embeddings_half_split", 10), ("alibi_slopes_and_bias", 8),
              ("kv_cache_bytes_every_layer", 10)]


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")
def test_every_table_fits_a_laptop_screen(course: Path, tmp_path: Path):
    manifest = course / "assignments" / "mini" / "assignment.toml"
    text = manifest.read_text().split("[[tasks]]")[0]
    for task_id, points in LONG_TASKS:
        text += f'[[tasks]]\nid = "{task_id}"\ntitle = "{task_id.replace("_", " ").title()}"\npoints = {points}\n' \
                f'functions = ["{task_id}_fn"]\nsections = ["§24"]\n\n'
    manifest.write_text(text)
    long_id = "a" * 30 + "." + "b" * 33  # 64 characters, the longest id there is
    unbroken = "x" * 300
    students = [long_id, *[f"student{n:02d}" for n in range(14)]]
    gradebook = tmp_path / "gb.sqlite"
    with Gradebook(gradebook) as book:
        # zz-broken is on the roster and never graded (only a grader error): the missing table lists it
        book.import_roster([{"id": s, "name": "Maximiliana Wolfeschlegelsteinhausenbergerdorff-" + unbroken[:40],
                             "email": f"{s}@{unbroken[:60]}.example.edu"} for s in [*students, "zz-broken"]])
        for number, student in enumerate(students):
            outcomes = [outcome(task_id, f"test_{task_id}_{'z' * 60}", PASSED if (number + i) % 3 else FAILED,
                                "" if (number + i) % 3 else "wrong", "wrong values")
                        for i, (task_id, _) in enumerate(LONG_TASKS)]
            graded = result(course, student, outcomes, notes=(f"mini.py: syntax error: {unbroken}",),
                            submitted_at="2026-12-02T08:00:00+00:00")
            record_all(course, book, [graded])
        book.record(result(course, long_id, [outcome(LONG_TASKS[0][0], "t", FAILED, "import_failed", unbroken)]),
                    Submission(files={"mini.py": b"#\n"}, source="x", form="folder", student=long_id))
        book.record_error("zz-broken", "mini", "0" * 64, "SubmissionError: " + unbroken)
        book.add_override(long_id, "mini", None, 1, "reason " + unbroken, sha256="0" * 64, total_before=0,
                          total_after=1, author="prof-" + unbroken[:50])
        book.set_extension(students[1], "mini", extra=None, until=datetime.fromisoformat("2026-12-09T23:59:00+00:00"),
                           reason="because " + unbroken, author="ta")
    out = tmp_path / "class.html"
    done = CliRunner().invoke(main, ["--course", str(course), "report", "mini", "--out", str(out),
                                     "--gradebook", str(gradebook)])
    assert done.exit_code == 0, done.output
    dom, console = render(laptop_probe(out), window=LAPTOP)
    assert console == []
    assert re.search(r'data-viewport="1366x\d+"', dom), "the page was not laid out at laptop width"
    assert int(re.search(r'data-tables="(\d+)"', dom).group(1)) >= 10
    page_width, viewport = map(int, re.search(r'data-page-width="(\d+)/(\d+)"', dom).group(1, 2))
    assert page_width <= viewport, "the page scrolls sideways"
    assert re.search(r'data-wide="([^"]*)"', dom).group(1) == ""


# ------------------------------------------------------------------ the quiz's zeros, in words
def quiz_outcomes(course: Path, answers: str | None) -> list[TestOutcome]:
    """The quiz marked as grade submit marks it (grader.core.quiz), for an answers.toml text."""
    from grader.core.quiz import grade_quiz, load_key, load_questions

    root = course / "assignments" / "mini"
    return grade_quiz(load_questions(root / "quiz.toml"), load_key(course / "reference" / "mini" / "quiz_key.toml"),
                      answers)


@pytest.mark.parametrize("answers, why", [
    ('row_sum = ""\nratio = ""\n', "every answer blank"),
    ("row_sum = 2\nratio = 9.9\n", "every answer wrong"),
    ('row_sum = 2\nratio = ""\n', "1 answer(s) wrong, 1 blank"),
    (None, "no answers.toml was submitted"),
    ("row_sum = [", "answers.toml is not valid TOML"),
])
def test_a_quiz_zero_says_blank_when_the_answers_are_blank(course: Path, tmp_path: Path, answers, why: str):
    code = [outcome("double", "t1"), outcome("normalize", "t2")]
    with Gradebook(tmp_path / "gb.sqlite") as book:
        record_all(course, book, [result(course, "ada", code + quiz_outcomes(course, answers))])
        model = class_view_model(assignment_of(course, "mini"), book, with_histogram=False, with_similarity=False)
    zeros = {(z["student"], z["task"]): z["why"] for z in model["zeros"]}
    assert zeros[("ada", "quiz")].startswith(why), zeros


def test_the_class_report_lists_the_roster_and_names_the_ids_it_left_out(course: Path, tmp_path: Path):
    gradebook = tmp_path / "gb.sqlite"
    with Gradebook(gradebook) as book:
        book.import_roster([{"id": s, "name": s.title(), "email": f"{s}@x"} for s in ("ada", "late", "absent")])
        record_all(course, book, the_class(course))  # syn, gone, cheat, slow and stub are not on the roster
        other = result(course, "ola", [outcome("double", "t1")])
        from dataclasses import replace

        book.record(replace(other, assignment_id="other"), Submission(files={"mini.py": b"o"}, source="x",
                                                                     form="folder", student="ola"))
        model = class_view_model(assignment_of(course, "mini"), book, with_histogram=False, with_similarity=False)
        everyone = class_view_model(assignment_of(course, "mini"), book, everyone=True, with_histogram=False,
                                    with_similarity=False)
    assert [s["student"] for s in model["students"]] == ["ada", "late"]
    assert [m["student"] for m in model["missing"]] == ["absent"]  # ola (another assignment) is not missing here
    assert [o["student"] for o in model["off_roster"]] == ["cheat", "gone", "slow", "stub", "syn"]
    assert model["counts"]["roster"] == 3 and model["counts"]["off_roster"] == 5
    assert [s["student"] for s in everyone["students"]] == ["ada", "cheat", "gone", "late", "slow", "stub", "syn"]
    assert everyone["off_roster"] == [] and [m["student"] for m in everyone["missing"]] == ["absent"]
    out = tmp_path / "class.html"
    cli = CliRunner().invoke(main, ["--course", str(course), "report", "mini", "--out", str(out),
                                    "--gradebook", str(gradebook)])
    assert cli.exit_code == 0, cli.output
    assert ("left out 5 id(s) graded or recorded for mini but not on the roster: cheat, gone, slow, stub, syn "
            "(grade report --everyone lists them)") in cli.stderr
    html = out.read_text()
    assert 'id="off-roster" data-value="5"' in html and 'data-off-roster="syn"' in html
    assert 'data-student="syn"' not in html and 'data-student="ada"' in html
