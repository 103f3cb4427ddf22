"""A workspace folder, a .zip of one, or a notebook → a Submission.

Everything the student handed in is kept (for the gradebook), with a sha256
per file and one for the whole; only plain files are read, with caps on count
and size, and archive paths are never trusted.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from grader.errors import SubmissionError

MAX_FILES = 200
MAX_TOTAL_BYTES = 20 * 1024 * 1024
SKIPPED_PARTS = {"__pycache__", ".git", ".ipynb_checkpoints", ".grade", ".pytest_cache",
                 "__MACOSX", ".triton"}


@dataclass(frozen=True)
class Submission:
    files: dict[str, bytes]  # relative posix path → content
    source: str  # what was handed in (path shown in reports)
    form: str  # folder | zip | notebook
    student: str = "anonymous"
    submitted_at: datetime | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def file_hashes(self) -> dict[str, str]:
        return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(self.files.items())}

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        for name, file_hash in self.file_hashes.items():
            digest.update(f"{name}\0{file_hash}\n".encode())
        return digest.hexdigest()

    def text(self, name: str) -> str | None:
        data = self.files.get(name)
        return None if data is None else data.decode("utf-8", errors="replace")


def _safe_name(name: str) -> str | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    if any(part in SKIPPED_PARTS or part.startswith("._") for part in path.parts):
        return None
    return str(path)


def _add(files: dict[str, bytes], name: str, data: bytes, total: list[int]) -> None:
    total[0] += len(data)
    if len(files) >= MAX_FILES:
        raise SubmissionError(f"more than {MAX_FILES} files submitted")
    if total[0] > MAX_TOTAL_BYTES:
        raise SubmissionError(f"submission larger than {MAX_TOTAL_BYTES // (1024 * 1024)} MiB")
    files[name] = data


def _from_folder(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = [0]
    for item in sorted(path.rglob("*")):
        relative = _safe_name(item.relative_to(path).as_posix())
        if relative is None or item.is_symlink() or not item.is_file():
            continue
        _add(files, relative, item.read_bytes(), total)
    return files


def _from_zip(data: bytes, label: str) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise SubmissionError(f"{label} is not a valid zip file") from exc
    files: dict[str, bytes] = {}
    total = [0]
    entries = [e for e in archive.infolist() if not e.is_dir()]
    names = [_safe_name(e.filename) for e in entries]
    tops = {PurePosixPath(n).parts[0] for n in names if n}
    strip = len(tops) == 1 and all(n and len(PurePosixPath(n).parts) > 1 for n in names if n)
    for entry, name in zip(entries, names, strict=True):
        if name is None or (entry.external_attr >> 16) & 0o170000 == 0o120000:  # symlink
            continue
        if entry.file_size > MAX_TOTAL_BYTES:
            raise SubmissionError(f"{label}: {entry.filename} is too large")
        if strip:
            name = str(PurePosixPath(*PurePosixPath(name).parts[1:]))
        _add(files, name, archive.read(entry), total)
    return files


def load_submission(path: str | Path, module_files: tuple[str, ...], *, student: str | None = None,
                    submitted_at: datetime | None = None) -> Submission:
    """Read a folder, .zip or .ipynb. Raises SubmissionError with a one-line reason."""
    path = Path(path)
    student = student or path.stem
    if not path.exists():
        raise SubmissionError(f"workspace {path} does not exist")
    if path.is_dir():
        files, form = _from_folder(path), "folder"
    elif path.suffix == ".zip":
        files, form = _from_zip(path.read_bytes(), path.name), "zip"
    elif path.suffix == ".ipynb":
        from grader.notebook import modules_from_notebook

        files, form = modules_from_notebook(path.read_bytes(), module_files, path.name), "notebook"
    else:
        raise SubmissionError(f"{path.name}: expected a folder, a .zip or an .ipynb notebook")
    notes = []
    missing = [name for name in module_files if name not in files]
    if missing:
        notes.append(f"missing file(s): {', '.join(missing)}")
    return Submission(files=files, source=str(path), form=form, student=student,
                      submitted_at=submitted_at, notes=tuple(notes))
