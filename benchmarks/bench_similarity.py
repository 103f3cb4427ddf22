"""The similarity pass on student files at the intake's size cap: the old way against the new.

A class report reads every recorded submission's files once (grader.render.similarity). Each
pathological file is as large as intake keeps (grader.intake.submission.MAX_SOURCE_BYTES):
blank lines, one long line, deep nesting, as many tokens as bytes allow. Rows:

- `new`: `winnowed_hashes` of the whole file (tokenise, hash every k-gram, winnow), as the
  class report runs it now;
- `old`: the pass as it was (the import search `^\\s*...` started at every line and ran over all
  the blank lines after it; a window slice per position), timed on growing prefixes of the file
  while that stays under `--old-limit` seconds, then extrapolated to the cap from the last two
  sizes (marked `~`): at the cap it would run for hours.

    python benchmarks/bench_similarity.py [--old-limit 20]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import time

from grader.intake.submission import MAX_SOURCE_BYTES
from grader.render import similarity

CAP = MAX_SOURCE_BYTES
FILES = {
    "blank lines": "\n" * CAP,
    "one long line": "x = " + "1+" * (CAP // 2 - 3) + "1\n",
    "deep nesting": "".join("    " * d + f"if x{d}:\n" for d in range(90)) + "    " * 90 + "pass\n",
    "many tokens": "a(b)\n" * (CAP // 5),
    "unclosed bracket": "f(\n" + "\n" * (CAP - 4),
}


def old_imported_names(text: str) -> set[str]:
    names = set()
    for match in re.finditer(r"^\s*(?:from\s+\S+\s+)?import\s+(.+)$", text, re.MULTILINE):
        for part in match.group(1).strip("() ").split(","):
            words = part.split()
            if words:
                names.add(words[-1] if "as" in words else words[0].split(".")[0])
    return names


def old_winnowed(text: str, k: int = similarity.K, window: int = similarity.WINDOW) -> int:
    """The old pass (its import search and its window slices); the number of hashes kept."""
    old_imported_names(text)
    stream = similarity.tokens(text)
    if len(stream) < k:
        return 1 if stream else 0
    grams = [(int.from_bytes(hashlib.blake2b("\x1f".join(t for t, _ in stream[i:i + k]).encode(),
                                             digest_size=8).digest(), "big"), stream[i][1])
             for i in range(len(stream) - k + 1)]
    chosen = {}
    for start in range(max(1, len(grams) - window + 1)):
        block = grams[start:start + window]
        low = min(h for h, _ in block)
        position = max(i for i, (h, _) in enumerate(block) if h == low)
        chosen[start + position] = block[position]
    return len(chosen)


def timed(function, text: str) -> float:
    started = time.perf_counter()
    function(text)
    return time.perf_counter() - started


def old_at_cap(text: str, limit_s: float) -> tuple[float, bool]:
    """(seconds, measured) for the old pass on `text`: measured whole if it fits `limit_s`, else
    extrapolated from growing prefixes with the exponent the last two sizes show."""
    size, points = 4096, []
    while size < len(text):
        seconds = timed(old_winnowed, text[:size])
        points.append((size, seconds))
        if seconds * 4 > limit_s:  # the next prefix (twice as long) could take four times as long
            break
        size *= 2
    else:
        return timed(old_winnowed, text), True
    if len(points) < 2 or points[-2][1] <= 0:
        return points[-1][1] * len(text) / points[-1][0], False
    (n1, t1), (n2, t2) = points[-2:]
    exponent = max(1.0, math.log(t2 / t1) / math.log(n2 / n1)) if t1 > 0 and t2 > 0 else 1.0
    return t2 * (len(text) / n2) ** exponent, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-limit", type=float, default=20.0, help="seconds the old pass may run per file")
    args = parser.parse_args()
    print(f"similarity pass on one file at the cap ({CAP // 1024} KiB)")
    print(f"{'file':<18} {'tokens':>8} {'new s':>8} {'old s':>12} {'old/new':>9}")
    for name, text in FILES.items():
        text = text.encode()[:CAP].decode()
        new = timed(similarity.winnowed_hashes, text)
        old, measured = old_at_cap(text, args.old_limit)
        mark = "" if measured else "~"
        print(f"{name:<18} {len(similarity.tokens(text)):>8} {new:>8.2f} {mark + f'{old:.1f}':>12} "
              f"{old / max(new, 1e-9):>9.0f}")


if __name__ == "__main__":
    main()
