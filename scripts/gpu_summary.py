"""One table from `grade submit --json` results: score and the timing tests' verdicts.

    python scripts/gpu_summary.py reference.json slow.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(paths: list[str]) -> None:
    print(f"{'submission':<14} {'score':>8} {'timing test':<44} {'points':>9}  detail")
    for path in paths:
        data = json.loads(Path(path).read_text())
        name = Path(path).stem
        timed = [t for t in data["tests"] if "timing" in t.get("tags", []) or "speed" in t["name"]]
        print(f"{name:<14} {data['score']:>8g}")
        for test in timed:
            detail = test["output"].replace("\n", " ")[:90]
            print(f"{'':<14} {'':>8} {test['name'][:44]:<44} "
                  f"{test['score']:>4g}/{test['max_score']:<4g}  {detail}")


if __name__ == "__main__":
    main(sys.argv[1:])
