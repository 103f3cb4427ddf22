"""Throughput of `grade batch`: 40 submissions at --jobs 1 and --jobs 2, and the
cost of one submission inside a batch next to a lone `grade submit`.

The class is the test suite's mixed class of the tiny fixture course
(tests/class_builder.py: correct, partly wrong, broken, notebooks, zips),
cycled to 40 gradable submissions. Each batch starts from an empty gradebook
and writes every student's HTML report, as `grade batch` does by default; a
lone `grade submit` (a fresh process) also writes its report and records.

Targets: --jobs 2 at least 1.8x faster than --jobs 1 on two cores, and a
batch's per-submission cost below a lone `grade submit`.

    python benchmarks/bench_batch.py [--count 40] [--rounds 5] [--jobs 1 2]

The machine may be shared, so the settings are interleaved: the class is cut
into slices and each slice is graded at every setting in turn (alternating
order), with one lone `grade submit` per slice; one process pool per setting
lives for the whole run, as it would in one `grade batch`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from class_builder import ASSIGNMENT, STUDENTS, build_class, write_student  # noqa: E402

from grader.core.course import Course  # noqa: E402
from grader.pipeline.batch import LocalProcessExecutor, run_batch  # noqa: E402
from grader.storage.gradebook import Gradebook  # noqa: E402


def make_class(root: Path, count: int, rounds: int) -> tuple[Path, list[Path]]:
    """The course and `rounds` folders that together hold `count` submissions."""
    gradable = [s for s in STUDENTS if not s.error]
    students = [replace(gradable[i % len(gradable)], id=f"b{i + 1:03d}") for i in range(count)]
    course, _ = build_class(root, [])
    folders = []
    for r in range(rounds):
        folder = root / f"round{r}"
        folder.mkdir()
        for student in students[r::rounds]:
            write_student(folder, student)
        folders.append(folder)
    return course, folders


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def lone_submit(course: Path, workspace: Path, state: Path) -> float:
    command = [sys.executable, "-m", "grader.cli", "--course", str(course), "submit", ASSIGNMENT,
               "--workspace", str(workspace), "--gradebook", str(state / "lone.sqlite"),
               "--html", str(state / "lone.html")]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5,
                        help="the class is graded in this many slices, settings interleaved (drift cancels)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        course, folders = make_class(root, args.count, args.rounds)
        state = root / "state"
        state.mkdir()
        lone_submit(course, next(folders[0].iterdir()), state)  # warm the file cache once
        # one pool per setting for the whole run, as in one `grade batch`: its start-up is paid once
        executors = {jobs: LocalProcessExecutor(jobs, course_root=str(course), assignment_id=ASSIGNMENT)
                     for jobs in args.jobs}
        walls = {jobs: 0.0 for jobs in args.jobs}
        graded = {jobs: 0 for jobs in args.jobs}
        worker = {jobs: 0.0 for jobs in args.jobs}
        lone: list[float] = []
        loads = [load()]
        try:
            for r, folder in enumerate(folders):
                order = args.jobs if r % 2 == 0 else list(reversed(args.jobs))
                for jobs in order:
                    with Gradebook(state / f"jobs{jobs}.sqlite") as book:
                        started = time.perf_counter()
                        summary = run_batch(Course(course), ASSIGNMENT, folder, book, jobs=jobs,
                                            executor=executors[jobs])
                        walls[jobs] += time.perf_counter() - started
                    if summary.errors:
                        raise SystemExit(f"unexpected errors: {summary.errors}")
                    graded[jobs] += len(summary.graded)
                    worker[jobs] += summary.worker_s
                lone.append(lone_submit(course, sorted(folder.iterdir())[0], state))
                loads.append(load())
        finally:
            for executor in executors.values():
                executor.shutdown()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lone_s = statistics.median(lone)
    first = walls[args.jobs[0]]
    print(f"{args.count} submissions of the mini course in {args.rounds} interleaved slices, {cpus} CPU(s)")
    print(f"load average (1 min) after each slice: {', '.join(x.split('/')[0] for x in loads)}")
    print(f"{'run':<28} {'wall s':>8} {'s/submission':>13} {'speed-up':>9} {'vs lone submit':>15}")
    for jobs in args.jobs:
        per = walls[jobs] / graded[jobs]
        print(f"{'grade batch --jobs ' + str(jobs):<28} {walls[jobs]:>8.1f} {per:>13.2f} "
              f"{first / walls[jobs]:>8.2f}x {per / lone_s:>14.2f}x")
    print(f"{'grade submit (lone, median)':<28} {'':>8} {lone_s:>13.2f} {'':>9} {1.0:>14.2f}x"
          f"   ({', '.join(f'{x:.1f}' for x in lone)} s)")
    for jobs in args.jobs:
        print(f"  --jobs {jobs}: mean time of one job inside its pool worker {worker[jobs] / graded[jobs]:.2f} s")
    if 1 in walls and 2 in walls:
        print(f"--jobs 2 vs --jobs 1: {walls[1] / walls[2]:.2f}x (target >= 1.8x on two cores)")
    base = args.jobs[0]
    print(f"batch (--jobs {base}) per-submission cost / lone submit: "
          f"{walls[base] / graded[base] / lone_s:.2f} (target < 1)")


if __name__ == "__main__":
    main()
