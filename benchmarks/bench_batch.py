"""Throughput of `grade batch`: 40 submissions of the tiny course graded by the local
pool at --jobs 1 and --jobs 2 and by the Ray executor on a local cluster, at the
no-namespace level, with one bubblewrap-level row for comparison; and the cost of
one submission inside a batch next to a lone `grade submit`.

The class is the test suite's mixed class of the tiny fixture course
(tests/class_builder.py: correct, partly wrong, broken, notebooks, zips),
cycled to 40 gradable assignment1-style submissions. Each setting starts from an
empty gradebook and writes every student's HTML report, as `grade batch` does by
default; a lone `grade submit` (a fresh process) also writes its report and records.

Targets (two cores): --jobs 2 at least 1.8x faster than --jobs 1, a batch's
per-submission cost at --jobs 2 at most 1 s, and a class of 500 graded at
--jobs 2 in under 10 minutes (start-up plus 500 submissions at the measured cost).

    python benchmarks/bench_batch.py [--count 40] [--rounds 5] [--settings local:1 local:2 ray:2 bwrap:2]

The level: this script sets GRADE_NO_BWRAP=1 (the no-namespace level, where every
sandbox worker forks from its pool worker's template process) for every setting but
`bwrap:N`, whose pool workers use bubblewrap; each row names the level its workers
reported. The machine may be shared, so the settings are interleaved: the class is
cut into slices and each slice is graded at every setting in turn (alternating
order), with one lone `grade submit` per slice; one executor per setting lives for
the whole run, as in one `grade batch`, and its start-up (pool or cluster, warm
imports, the first two submissions) is measured apart. The load average is printed
before, after each slice and after: rerun when it was high.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

os.environ["GRADE_NO_BWRAP"] = "1"  # before any worker starts: the level this benchmark measures

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from class_builder import ASSIGNMENT, STUDENTS, build_class, write_student  # noqa: E402

from grader.core.course import Course  # noqa: E402
from grader.pipeline.batch import LocalProcessExecutor, _warm_worker, run_batch  # noqa: E402
from grader.storage.gradebook import Gradebook  # noqa: E402

CLASS_OF = 500
TARGET_SPEEDUP = 1.8
TARGET_PER_SUBMISSION_S = 1.0
TARGET_CLASS_MIN = 10.0


def _bubblewrap_worker(course_root: str, assignment_id: str) -> None:
    """Pool initializer of the bubblewrap row: this worker's sandboxes use bubblewrap again."""
    os.environ.pop("GRADE_NO_BWRAP", None)
    _warm_worker(course_root, assignment_id)


class BubblewrapPool(LocalProcessExecutor):
    """The local pool, whose workers grade at the bubblewrap level (the comparison row)."""

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context("forkserver"),
                                   initializer=_bubblewrap_worker, initargs=self._initargs)


@dataclass
class Setting:
    name: str  # local:N | ray:N | bwrap:N
    executor: object = None
    startup_s: float = 0.0
    wall_s: float = 0.0
    graded: int = 0
    worker_s: float = 0.0
    levels: set[str] = field(default_factory=set)

    @property
    def jobs(self) -> int:
        return int(self.name.split(":")[1])

    @property
    def label(self) -> str:
        kind = self.name.split(":")[0]
        return {"local": f"batch --jobs {self.jobs}", "bwrap": f"batch --jobs {self.jobs}",
                "ray": f"batch --executor ray ({self.jobs} actors)"}[kind]

    @property
    def per_submission_s(self) -> float:
        return self.wall_s / self.graded


def make_executor(setting: Setting, course: Path):
    kind, jobs = setting.name.split(":")[0], setting.jobs
    if kind == "local":
        return LocalProcessExecutor(jobs, course_root=str(course), assignment_id=ASSIGNMENT)
    if kind == "bwrap":
        return BubblewrapPool(jobs, course_root=str(course), assignment_id=ASSIGNMENT)
    if kind == "ray":
        from grader.pipeline.ray_executor import RayExecutor

        return RayExecutor(jobs, course_root=str(course), assignment_id=ASSIGNMENT)  # starts Ray here
    raise SystemExit(f"unknown setting {setting.name!r} (local:N, ray:N or bwrap:N)")


def make_class(root: Path, count: int, rounds: int) -> tuple[Path, Path, list[Path]]:
    """The course, a warm-up folder of two submissions, and `rounds` folders that hold `count`."""
    gradable = [s for s in STUDENTS if not s.error]
    students = [replace(gradable[i % len(gradable)], id=f"b{i + 1:03d}") for i in range(count)]
    course, _ = build_class(root, [])
    warmup = root / "warmup"
    warmup.mkdir()
    for student in (replace(gradable[0], id="w001"), replace(gradable[7], id="w002")):
        write_student(warmup, student)
    folders = []
    for r in range(rounds):
        folder = root / f"round{r}"
        folder.mkdir()
        for student in students[r::rounds]:
            write_student(folder, student)
        folders.append(folder)
    return course, warmup, folders


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def lone_submit(course: Path, workspace: Path, state: Path) -> float:
    command = [sys.executable, "-m", "grader.cli", "--course", str(course), "submit", ASSIGNMENT,
               "--workspace", str(workspace), "--gradebook", str(state / "lone.sqlite"),
               "--html", str(state / "lone.html")]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def grade(setting: Setting, course: Path, folder: Path, book_path: Path) -> tuple[float, int]:
    with Gradebook(book_path) as book:
        started = time.perf_counter()
        summary = run_batch(Course(course), ASSIGNMENT, folder, book, jobs=setting.jobs,
                            executor=setting.executor)
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
    parser.add_argument("--rounds", type=int, default=5,
                        help="the class is graded in this many slices, settings interleaved (drift cancels)")
    parser.add_argument("--settings", nargs="+", default=["local:1", "local:2", "ray:2", "bwrap:2"])
    args = parser.parse_args()
    settings = [Setting(name) for name in args.settings]
    loads = [load()]
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        course, warmup, folders = make_class(root, args.count, args.rounds)
        state = root / "state"
        state.mkdir()
        lone_submit(course, next(folders[0].iterdir()), state)  # warm the file cache once
        try:
            for setting in settings:  # start-up: the pool or cluster, warm imports, two first submissions
                started = time.perf_counter()
                setting.executor = make_executor(setting, course)
                grade(setting, course, warmup, state / f"{setting.name.replace(':', '-')}-warmup.sqlite")
                setting.startup_s = time.perf_counter() - started
            for setting in settings:
                setting.worker_s = 0.0  # the steady state only
            lone: list[float] = []
            for r, folder in enumerate(folders):
                order = settings if r % 2 == 0 else list(reversed(settings))
                for setting in order:
                    wall, graded = grade(setting, course, folder, state / f"{setting.name.replace(':', '-')}.sqlite")
                    setting.wall_s += wall
                    setting.graded += graded
                lone.append(lone_submit(course, sorted(folder.iterdir())[0], state))
                loads.append(load())
        finally:
            for setting in settings:
                if setting.executor is not None:
                    setting.executor.shutdown(cancel=True)
    report(args, settings, lone, loads)


def report(args, settings: list[Setting], lone: list[float], loads: list[str]) -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lone_s = statistics.median(lone)
    base = next((s for s in settings if s.name == "local:1"), settings[0])
    print(f"{args.count} submissions of the mini course in {args.rounds} interleaved slices, {cpus} CPU(s); "
          f"levels measured: no-namespace (GRADE_NO_BWRAP=1, sandbox workers fork from a template) "
          f"unless the row says bubblewrap")
    print(f"load average (1/5/15 min) before: {loads[0]}; after each slice (1 min): "
          f"{', '.join(x.split('/')[0] for x in loads[1:])}; after: {loads[-1]}")
    header = f"{'run':<34} {'sandbox level':<40} {'start-up s':>10} {'wall s':>7} {'s/sub':>6} " \
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
    if float(loads[0].split("/")[0]) > 0.5:
        print("note: the machine was busy when this run started (1-min load above 0.5); rerun when it is quiet")


if __name__ == "__main__":
    main()
