"""One table from `grade submit --json` results: the score, per task, and the timing tests' verdicts.

    python3 scripts/gpu_summary.py reference.json slow.json

A pending test (timing without a GPU) has no score: it is shown as pending, with its points.
`task_scores` and `timing_rows` are used by scripts/gpu_check.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def task_of(test: dict) -> str:
    """The test's task: its first tag (grade submit tags each test with its task id)."""
    tags = test.get("tags") or []
    return tags[0] if tags else test.get("name", "?").split(" · ")[0]


def is_pending(test: dict) -> bool:
    return bool((test.get("extra_data") or {}).get("pending")) or "not_run" in (test.get("tags") or [])


def task_scores(data: dict) -> dict[str, dict]:
    """task → {"score", "max", "pending", "tests", "passed"} from one results.json."""
    tasks: dict[str, dict] = {}
    for test in data.get("tests", []):
        entry = tasks.setdefault(task_of(test), {"score": 0.0, "max": 0.0, "pending": 0, "tests": 0, "passed": 0})
        entry["tests"] += 1
        if is_pending(test):
            entry["pending"] += 1
            entry["max"] += float((test.get("extra_data") or {}).get("max_score", 0.0))
            continue
        entry["score"] += float(test.get("score", 0.0))
        entry["max"] += float(test.get("max_score", 0.0))
        entry["passed"] += test.get("status") == "passed"
    return tasks


def timing_rows(data: dict) -> list[dict]:
    """The timing tests: name, points (None when pending), max and the detail the report shows."""
    rows = []
    for test in data.get("tests", []):
        if "timing" not in test.get("tags", []) and "speed" not in test.get("name", ""):
            continue
        pending = is_pending(test)
        rows.append({"name": test.get("name", "?"), "pending": pending,
                     "score": None if pending else float(test.get("score", 0.0)),
                     "max": float(test.get("max_score", (test.get("extra_data") or {}).get("max_score", 0.0))),
                     "detail": " ".join(str(test.get("output", "")).replace("\\", "").split())[:300]})
    return rows


def main(paths: list[str]) -> None:
    print(f"{'submission':<14} {'score':>8} {'timing test':<44} {'points':>11}  detail")
    for path in paths:
        data = json.loads(Path(path).read_text())
        name = Path(path).stem
        print(f"{name:<14} {data.get('score', 0):>8g}")
        for row in timing_rows(data):
            points = "pending" if row["pending"] else f"{row['score']:g}"
            print(f"{'':<14} {'':>8} {row['name'][-44:]:<44} {points:>6}/{row['max']:<4g}  {row['detail'][:90]}")


if __name__ == "__main__":
    main(sys.argv[1:])
