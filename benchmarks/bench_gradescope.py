"""Memory and time of one Gradescope run, per assignment, at Gradescope's sandbox level.

Gradescope's default container has 768 MB of memory, half a CPU and a 10-minute timeout
(docs/GRADESCOPE.md). For each assignment this runs, in a fresh process each, with
GRADE_NO_BWRAP=1 (the no-namespace level Gradescope's containers give):

- "ready": the trusted process with everything it imports for grading (torch, pytest, the
  grader, the reference and its catalogue of mistakes) and one sandbox worker started and
  ready (the template worker it forks from included), before any test runs;
- "run": `grade autograder run` on the reference solution (or, with `--mutant ID`, the reference
  with that known mistake swapped in, so that failures and their diagnosis cost what they
  cost), as run_autograder runs it, in an /autograder-like folder, sampled every 50 ms.

Memory is summed over the whole process tree: RSS (what `ps` shows; shared pages counted in
each process) and PSS (shared pages split between the processes that share them: what the
tree really occupies). `--cpus 0` pins everything to one core (Gradescope gives half of one:
expect about twice the one-core time there).

    python benchmarks/bench_gradescope.py [--assignments assignment1 assignment2 assignment3] [--cpus 0]
                                          [--mutant flash_no_rescale]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

READY = """
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.harness.reference import load_reference
from grader.sandbox.client import Sandbox
import pytest  # noqa: F401  (the trusted process runs the hidden suite with it)
course = Course(Path({root!r}))
assignment = Assignment.load(course, {assignment!r})
manifest = assignment.manifest
load_reference(assignment)
files = {{name: (course.reference_for({assignment!r}) / name).read_bytes() for name in manifest.files}}
box = Sandbox(files, list(manifest.files), limits=manifest.limits, protected=(str(course.root),))
box.start()
box.wait_ready()
print("READY", flush=True)
sys.stdin.readline()
box.close()
"""


def tree(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def memory_mb(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) of the processes, summed, in MB."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            continue
    return rss / 1024, pss / 1024


class Sampler(threading.Thread):
    """Peak memory of a process tree, every 50 ms until stopped."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak_rss, self.peak_pss, self.done = pid, 0.0, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            rss, pss = memory_mb(tree(self.pid))
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            time.sleep(0.05)


def pinned(command: list[str], cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus, *command] if cpus else command


def ready_memory(assignment: str, env: dict, cpus: str | None) -> tuple[float, float, float]:
    """(RSS, PSS, seconds to ready) of the trusted process and one ready worker."""
    started = time.perf_counter()
    process = subprocess.Popen(pinned([sys.executable, "-c", READY.format(root=str(ROOT), assignment=assignment)],
                                      cpus), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout.readline().strip() == "READY"
    elapsed = time.perf_counter() - started
    time.sleep(0.5)  # let the tree settle
    rss, pss = memory_mb(tree(process.pid))
    process.communicate("\n", timeout=60)
    return rss, pss, elapsed


def run_memory(assignment: str, env: dict, cpus: str | None, home: Path) -> tuple[float, float, float, float]:
    """(peak RSS, peak PSS, seconds, score) of `grade autograder run` on the reference."""
    grade = str(Path(sys.executable).parent / "grade")
    command = pinned([grade, "--course", str(home / "source"), "autograder", "run", assignment, "--seed", "1"], cpus)
    started = time.perf_counter()
    process = subprocess.Popen(command, env={**env, "GRADE_AUTOGRADER_HOME": str(home)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = Sampler(process.pid)
    sampler.start()
    process.wait(timeout=3600)
    elapsed = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    score = json.loads((home / "results" / "results.json").read_text())["score"]
    return sampler.peak_rss, sampler.peak_pss, elapsed, score


def autograder_home(assignment: str, folder: Path, mutant_id: str | None) -> Path:
    """An /autograder-like folder: the bundle unzipped, the reference (with a mutant) as the submission."""
    from grader.authoring.validate import reference_workspace
    from grader.core.assignment import Assignment
    from grader.core.course import Course
    from grader.harness.reference import load_reference
    from grader.ship.autograder import MAX_TIMEOUT_MINUTES, build_autograder

    assigned = Assignment.load(Course(ROOT), assignment)
    bundle = build_autograder(assigned, folder / "bundle.zip", timeout_minutes=MAX_TIMEOUT_MINUTES)
    home = folder / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(home / "source")
    mutant = None
    if mutant_id:
        mutants = {m.id: m for m in load_reference(assigned)[1]}
        mutant = mutants[mutant_id]
    reference_workspace(assigned, home / "submission", mutant)
    (home / "submission_metadata.json").write_text(json.dumps({"created_at": "2026-01-01T00:00:00+00:00"}))
    return home


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignments", nargs="+", default=["assignment1", "assignment2", "assignment3"])
    parser.add_argument("--cpus", default=None, help="taskset CPU list, e.g. 0 for one core")
    parser.add_argument("--mutant", default=None, help="grade the reference with this mutant swapped in")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    env = {**os.environ, "GRADE_NO_BWRAP": "1"}
    env.pop("GRADE_COURSE", None)
    print(f"python {sys.version.split()[0]}, cpus {args.cpus or 'all'}, level: no namespaces (GRADE_NO_BWRAP=1), "
          f"submission: the reference" + (f" with {args.mutant}" if args.mutant else ""))
    print(f"{'assignment':<12} {'ready RSS MB':>12} {'ready PSS MB':>12} {'ready s':>8} "
          f"{'run RSS MB':>11} {'run PSS MB':>11} {'run s':>7} {'score':>6}")
    for assignment in args.assignments:
        with tempfile.TemporaryDirectory() as temp:
            home = autograder_home(assignment, Path(temp), args.mutant)
            rss, pss, ready_s = ready_memory(assignment, env, args.cpus)
            peak_rss, peak_pss, run_s, score = run_memory(assignment, env, args.cpus, home)
        print(f"{assignment:<12} {rss:>12.0f} {pss:>12.0f} {ready_s:>8.1f} {peak_rss:>11.0f} {peak_pss:>11.0f} "
              f"{run_s:>7.1f} {score:>6g}")


if __name__ == "__main__":
    main()
