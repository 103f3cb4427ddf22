"""Throughput of `grade batch`: 40 submissions of the tiny course graded by the local
pool at --jobs 1 and --jobs 2 and by the Ray executor on a local cluster, at the
no-namespace level, with one bubblewrap-level row for comparison; and the cost of
one submission inside a batch next to a lone `grade submit`.

The class is the test suite's mixed class of the tiny fixture course
(tests/class_builder.py: correct, partly wrong, broken, notebooks, zips),
cycled to 40 gradable assignment1-style submissions. Each setting starts from an
empty gradebook and writes every student's HTML report, as `grade batch` does by
default; a lone `grade submit` (a fresh process) also writes its report and records.

Targets (two cores): --jobs 2 at least 1.8x faster than --jobs 1 (printed beside the
machine's own ceiling: two CPU-bound pure-Python processes against one, measured before
and after the run; a shared or SMT machine gives less than 2x), a batch's
per-submission cost at --jobs 2 at most 1 s, and a class of 500 graded at
--jobs 2 in under 10 minutes (start-up plus 500 submissions at the measured cost).

    python benchmarks/bench_batch.py [--count 40] [--rounds 3] [--settings local:1 local:2 ray:2 bwrap:2]

The level: every setting but `bwrap:N` grades at the no-namespace level (the assignment's
sandbox switches turn bubblewrap off; every sandbox worker forks from its pool worker's
template process); `bwrap:N` grades under bubblewrap. Each row names the level its
workers reported. The machine may be shared, so the settings are interleaved: in each round
the whole class is graded at every setting in turn (alternating order, a fresh
gradebook each time), then one lone `grade submit` is timed; the median round
counts. One executor per setting lives for the whole run,
as in one `grade batch`, and its start-up (pool or cluster, warm imports, the first
two submissions) is measured apart. The load average is printed before, after each
round and after: rerun when it was high.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # class_builder, and tests.conftest it imports

from class_builder import ASSIGNMENT, STUDENTS, build_class, write_student  # noqa: E402

from grader.core.assignment import Assignment  # noqa: E402
from grader.core.course import Course  # noqa: E402
from grader.pipeline.batch import run_batch  # noqa: E402
from grader.pipeline.local_pool import LocalProcessExecutor  # noqa: E402
from grader.sandbox.isolation import SandboxSwitches  # noqa: E402
from grader.storage.gradebook import Gradebook  # noqa: E402

CLASS_OF = 500
TARGET_SPEEDUP = 1.8
TARGET_PER_SUBMISSION_S = 1.0
TARGET_CLASS_MIN = 10.0


@dataclass
class Setting:
    name: str  # local:N | ray:N | bwrap:N
    executor: object = None
    startup_s: float = 0.0
    walls: list[float] = field(default_factory=list)  # one class, per round
    graded: int = 0
    worker_s: float = 0.0
    levels: set[str] = field(default_factory=set)
    assignment: Assignment | None = None

    @property
    def jobs(self) -> int:
        return int(self.name.split(":")[1])

    @property
    def label(self) -> str:
        kind = self.name.split(":")[0]
        return {"local": f"batch --jobs {self.jobs}", "bwrap": f"batch --jobs {self.jobs}",
                "ray": f"batch --executor ray ({self.jobs} actors)"}[kind]

    @property
    def wall_s(self) -> float:
        """The median round's wall time for the whole class."""
        return statistics.median(self.walls)

    @property
    def per_submission_s(self) -> float:
        return self.wall_s / (self.graded / len(self.walls))


def make_executor(setting: Setting, course: Path):
    kind, jobs = setting.name.split(":")[0], setting.jobs
    if kind not in ("local", "bwrap", "ray"):
        raise SystemExit(f"unknown setting {setting.name!r} (local:N, ray:N or bwrap:N)")
    setting.assignment = Assignment.load(Course(course), ASSIGNMENT, SandboxSwitches(no_bubblewrap=kind != "bwrap"))
    if kind == "ray":
        from grader.pipeline.ray_executor import RayExecutor

        return RayExecutor(jobs, assignment=setting.assignment)  # starts Ray here
    return LocalProcessExecutor(jobs, assignment=setting.assignment)


def make_class(root: Path, count: int) -> tuple[Path, Path, Path]:
    """The course, a warm-up folder of two submissions, and the class: `count` submissions."""
    gradable = [s for s in STUDENTS if not s.error]
    students = [replace(gradable[i % len(gradable)], id=f"b{i + 1:03d}") for i in range(count)]
    course, _ = build_class(root, [])
    warmup = root / "warmup"
    warmup.mkdir()
    for student in (replace(gradable[0], id="w001"), replace(gradable[7], id="w002")):
        write_student(warmup, student)
    folder = root / "class"
    folder.mkdir()
    for student in students:
        write_student(folder, student)
    return course, warmup, folder


def _spin(units: int) -> float:
    """CPU-bound pure Python work, timed where it runs (the ceiling's unit of work)."""
    started = time.perf_counter()
    total = 0
    for i in range(units):
        total += i * i
    return time.perf_counter() - started


CEILING_UNITS, CEILING_REPEATS = 2_000_000, 12


def machine_ceiling() -> float:
    """This machine's own speed-up for two CPU-bound processes over one, now: the most any
    two-worker batch could reach here (a shared or SMT machine gives less than 2x)."""
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_spin, [CEILING_UNITS] * 2))  # start the pool first
        one = sum(_spin(CEILING_UNITS) for _ in range(CEILING_REPEATS))
        started = time.perf_counter()
        list(pool.map(_spin, [CEILING_UNITS] * (2 * CEILING_REPEATS)))
        two = time.perf_counter() - started
    return 2 * one / two


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def lone_submit(course: Path, workspace: Path, state: Path) -> float:
    command = [sys.executable, "-m", "grader.cli", "--course", str(course), "submit", ASSIGNMENT,
               "--workspace", str(workspace), "--gradebook", str(state / "lone.sqlite"),
               "--html", str(state / "lone.html")]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "GRADE_NO_BWRAP": "1"})  # the no-namespace level, as the local rows
    return time.perf_counter() - started


def grade(setting: Setting, course: Path, folder: Path, book_path: Path) -> tuple[float, int]:
    with Gradebook(book_path) as book:
        started = time.perf_counter()
        summary = run_batch(setting.assignment, folder, book, jobs=setting.jobs, executor=setting.executor)
        wall = time.perf_counter() - started
        if summary.errors:
            raise SystemExit(f"{setting.name}: unexpected errors: {summary.errors}")
        latest = book.latest(ASSIGNMENT)
        setting.levels.update(latest[student].result.isolation_level for student in summary.graded)
    setting.worker_s += summary.worker_s
    return wall, len(summary.graded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3,
                        help="the whole class is graded this many times at every setting, interleaved "
                             "(drift cancels; the median round counts)")
    parser.add_argument("--settings", nargs="+", default=["local:1", "local:2", "ray:2", "bwrap:2"])
    args = parser.parse_args()
    settings = [Setting(name) for name in args.settings]
    loads = [load()]
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        course, warmup, folder = make_class(root, args.count)
        state = root / "state"
        state.mkdir()
        lone_submit(course, next(folder.iterdir()), state)  # warm the file cache once
        ceilings = [machine_ceiling()]  # before any executor starts, and again after all are shut down
        try:
            for setting in settings:  # start-up: the pool or cluster, warm imports, two first submissions
                started = time.perf_counter()
                setting.executor = make_executor(setting, course)
                grade(setting, course, warmup, state / f"{setting.name.replace(':', '-')}-warmup.sqlite")
                setting.startup_s = time.perf_counter() - started
            for setting in settings:
                setting.worker_s = 0.0  # the steady state only
            lone: list[float] = []
            for r in range(args.rounds):
                order = settings if r % 2 == 0 else list(reversed(settings))
                for setting in order:  # a fresh gradebook each round: the whole class is graded again
                    book = state / f"{setting.name.replace(':', '-')}-{r}.sqlite"
                    wall, graded = grade(setting, course, folder, book)
                    setting.walls.append(wall)
                    setting.graded += graded
                lone.append(lone_submit(course, sorted(folder.iterdir())[r], state))
                loads.append(load())
        finally:
            for setting in settings:
                if setting.executor is not None:
                    setting.executor.shutdown(cancel=True)
        ceilings.append(machine_ceiling())
    report(args, settings, lone, loads, ceilings)


def report(args, settings: list[Setting], lone: list[float], loads: list[str], ceilings: list[float]) -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lone_s = statistics.median(lone)
    base = next((s for s in settings if s.name == "local:1"), settings[0])
    print(f"{args.count} submissions of the mini course graded {args.rounds} times per setting, interleaved, "
          f"{cpus} CPU(s); "
          f"levels measured: no-namespace (GRADE_NO_BWRAP=1, sandbox workers fork from a template) "
          f"unless the row says bubblewrap")
    print(f"load average (1/5/15 min) before: {loads[0]}; after each round (1 min): "
          f"{', '.join(x.split('/')[0] for x in loads[1:])}; after: {loads[-1]}")
    header = f"{'run':<34} {'sandbox level':<40} {'start-up s':>10} {'class s':>7} {'s/sub':>6} " \
             f"{'speed-up':>8} {'vs lone':>8} {f'class of {CLASS_OF}':>12}"
    print(header)
    print("-" * len(header))
    for s in settings:
        level = ", ".join(sorted(s.levels))
        speedup = base.wall_s / s.wall_s
        minutes = (s.startup_s + CLASS_OF * s.per_submission_s) / 60
        print(f"{s.label:<34} {level:<40} {s.startup_s:>10.1f} {s.wall_s:>7.1f} {s.per_submission_s:>6.2f} "
              f"{speedup:>7.2f}x {s.per_submission_s / lone_s:>7.2f}x {minutes:>9.1f} min")
    print(f"{'grade submit (lone, median)':<34} {'':<40} {'':>10} {'':>7} {lone_s:>6.2f} {'':>8} {1.0:>7.2f}x"
          f"   ({', '.join(f'{x:.1f}' for x in lone)} s)")
    for s in settings:
        print(f"  {s.label}: mean time of one job inside its worker {s.worker_s / s.graded:.2f} s")
    two = next((s for s in settings if s.name == "local:2"), None)
    if two is not None and base is not two:
        minutes = (two.startup_s + CLASS_OF * two.per_submission_s) / 60
        print(f"targets at --jobs 2 (no-namespace level): speed-up {base.wall_s / two.wall_s:.2f}x "
              f"(>= {TARGET_SPEEDUP}x), {two.per_submission_s:.2f} s per submission (<= "
              f"{TARGET_PER_SUBMISSION_S:g} s), a class of {CLASS_OF} in {minutes:.1f} min "
              f"(< {TARGET_CLASS_MIN:g} min)")
        print(f"this machine, two CPU-bound pure-Python processes against one, before and after the run: "
              f"{', '.join(f'{c:.2f}x' for c in ceilings)} (the most --jobs 2 could reach here, and how much "
              f"that varies on this machine)")
    if float(loads[0].split("/")[0]) > 0.5:
        print("note: the machine was busy when this run started (1-min load above 0.5); rerun when it is quiet")


if __name__ == "__main__":
    main()
