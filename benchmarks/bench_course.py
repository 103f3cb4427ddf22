"""`grade batch` on the real course: a class of assignment 1 (and of assignment 3) graded at both
sandbox levels with --jobs 1 and --jobs 2, beside a lone `grade submit` and `grade check`, all as
ratios to a bare `python -c "import torch"` timed in the same run (machines differ; ratios travel).

The class: the reference solution and wrong variants of it (every mistake of the assignment's
catalogue swapped into the reference, as `grade validate` builds them, and the test suite's wrong
fixtures), cycled to --count with one correct submission in five, so most of the class is wrong.
Each entry carries the quiz key's answers. The course is a temporary copy (reports and the
gradebook land there, never in this checkout).

Every figure is a whole command, as a TA runs it: `grade batch` on the class and on a class of one,
with a fresh gradebook, so start-up (the command, its pool, each pool worker's imports and template
worker) is part of it: start-up ≈ the class of one less one steady submission, a steady submission =
(class − class of one) / (count − 1). Settings are interleaved in each round (alternating order) and
the median round counts; the load average is printed before, after each round and after.

Targets (two cores), as ratios to the bare torch import: an assignment 1 submission at --jobs 2 at
most 0.15x at both levels (start-up included), batch start-up at most 1.5x, a wrong submission at
most 1.5x a correct one (their grading times in the gradebook), --jobs 2 at least 1.8x faster than
--jobs 1 (beside the machine's own two-process ceiling), a lone `grade submit` / `grade check` at most
2x; assignment 3 per submission at most twice the reference's own grading time.

    python benchmarks/bench_course.py [--count 40] [--count3 8] [--rounds 3] [--rounds3 1]
                                      [--levels bwrap process] [--jobs 1 2] [--skip3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_batch import load, machine_ceiling  # noqa: E402

from grader.authoring.workspaces import reference_workspace  # noqa: E402
from grader.core.assignment import Assignment  # noqa: E402
from grader.core.course import Course  # noqa: E402
from grader.harness.reference import load_reference  # noqa: E402
from grader.storage.gradebook import Gradebook  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
WRONG_FIXTURES = {  # the test suite's wrong submissions of each assignment (files laid over the reference)
    "assignment1": ["assignment1_k_T", "assignment1_two_causes", "assignment1_degenerate",
                    "assignment1_disabled_torch_function"],
    "assignment3": ["assignment3_cheat_sdpa", "assignment3_degenerate",
                    *(f"triton_kernels/{p.stem}" for p in sorted((FIXTURES / "triton_kernels").glob("*.py")))],
}
CORRECT_EVERY = 5  # one correct submission in five
TARGETS = {"per_submission": 0.15, "startup": 1.5, "wrong_vs_correct": 1.5, "speedup": 1.8, "lone": 2.0,
           "assignment3": 2.0}
COPIED = ("assignments", "reference", "lecture", "templates", "course_kernels", "course.toml")


def median_time(command: list[str], repeats: int, env: dict | None = None, cwd: Path | None = None) -> float:
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def bare_torch(repeats: int = 5) -> float:
    return median_time([sys.executable, "-c", "import torch"], repeats)


def copy_course(target: Path) -> Path:
    target.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", ".grade"))
        elif source.is_file():
            shutil.copyfile(source, target / name)
    return target


def wrong_variants(assignment: Assignment, scratch: Path) -> list[tuple[str, Path]]:
    """(name, workspace) of every catalogued mistake and every wrong fixture of `assignment`."""
    variants = []
    _, mutants = load_reference(assignment)
    for mutant in mutants:
        try:
            variants.append((mutant.id, reference_workspace(assignment, scratch / mutant.id, mutant)))
        except (OSError, ValueError, SyntaxError):
            continue
    for fixture in WRONG_FIXTURES.get(assignment.id, []):
        workspace = reference_workspace(assignment, scratch / fixture.replace("/", "-"))
        source = FIXTURES / fixture
        for path in ([source.with_suffix(".py")] if not source.is_dir() else sorted(source.iterdir())):
            if path.is_file():
                name = "flash.py" if fixture.startswith("triton_kernels/") else path.name
                shutil.copyfile(path, workspace / name)
        variants.append((fixture, workspace))
    return variants


def make_class(assignment: Assignment, scratch: Path, count: int) -> tuple[Path, Path, set[str]]:
    """The class folder of `count` entries (one correct in CORRECT_EVERY), a class of one (the first
    wrong entry) and the ids of the correct entries."""
    correct = reference_workspace(assignment, scratch / "reference")
    wrong = wrong_variants(assignment, scratch / "variants")
    folder, alone = scratch / "class", scratch / "alone"
    folder.mkdir()
    alone.mkdir()
    correct_ids = set()
    for i in range(count):
        student = f"s{i + 1:03d}"
        if i % CORRECT_EVERY == 0:
            source = correct
            correct_ids.add(student)
        else:
            source = wrong[(i - i // CORRECT_EVERY - 1) % len(wrong)][1]
        shutil.copytree(source, folder / student)
    shutil.copytree(wrong[0][1], alone / "s001")
    return folder, alone, correct_ids


@dataclass
class Setting:
    level: str  # bwrap | process
    jobs: int
    classes: list[float] = field(default_factory=list)  # whole-command walls, one per round
    ones: list[float] = field(default_factory=list)
    levels: set[str] = field(default_factory=set)
    correct_s: list[float] = field(default_factory=list)  # grading times recorded in the gradebook
    wrong_s: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{'bubblewrap' if self.level == 'bwrap' else 'no-namespace'} --jobs {self.jobs}"

    def steady_s(self, count: int) -> float:
        return (statistics.median(self.classes) - statistics.median(self.ones)) / (count - 1)

    def startup_s(self, count: int) -> float:
        return statistics.median(self.ones) - self.steady_s(count)

    def per_submission_s(self, count: int) -> float:
        return statistics.median(self.classes) / count


def environment(level: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_NO_BWRAP", "GRADE_NO_ZYGOTE")}
    if level == "process":
        env["GRADE_NO_BWRAP"] = "1"
    return env


def batch(course: Path, assignment_id: str, folder: Path, setting: Setting, book: Path) -> float:
    command = [sys.executable, "-m", "grader.cli", "--course", str(course), "batch", assignment_id, str(folder),
               "--jobs", str(setting.jobs), "--gradebook", str(book)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment(setting.level))
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{setting.label}: grade batch failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def read_back(setting: Setting, assignment_id: str, book: Path, correct: set[str]) -> None:
    with Gradebook(book) as gradebook:
        for student, record in gradebook.latest(assignment_id).items():
            setting.levels.add(record.result.isolation_level)
            (setting.correct_s if student in correct else setting.wrong_s).append(record.result.duration_s)


def run_class(course: Path, assignment: Assignment, scratch: Path, count: int, rounds: int,
              settings: list[Setting], loads: list[str]) -> set[str]:
    folder, alone, correct = make_class(assignment, scratch, count)
    state = scratch / "state"
    state.mkdir()
    batch(course, assignment.id, alone, settings[0], state / "warm.sqlite")  # the file cache, once
    for r in range(rounds):
        for setting in (settings if r % 2 == 0 else list(reversed(settings))):
            name = f"{setting.level}-{setting.jobs}-{r}"
            setting.classes.append(batch(course, assignment.id, folder, setting, state / f"{name}.sqlite"))
            read_back(setting, assignment.id, state / f"{name}.sqlite", correct)
            setting.ones.append(batch(course, assignment.id, alone, setting, state / f"{name}-one.sqlite"))
        loads.append(load())
    return correct


def lone(course: Path, assignment_id: str, workspace: Path, repeats: int, scratch: Path) -> dict[str, float]:
    cli = [sys.executable, "-m", "grader.cli", "--course", str(course)]
    env = environment("bwrap")
    return {
        "submit": median_time(cli + ["submit", assignment_id, "--workspace", str(workspace), "--student", "lone",
                                     "--gradebook", str(scratch / "lone.sqlite"), "--html",
                                     str(scratch / "lone.html")], repeats, env),
        "check": median_time(cli + ["check", assignment_id, "--workspace", str(workspace)], repeats, env),
    }


BREAKDOWN = r'''
import sys, time
t = [("start", time.perf_counter())]
from pathlib import Path
from grader.cli.main import grading_assignment
from grader.core.course import Course
t.append(("grader's command line imported", time.perf_counter()))
course = Course(Path(sys.argv[1]))
assigned = grading_assignment(course, sys.argv[2])
t.append(("assignment built, template worker started (it imports torch meanwhile)", time.perf_counter()))
from grader.pipeline.grading import GradeRequest, grade, open_submission
from grader.pipeline.record import HtmlReport, GradebookRow, deliver
from grader.storage.gradebook import Gradebook
t.append(("torch and the grading modules imported", time.perf_counter()))
submission = open_submission(assigned, sys.argv[3], student="lone")
t.append(("submission opened (files read, static checks)", time.perf_counter()))
result = grade(assigned, submission, GradeRequest(mode="submit", seed=1))
t.append(("graded (worker forked, hidden tests, diagnosis, quiz)", time.perf_counter()))
with Gradebook(Path(sys.argv[4])) as book:
    list(deliver(result, submission, [HtmlReport(Path(sys.argv[5]), course.templates_dir), GradebookRow(book)]))
t.append(("report and gradebook row written", time.perf_counter()))
for (_, a), (name, b) in zip(t, t[1:]):
    print(f"{b - a:.3f}\t{name}")
sys.stdout.flush()
import atexit, os  # the command's own end (grader.cli.process): exit handlers, then os._exit
atexit._run_exitfuncs()
os._exit(0)
'''


def breakdown(course: Path, assignment_id: str, workspace: Path, scratch: Path) -> list[tuple[float, str]]:
    """Where a lone `grade submit`'s time goes: the same library calls the command makes, timed."""
    interpreter = median_time([sys.executable, "-c", "pass"], 3)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", BREAKDOWN, str(course), assignment_id, str(workspace),
                           str(scratch / "breakdown.sqlite"), str(scratch / "breakdown.html")],
                          capture_output=True, text=True, env=environment("bwrap"), check=True)
    wall = time.perf_counter() - started
    steps = [(float(line.split("\t")[0]), line.split("\t")[1]) for line in done.stdout.splitlines() if "\t" in line]
    accounted = sum(s for s, _ in steps)
    return [(interpreter, "Python's own start"), *steps,
            (max(0.0, wall - accounted - interpreter), "exit (the template worker stopped, then os._exit)")]


def report(args, torch_s: float, results: dict, loads: list[str], ceilings: list[float]) -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"grade batch on the real course, {cpus} CPU(s); bare `python -c \"import torch\"`: {torch_s:.2f} s "
          f"(every ratio below is to it)")
    print(f"load average (1/5/15 min) before: {loads[0]}; after each round (1 min): "
          f"{', '.join(x.split('/')[0] for x in loads[1:-1])}; after: {loads[-1]}")
    print(f"this machine, two CPU-bound processes against one, before and after: "
          f"{', '.join(f'{c:.2f}x' for c in ceilings)}")
    for assignment_id, (count, settings, extra) in results.items():
        print(f"\n{assignment_id}: a class of {count} ({count // CORRECT_EVERY + (count % CORRECT_EVERY > 0)} "
              f"correct), {len(settings[0].classes)} round(s)")
        header = (f"{'run':<26} {'sandbox level':<40} {'class s':>8} {'s/sub':>6} {'x torch':>7} "
                  f"{'start-up s':>10} {'x torch':>7} {'steady s':>8} {'wrong/right':>11} {'speed-up':>8}")
        print(header)
        print("-" * len(header))
        for s in settings:
            base = next((b for b in settings if b.level == s.level and b.jobs == 1), None)
            speedup = (statistics.median(base.classes) / statistics.median(s.classes)) if base else float("nan")
            ratio = statistics.median(s.wrong_s) / statistics.median(s.correct_s) if s.correct_s and s.wrong_s \
                else float("nan")
            per = s.per_submission_s(count)
            print(f"{s.label:<26} {', '.join(sorted(s.levels)):<40} {statistics.median(s.classes):>8.1f} "
                  f"{per:>6.2f} {per / torch_s:>6.2f}x {s.startup_s(count):>10.1f} "
                  f"{s.startup_s(count) / torch_s:>6.2f}x {s.steady_s(count):>8.2f} {ratio:>10.2f}x "
                  f"{speedup:>7.2f}x")
        for name, value in extra.items():
            print(f"  {name}")
            if isinstance(value, list):
                for seconds, step in value:
                    print(f"      {seconds:6.2f} s  {step}")
    print("\ntargets: " + "; ".join(f"{k} {v}" for k, v in TARGETS.items()))
    if float(loads[0].split("/")[0]) > 0.5:
        print("note: the machine was busy when this run started (1-min load above 0.5); rerun when it is quiet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40, help="assignment 1's class size")
    parser.add_argument("--count3", type=int, default=8, help="assignment 3's class size")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rounds3", type=int, default=1)
    parser.add_argument("--levels", nargs="+", default=["bwrap", "process"], choices=["bwrap", "process"])
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--skip3", action="store_true", help="assignment 1 only")
    parser.add_argument("--lone-repeats", type=int, default=5)
    args = parser.parse_args()
    loads = [load()]
    ceilings = [machine_ceiling()]
    torch_s = bare_torch()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-course-") as temp:
        scratch = Path(temp)
        course = copy_course(scratch / "course")
        plan = [("assignment1", args.count, args.rounds)] + ([] if args.skip3 else
                                                              [("assignment3", args.count3, args.rounds3)])
        for assignment_id, count, rounds in plan:
            assignment = Assignment.load(Course(course), assignment_id)
            settings = [Setting(level, jobs) for level in args.levels for jobs in args.jobs]
            work = scratch / assignment_id
            work.mkdir()
            run_class(course, assignment, work, count, rounds, settings, loads)
            extra: dict = {}
            reference = work / "reference"
            if assignment_id == "assignment1":
                times = lone(course, assignment_id, reference, args.lone_repeats, work)
                extra[f"lone grade submit {times['submit']:.2f} s = {times['submit'] / torch_s:.2f}x torch "
                      f"(target <= {TARGETS['lone']}x); lone grade check {times['check']:.2f} s = "
                      f"{times['check'] / torch_s:.2f}x"] = None
                extra["where a lone grade submit's time goes (bubblewrap level):"] = breakdown(
                    course, assignment_id, reference, work)
            else:
                for s in settings:
                    own = statistics.median(s.correct_s) if s.correct_s else float("nan")
                    extra[f"{s.label}: the reference's own grading {own:.1f} s; a submission in the class "
                          f"{s.per_submission_s(count):.1f} s = {s.per_submission_s(count) / own:.2f}x it "
                          f"(target <= {TARGETS['assignment3']}x at --jobs 2)"] = None
            results[assignment_id] = (count, settings, extra)
    ceilings.append(machine_ceiling())
    loads.append(load())
    report(args, torch_s, results, loads, ceilings)


if __name__ == "__main__":
    main()
