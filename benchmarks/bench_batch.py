"""Throughput of `grade batch`: 40 submissions at --jobs 1 and --jobs 2, and the
cost of one submission inside a batch next to a lone `grade submit`.

The class is the test suite's mixed class of the tiny fixture course
(tests/class_builder.py: correct, partly wrong, broken, notebooks, zips),
cycled to 40 gradable submissions. Each batch starts from an empty gradebook
and writes every student's HTML report, as `grade batch` does by default; a
lone `grade submit` (a fresh process) also writes its report and records.

Targets: --jobs 2 at least 1.8x faster than --jobs 1 on two cores, and a
batch's per-submission cost below a lone `grade submit`.

    python benchmarks/bench_batch.py [--count 40] [--jobs 1 2] [--lone 3]
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
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from class_builder import ASSIGNMENT, STUDENTS, build_class  # noqa: E402

from grader.batch import run_batch  # noqa: E402
from grader.course import Course  # noqa: E402
from grader.gradebook import Gradebook  # noqa: E402


def make_class(root: Path, count: int):
    gradable = [s for s in STUDENTS if not s.error]
    students = [replace(gradable[i % len(gradable)], id=f"b{i + 1:03d}") for i in range(count)]
    return build_class(root, students)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def batch_once(course: Path, submissions: Path, jobs: int, state: Path) -> tuple[float, int, float]:
    """(wall seconds, graded, summed job seconds) from an empty gradebook and reports folder."""
    shutil.rmtree(course / ".grade", ignore_errors=True)
    gradebook = state / f"jobs{jobs}.sqlite"
    gradebook.unlink(missing_ok=True)
    with Gradebook(gradebook) as book:
        started = time.perf_counter()
        summary = run_batch(Course(course), ASSIGNMENT, submissions, book, jobs=jobs)
        wall = time.perf_counter() - started
    if summary.errors:
        raise SystemExit(f"unexpected errors: {summary.errors}")
    return wall, len(summary.graded), summary.worker_s


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
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lone", type=int, default=3, help="lone `grade submit` runs (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        course, submissions = make_class(root, args.count)
        state = root / "state"
        state.mkdir()
        sample = sorted(p for p in submissions.iterdir() if p.is_dir())[: max(1, args.lone)]
        lone_submit(course, sample[0], state)  # warm the file cache once
        lone = []
        for workspace in sample:
            lone.append(lone_submit(course, workspace, state))
        lone_s = statistics.median(lone)
        runs = {}
        for jobs in args.jobs:
            before = load()
            runs[jobs] = (*batch_once(course, submissions, jobs, state), before, load())
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    first = runs[args.jobs[0]][0]
    print(f"{args.count} submissions of the mini course, {cpus} CPU(s); load average 1/5/15 min shown per run")
    print(f"{'run':<26} {'wall s':>8} {'s/submission':>13} {'speed-up':>9} {'vs lone submit':>15}  load before→after")
    for jobs, (wall, graded, _worker_s, before, after) in runs.items():
        per = wall / graded
        print(f"{'grade batch --jobs ' + str(jobs):<26} {wall:>8.1f} {per:>13.2f} {first / wall:>8.2f}x "
              f"{per / lone_s:>14.2f}x  {before} → {after}")
    print(f"{'grade submit (lone, median)':<26} {'':>8} {lone_s:>13.2f} {'':>9} {1.0:>14.2f}x  "
          f"({', '.join(f'{x:.1f}' for x in lone)} s)")
    for jobs, (_wall, graded, worker_s, *_rest) in runs.items():
        print(f"  --jobs {jobs}: mean job time inside the pool {worker_s / graded:.2f} s")
    if 1 in runs and 2 in runs:
        ratio = runs[1][0] / runs[2][0]
        print(f"--jobs 2 vs --jobs 1: {ratio:.2f}x (target >= 1.8x on two cores)")
    one = runs[args.jobs[0]]
    print(f"batch per-submission cost / lone submit: {one[0] / one[1] / lone_s:.2f} (target < 1)")


if __name__ == "__main__":
    main()
