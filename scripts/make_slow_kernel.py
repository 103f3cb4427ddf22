"""Write a slow but correct assignment 3 submission: the reference with 16 × 16 tiles.

    python scripts/make_slow_kernel.py OUT_DIR

OUT_DIR gets flash.py, reference/assignment3/flash.py with BLOCK_M, BLOCK_N,
BWD_BLOCK_M and BWD_BLOCK_N set to 16 (many more loop steps and kernel programs, the same result)
and a docstring of its own, and efficient.py, the reference's unchanged. Used by
tests/test_assignment3_content.py (every flash_forward correctness test must
pass on it) and scripts/gpu_check.sh (it is timed against the reference).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference" / "assignment3"

DOCSTRING = '''"""A slow but correct submission of assignment 3's flash.py: the reference with 16 × 16 tiles.

Used by tests/test_assignment3_content.py: tiny tiles make many more loop steps (and
kernel programs), but the result is the same, so every correctness test must pass.
Self-contained like any submission (torch, triton, math).
"""
'''
# constant → its whole line in the slow kernel
TILES = {
    "BLOCK_M": "BLOCK_M = 16  # query rows per program (tiny on purpose)",
    "BLOCK_N": "BLOCK_N = 16  # keys per step of the loop (tiny on purpose)",
    "BWD_BLOCK_M": "BWD_BLOCK_M = 16  # tile sizes of the backward kernels (tiny on purpose)",
    "BWD_BLOCK_N": "BWD_BLOCK_N = 16",
}


def slow_flash_source(reference: str) -> str:
    """The reference flash.py's text with the slow kernel's docstring and tile sizes."""
    if not reference.startswith('"""'):
        raise ValueError("the reference flash.py does not start with its docstring")
    body = reference[reference.index('"""\n', 3) + 4:]
    lines = body.splitlines(keepends=True)
    for name, line in TILES.items():
        found = [i for i, old in enumerate(lines) if old.startswith(f"{name} = ")]
        if len(found) != 1:
            raise ValueError(f"the reference flash.py sets {name} {len(found)} times at module level, not once")
        lines[found[0]] = line + "\n"
    return DOCSTRING + "".join(lines)


def write_slow_kernel(out_dir: Path, reference: Path = REFERENCE) -> Path:
    """Write the slow submission (flash.py, efficient.py) into `out_dir`; returns `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = (reference / "flash.py").read_text(encoding="utf-8")
    (out_dir / "flash.py").write_text(slow_flash_source(source), encoding="utf-8")
    shutil.copyfile(reference / "efficient.py", out_dir / "efficient.py")
    return out_dir


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/make_slow_kernel.py OUT_DIR", file=sys.stderr)
        return 2
    print(write_slow_kernel(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
