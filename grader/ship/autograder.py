"""A Gradescope autograder bundle for one assignment.

Gradescope unpacks the zip into /autograder/source, runs `setup.sh` once
when it builds the image, then `run_autograder` for every submission. The
bundle carries the grader's source and exactly the course files this
assignment needs (its manifest and stubs, its reference and hidden tests,
the reference kernels), never another assignment's reference.

`run_autograder` grades a copy of /autograder/submission with
`grade submit ... --no-record` (no gradebook on Gradescope: its own
database keeps the scores) and writes /autograder/results/results.json. A
single uploaded notebook or zip is graded as such. When the grader cannot
grade at all, it still writes a results.json that says so, with score 0,
so the student sees a reason instead of a bare failure.
"""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path

from grader.core.course import ENGINE_ROOT, Course
from grader.core.manifest import load_manifest
from grader.intake.submission import SKIPPED_PARTS
from grader.ship.release import ZIP_DATE

SETUP_SH = """#!/usr/bin/env bash
# Runs once when Gradescope builds the autograder image.
set -euo pipefail
cd /autograder/source
apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null || true  # stronger sandbox where allowed
python3 -m pip install --upgrade pip
# torch: Gradescope machines have no GPU, so the CPU wheel is enough and much smaller.
# (For a CUDA runner, drop --index-url and install the wheel matching its driver instead;
# timing tasks are only judged with a CUDA device and stay "pending" without one.)
python3 -m pip install torch --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install -e /autograder/source
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Grades one submission: /autograder/submission -> /autograder/results/results.json
set -uo pipefail
ASSIGNMENT={assignment}
MODULES=({modules})
SOURCE=/autograder/source
RESULTS=/autograder/results/results.json
mkdir -p /autograder/results
WORK=$(mktemp -d)
cp -r /autograder/submission/. "$WORK/"
# A lone notebook or zip (and none of the module files) is graded as that notebook or zip.
WORKSPACE="$WORK"
have_module=0
for m in "${{MODULES[@]}}"; do [ -f "$WORK/$m" ] && have_module=1; done
if [ "$have_module" = 0 ]; then
  for f in "$WORK"/*.ipynb "$WORK"/*.zip; do [ -f "$f" ] && WORKSPACE="$f" && break; done
fi
SUBMITTED_AT=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("created_at", ""))' \
  /autograder/submission_metadata.json 2>/dev/null || true)
ARGS=(--course "$SOURCE" submit "$ASSIGNMENT" --workspace "$WORKSPACE" --student gradescope
      --json "$RESULTS" --html "$WORK/../report.html" --no-record)
# Our late policy applies the manifest's penalty; turn Gradescope's own late penalty off.
[ -n "$SUBMITTED_AT" ] && ARGS+=(--submitted-at "$SUBMITTED_AT")
if ! grade "${{ARGS[@]}}" 2>"$WORK/../grade-error.txt"; then
  python3 - "$WORK/../grade-error.txt" "$RESULTS" <<'PY'
import json, sys
reason = open(sys.argv[1], encoding="utf-8", errors="replace").read().strip().splitlines()
reason = reason[-1] if reason else "unknown error"
json.dump({{"score": 0, "output": "The grader could not grade this submission: " + reason
           + " Check that you uploaded the assignment's files (or one notebook or zip).",
           "tests": []}}, open(sys.argv[2], "w"))
PY
fi
"""




def _tree(top: Path, base: Path) -> dict[str, Path]:
    items = [top] if top.is_file() else sorted(top.rglob("*"))
    found = {}
    for item in items:
        relative = item.relative_to(base)
        if item.is_file() and not item.is_symlink() and \
                not any(part in SKIPPED_PARTS or part.endswith(".egg-info") for part in relative.parts):
            found[relative.as_posix()] = item
    return found


def _course_files(course: Course, assignment_id: str) -> dict[str, Path]:
    """Archive name → file on disk, for everything the bundle carries."""
    files: dict[str, Path] = {}
    for name in ("grader", "pyproject.toml", "README.md"):  # the course's copy, else the installed one
        for root in (course.root, ENGINE_ROOT):
            if (root / name).exists():
                files.update(_tree(root / name, root))
                break
    templates = course.templates_dir
    files.update({f"templates/{k}": v for k, v in _tree(templates, templates).items()})
    for top in (course.root / "kernels", course.assignment_dir(assignment_id),
                course.reference_dir / "__init__.py", course.reference_for(assignment_id)):
        if top.exists():
            files.update(_tree(top, course.root))
    return files


def _readme(assignment_id: str) -> str:
    return (f"# Autograder for {assignment_id}\n\nGradescope runs `setup.sh` once, then `run_autograder`"
            f" per submission; see grader/ship/autograder.py.\n")


def build_autograder(course: Course, assignment_id: str, out: str | Path | None = None) -> Path:
    """Write the bundle zip (default: <course>/.grade/autograder/ASSIGNMENT.zip)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    path = Path(out) if out else course.state_dir / "autograder" / f"{assignment_id}.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    files = _course_files(course, assignment_id)
    run = RUN_AUTOGRADER.format(assignment=shlex.quote(assignment_id),
                                modules=" ".join(shlex.quote(m) for m in manifest.files))

    def add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
        info.external_attr = mode << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(info, data)

    with zipfile.ZipFile(path, "w") as archive:
        add(archive, "setup.sh", SETUP_SH.encode(), 0o755)
        add(archive, "run_autograder", run.encode(), 0o755)
        if "README.md" not in files:  # pyproject.toml names it; pip refuses to install without it
            add(archive, "README.md", _readme(assignment_id).encode())
        for name, item in sorted(files.items()):
            add(archive, name, item.read_bytes())
    return path
