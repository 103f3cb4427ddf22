"""An upload (one .zip or .ipynb, or the files themselves) → the bytes a job keeps, and its Submission.

The files a student picks arrive as (name, bytes) parts. One `.zip` or `.ipynb` is kept as it is; any other
set of files is zipped by the server under their base names (a path a browser sends is never trusted).
The result is read back through grader.intake (open_submission), so the archive rules, sizes and counts
are intake's own, and a refusal is intake's one-line message. The Submission's digest is the job's key:
the same files uploaded twice are one job.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from grader.core.assignment import Assignment
from grader.core.errors import SubmissionError
from grader.intake.submission import MAX_FILES, MAX_ZIP_BYTES, Submission, open_submission

MAX_UPLOAD_BYTES = MAX_ZIP_BYTES  # a request's body: no upload intake would accept is larger
MAX_PARTS = MAX_FILES  # files in one upload
ARCHIVES = (".zip", ".ipynb")
FILES_ZIP = "files.zip"  # the name of the files zipped by the server


@dataclass(frozen=True)
class Upload:
    """What a job keeps: the file's name (`.zip` or `.ipynb`) and its bytes."""

    name: str
    data: bytes


def _base_name(name: str) -> str:
    base = PurePosixPath(str(name).replace("\\", "/")).name
    if base in ("", ".", "..") or any(ord(c) < 32 for c in base) or len(base) > 200:
        raise SubmissionError(f"the file name {name[:80]!r} cannot be used: rename the file and upload it again")
    return base


def pack(parts: list[tuple[str, bytes]]) -> Upload:
    """The upload of `parts` (name, bytes): one archive kept, other files zipped. SubmissionError when there is
    nothing, too much, or an archive among other files."""
    if not parts:
        raise SubmissionError("no file was uploaded: choose a .zip, a .ipynb or your assignment's files")
    if len(parts) > MAX_PARTS:
        raise SubmissionError(f"{len(parts)} files were uploaded, more than the {MAX_PARTS} a submission may hold")
    total = sum(len(data) for _, data in parts)
    if total > MAX_UPLOAD_BYTES:
        raise SubmissionError(f"the upload holds {total / 2**20:.1f} MiB, more than the "
                              f"{MAX_UPLOAD_BYTES // 2**20} MiB allowed")
    names = [_base_name(name) for name, _ in parts]
    if len(parts) == 1 and PurePosixPath(names[0]).suffix.lower() in ARCHIVES:
        suffix = PurePosixPath(names[0]).suffix.lower()
        return Upload(f"upload{suffix}", parts[0][1])
    archives = [n for n in names if PurePosixPath(n).suffix.lower() in ARCHIVES]
    if archives:
        raise SubmissionError(f"{archives[0]} was uploaded with other files: upload one .zip or .ipynb alone, "
                              f"or the assignment's files themselves")
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise SubmissionError(f"two files are named {twice[0]}: upload each file once")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (_, data) in zip(names, parts, strict=True):
            archive.writestr(name, data)
    return Upload(FILES_ZIP, buffer.getvalue())


class Spooled:
    """An upload written to a private temporary folder under `spool` for as long as the `with` lasts."""

    def __init__(self, spool: Path, upload: Upload):
        self.spool = Path(spool)
        self.upload = upload
        self.folder: Path | None = None

    def __enter__(self) -> Path:
        self.spool.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(dir=self.spool))
        path = self.folder / self.upload.name
        path.write_bytes(self.upload.data)
        return path

    def __exit__(self, *exc) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def read_upload(assignment: Assignment, spool: Path, upload: Upload, student: str,
                submitted_at: datetime | None) -> Submission:
    """The Submission of an upload as intake reads it (SubmissionError: its one-line reason)."""
    with Spooled(spool, upload) as path:
        return open_submission(assignment, path, student=student, submitted_at=submitted_at)
