"""Files as the grader counts them, and the one way it writes one.

* `SKIPPED_PARTS`: the folders and files that never count, wherever the grader
  reads a tree (a submission, a course's reference, what a Ray node holds, what
  a bundle ships): caches, version control, notebook checkpoints, the grader's
  own state. One list, so a file that counts in one place counts in all.
* `tree_files` / `tree_digest`: the files that count under a folder, and one
  sha256 of their paths and bytes, in path order.
* `write_atomic`: every file the grader writes (results.json, reports, exports,
  the release bundle and notebook, the autograder bundle) is written to a
  temporary file beside it and renamed into place, so a reader never sees half
  of one and a crash leaves the old file whole.
* `zip_bytes`: the one zip writer (the release bundle, the autograder bundle):
  fixed dates and modes, so the same files always give the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

SKIPPED_PARTS = frozenset({"__pycache__", ".git", ".ipynb_checkpoints", ".grade", ".pytest_cache", ".triton",
                           "__MACOSX"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")


def counts(parts: tuple[str, ...] | list[str]) -> bool:
    """Whether a file at these path parts (relative to the tree's top) counts."""
    return not any(part in SKIPPED_PARTS or part.endswith(".egg-info") for part in parts) and \
        not (parts and parts[-1].endswith(SKIPPED_SUFFIXES))


def tree_files(top: Path, base: Path | None = None) -> dict[str, Path]:
    """Relative path (to `base`, default `top`) → file, for every regular file under `top` that counts
    (no links followed); `top` itself when it is a file."""
    base = top if base is None else base
    items = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
    found = {}
    for item in items:
        relative = item.relative_to(base)
        if item.is_file() and not item.is_symlink() and counts(relative.parts):
            found[relative.as_posix()] = item
    return found


def tree_digest(files: dict[str, Path], label: str = "") -> str:
    """sha256 (hex) of each file's name and bytes, in name order; `label` starts the digest."""
    digest = hashlib.sha256(label.encode())
    for name, path in sorted(files.items()):
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to `path` whole or not at all (a temporary file beside it, then a rename). A file
    written again keeps its permissions; a new one gets the usual ones (0o666 less the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # fixed, so the same files always give the same zip


def zip_bytes(entries: Iterable[tuple[str, bytes, int]]) -> bytes:
    """A deflated zip of `entries` (archive name, bytes, Unix mode), in the order given, every entry
    dated ZIP_DATE: the same entries always give the same bytes. Write it with `write_atomic`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()
