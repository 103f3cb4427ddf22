"""Load on `grade serve`: a class uploading at once from many clients, each following its status stream
until its report is ready, against the real server (a process on a loopback port) grading the tiny course
with the local pool.

Prints the time from upload to report (median, 95th percentile), the queue's peak (queued jobs, sampled
from the gradebook every half second), the server's memory (its own peak resident set, and with its pool
workers and their sandboxes at the end), and whether every submission was graded exactly once (one job
per upload, one recording per job, no grading replaced).

    python benchmarks/bench_serve.py [--students 200] [--clients 25] [--jobs 2]

Half the class uploads the reference, half the stubs, each with a line of its own (200 distinct uploads).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from serve_client import MINI_ANSWERS, Client, ServerProcess, job_id, serving_copy  # noqa: E402

from grader.core.course import Course  # noqa: E402
from grader.serve.server import sign_in_link  # noqa: E402
from tests.conftest import MINI_COURSE  # noqa: E402

REFERENCE = (MINI_COURSE / "reference" / "mini" / "mini.py").read_bytes()
STUB = (MINI_COURSE / "assignments" / "mini" / "mini.py").read_bytes()


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def one_student(server: ServerProcess, course: Course, number: int) -> tuple[float, str]:
    student = f"s{number:03d}"
    client = Client(server.url)
    client.get(sign_in_link(course, student, base_url=server.url))
    code = (REFERENCE if number % 2 == 0 else STUB) + f"\n# {student}\n".encode()
    started = time.monotonic()
    job = job_id(client.upload("mini", [("mini.py", code), ("answers.toml", MINI_ANSWERS)]))
    state = client.events(job)[-1]["state"]
    report = client.get(f"/jobs/{job}/report")
    if report.status != 200:
        state = f"{state}, report {report.status}"
    return time.monotonic() - started, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--clients", type=int, default=25)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        course_root = serving_copy(MINI_COURSE, Path(folder) / "course")
        server = ServerProcess(course_root, "--jobs", str(args.jobs))
        book = course_root / ".grade" / "gradebook.sqlite"
        peak, done = [0], threading.Event()

        def sample() -> None:
            while not done.is_set():
                try:
                    with sqlite3.connect(f"file:{book}?mode=ro", uri=True) as con:
                        queued = con.execute("SELECT COUNT(*) FROM jobs WHERE state = 'queued'").fetchone()[0]
                    peak[0] = max(peak[0], queued)
                except sqlite3.Error:
                    pass
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        try:
            with ThreadPoolExecutor(args.clients) as clients:
                outcomes = list(clients.map(lambda n: one_student(server, Course(course_root), n),
                                            range(args.students)))
            wall = time.monotonic() - started
            done.set()
            server_peak = memory_kib(server.process.pid, "VmHWM")
            everything = sum(memory_kib(pid, "VmRSS") for pid in tree(server.process.pid))
        finally:
            server.stop()
        with sqlite3.connect(book) as con:
            jobs, recorded = con.execute("SELECT COUNT(*), SUM(recorded) FROM jobs").fetchone()
            graded = con.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
            replaced = con.execute("SELECT COUNT(*) FROM grading_history").fetchone()[0]
    seconds = sorted(s for s, _ in outcomes)
    states = {state for _, state in outcomes}
    p95 = seconds[max(0, int(round(0.95 * len(seconds))) - 1)]
    once = jobs == recorded == graded == args.students and replaced == 0 and states == {"done"}
    rows = [("students (clients at once)", f"{args.students} ({args.clients})"),
            ("grading slots (--jobs)", str(args.jobs)),
            ("wall time", f"{wall:.1f} s ({args.students / wall * 60:.0f} submissions a minute)"),
            ("upload to report, median", f"{statistics.median(seconds):.1f} s"),
            ("upload to report, 95th percentile", f"{p95:.1f} s"),
            ("queue peak (queued jobs)", str(peak[0])),
            ("server memory, peak resident", f"{server_peak / 1024:.0f} MiB"),
            ("server + pool + sandboxes, resident at the end", f"{everything / 1024:.0f} MiB"),
            ("jobs / recorded / gradings / replaced", f"{jobs} / {recorded} / {graded} / {replaced}"),
            ("every submission graded exactly once", "yes" if once else f"NO (states {sorted(states)})")]
    width = max(len(name) for name, _ in rows)
    print(f"grade serve under load (load average before: {load_before:.1f}, after: {os.getloadavg()[0]:.1f})")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    sys.exit(0 if once else 1)


if __name__ == "__main__":
    main()
