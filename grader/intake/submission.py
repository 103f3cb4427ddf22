"""A workspace folder, a .zip of one, or a notebook → a Submission.

Everything the student handed in is kept (for the gradebook), with a sha256
per file and one for the whole. Nothing is read before its size is known:
- a folder is walked without following links (symbolic links and anything
  that is not a regular file are skipped), and the number and sizes of its
  files are checked from their metadata before a byte is read;
- a zip's entries are counted and their headers checked (size, ratio,
  method, password) before any is decompressed (grader/intake/archive.py);
- a notebook's file size is checked before it is read (grader/intake/notebook.py).
The caps below apply to every form alike; archive paths are never trusted.
Every problem, of any kind, is one SubmissionError naming the file and what
to do.

Where the assignment's files are: a folder or zip often wraps them in a
folder or two (`s017/my_solution/attention.py`, a zip of a folder). When none
of them is at the top, the folder below that holds them, at most
WORKSPACE_DEPTH levels down (as Gradescope's uploads are searched), is graded
as the workspace, and the submission says so (`found_in`, and a note). A
hand-in that holds none of them anywhere is a SubmissionError listing what it
does hold, not a graded zero.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from grader.core.assignment import Assignment
from grader.core.errors import GraderError, SubmissionError
from grader.core.files import SKIPPED_PARTS
from grader.core.quiz import ANSWERS_FILE
from grader.core.student_ids import check_student_id
from grader.core.text import one_line
from grader.intake.archive import check_entry, open_zip, read_entry
from grader.intake.notebook import MAX_NOTEBOOK_BYTES, answers_from_notebook, modules_from_notebook

MAX_FILES = 200  # files kept
MAX_TOTAL_BYTES = 20 * 1024 * 1024  # bytes kept, all files together
# The grader parses every .py file and answers.toml itself, and a parse takes up to 400 times the
# text's size in memory (dense code), so those files get caps of their own.
MAX_SOURCE_BYTES = 256 * 1024  # one .py file
MAX_PYTHON_BYTES = 512 * 1024  # all .py files together
MAX_ANSWERS_BYTES = 64 * 1024  # answers.toml
MAX_ENTRIES = 2000  # folder or zip entries looked at, kept or skipped
MAX_DEPTH = 32  # folders inside folders
MAX_ZIP_BYTES = 2 * MAX_TOTAL_BYTES  # a .zip file on disk
MAX_RATIO = 200  # uncompressed / compressed size of one zip entry...
RATIO_FLOOR = 1024 * 1024  # ...for entries larger than this
WORKSPACE_DEPTH = 3  # how many folders down the assignment's files are looked for (as on Gradescope)
LISTED_FILES = 12  # of a hand-in without the assignment's files, the names listed in its problem
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
    getattr(os, "O_CLOEXEC", 0)


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

    missing: tuple[str, ...] = ()  # files of the manifest that were not handed in
    found_in: str = ""  # the folder inside the hand-in graded as the workspace ("": its top)


def _shown(name: str) -> str:
    return one_line(name, 120)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB" if size >= 1024 * 1024 else f"{-(-size // 1024)} KiB"


def _safe_name(name: str) -> str | None:
    """The archive or folder path as a relative posix path, or None when it must be skipped."""
    if any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f or 0xd800 <= ord(c) <= 0xdfff for c in name):
        return None  # control characters or undecodable bytes: never an assignment file, unsafe to show or store
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    if any(part in SKIPPED_PARTS or part.startswith("._") for part in path.parts):
        return None
    return str(path)


def check_sizes(label: str, sizes: dict[str, int], module_files: tuple[str, ...] = ()) -> None:
    """The caps, from sizes alone (before anything is read): count, total, Python and answers files."""
    if len(sizes) > MAX_FILES:
        raise SubmissionError(f"{label} holds {len(sizes)} files, more than the {MAX_FILES} a submission "
                              f"may hold; hand in only the assignment's files")
    total = sum(sizes.values())
    if total > MAX_TOTAL_BYTES:
        raise SubmissionError(f"{label} holds {_mib(total)}, more than the {_mib(MAX_TOTAL_BYTES)} a submission "
                              f"may hold; leave data, checkpoints and outputs out")
    python = {name: size for name, size in sizes.items() if name.endswith(".py") or name in module_files}
    for name, size in sorted(python.items()):
        if size > MAX_SOURCE_BYTES:
            raise SubmissionError(f"{label}: {_shown(name)} is {_mib(size)}, more than the "
                                  f"{_mib(MAX_SOURCE_BYTES)} a Python file may be")
    if sum(python.values()) > MAX_PYTHON_BYTES:
        raise SubmissionError(f"{label} holds {_mib(sum(python.values()))} of Python, more than the "
                              f"{_mib(MAX_PYTHON_BYTES)} the grader reads; leave generated or copied code out")
    if sizes.get(ANSWERS_FILE, 0) > MAX_ANSWERS_BYTES:
        raise SubmissionError(f"{label}: {ANSWERS_FILE} is {_mib(sizes[ANSWERS_FILE])}, more than the "
                              f"{_mib(MAX_ANSWERS_BYTES)} a quiz answers file may be")


def read_regular(path: str | os.PathLike, limit: int, label: str, *, dir_fd: int | None = None,
                 follow: bool = False, advice: str = "") -> bytes:
    """A regular file's bytes, at most `limit` of them; links (unless `follow`), pipes and devices refused."""
    flags = _OPEN_FLAGS if not follow else _OPEN_FLAGS & ~getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SubmissionError(f"{label} is a symbolic link; hand in the file itself") from exc
        raise SubmissionError(f"cannot read {label}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SubmissionError(f"{label} is not a regular file; hand in a folder, a .zip or an .ipynb")
        if info.st_size > limit:
            raise SubmissionError(f"{label} is {_mib(info.st_size)}, more than the {_mib(limit)} limit"
                                  + (f"; {advice}" if advice else ""))
        data = os.read(fd, info.st_size + 1)  # one buffer of the size stat gave: no copies
        chunks, total = [data], len(data)
        while data and total <= limit:  # short reads, or a file that grew since the stat
            data = os.read(fd, min(1 << 20, limit + 1 - total))
            chunks.append(data)
            total += len(data)
        if total > limit:
            raise SubmissionError(f"{label} grew past the {_mib(limit)} limit while it was read")
        return chunks[0] if len(chunks) == 1 or not any(chunks[1:]) else b"".join(chunks)
    except OSError as exc:
        raise SubmissionError(f"cannot read {label}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _scan(dir_fd: int, parts: tuple[str, ...], depth: int, label: str, found: dict[str, int],
          seen: list[int]) -> None:
    """Walk one folder by its descriptor: regular files' sizes into `found`, links never followed."""
    if depth > MAX_DEPTH:
        raise SubmissionError(f"{label} nests folders more than {MAX_DEPTH} deep; hand in only the "
                              f"assignment's files")
    entries = []
    with os.scandir(dir_fd) as listing:
        for entry in listing:
            seen[0] += 1
            if seen[0] > MAX_ENTRIES:
                raise SubmissionError(f"{label} holds more than {MAX_ENTRIES} files and folders; "
                                      f"hand in only the assignment's files")
            entries.append(entry)
    for entry in sorted(entries, key=lambda e: e.name):
        relative = _safe_name("/".join((*parts, entry.name)))
        if relative is None or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0),
                            dir_fd=dir_fd)
            try:
                _scan(child, (*parts, entry.name), depth + 1, label, found, seen)
            finally:
                os.close(child)
        elif entry.is_file(follow_symlinks=False):
            found[relative] = entry.stat(follow_symlinks=False).st_size


def _read_below(root_fd: int, relative: str, limit: int, label: str) -> bytes:
    """Open `relative` one component at a time under `root_fd`, refusing links at every step."""
    *folders, name = relative.split("/")
    fds = []
    try:
        current = root_fd
        for folder in folders:
            current = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0),
                              dir_fd=current)
            fds.append(current)
        return read_regular(name, limit, f"{label}: {_shown(relative)}", dir_fd=current)
    except OSError as exc:
        raise SubmissionError(f"cannot read {label}: {_shown(relative)}: {exc.strerror}") from exc
    finally:
        for fd in fds:
            os.close(fd)


def _from_folder(path: Path, module_files: tuple[str, ...]) -> dict[str, bytes]:
    label = _shown(path.name or str(path))
    try:
        root_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise SubmissionError(f"cannot read the folder {label}: {exc.strerror}") from exc
    try:
        sizes: dict[str, int] = {}
        try:
            _scan(root_fd, (), 0, label, sizes, [0])
        except OSError as exc:
            raise SubmissionError(f"cannot read the folder {label}: {exc.strerror}") from exc
        check_sizes(label, sizes, module_files)
        files: dict[str, bytes] = {}
        budget = MAX_TOTAL_BYTES
        for relative in sizes:
            limit = min(MAX_SOURCE_BYTES, budget) if relative.endswith(".py") else budget
            data = _read_below(root_fd, relative, limit, label)
            budget -= len(data)
            files[relative] = data
        return files
    finally:
        os.close(root_fd)


def _from_zip(path: Path, module_files: tuple[str, ...]) -> dict[str, bytes]:
    label = _shown(path.name)
    try:
        fd = os.open(path, _OPEN_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise SubmissionError(f"cannot read {label}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SubmissionError(f"{label} is not a regular file; hand in a folder, a .zip or an .ipynb")
        if info.st_size > MAX_ZIP_BYTES:
            raise SubmissionError(f"{label} is {_mib(info.st_size)}, more than the {_mib(MAX_ZIP_BYTES)} a zip "
                                  f"may be; hand in only the assignment's files")
        with open_zip(fh, label, MAX_ENTRIES) as archive:
            entries = [e for e in archive.infolist() if not e.is_dir()]
            names = [_safe_name(e.filename) for e in entries]
            kept: dict[str, zipfile.ZipInfo] = {}
            for entry, name in zip(entries, names, strict=True):
                if name is None or (entry.external_attr >> 16) & 0o170000 == 0o120000:  # symlink
                    continue
                if name in kept:
                    raise SubmissionError(f"{label} holds {_shown(name)} twice; zip the folder again")
                check_entry(entry, label, max_bytes=MAX_TOTAL_BYTES, max_ratio=MAX_RATIO,
                            ratio_floor=RATIO_FLOOR)
                kept[name] = entry
            check_sizes(label, {name: e.file_size for name, e in kept.items()}, module_files)
            return {name: read_entry(archive, entry, label) for name, entry in kept.items()}


def _from_notebook(path: Path, module_files: tuple[str, ...]) -> dict[str, bytes]:
    label = _shown(path.name)
    data = read_regular(path, MAX_NOTEBOOK_BYTES, label, follow=True,
                        advice="clear the outputs (Restart & Clear Output) and save it again")
    files = modules_from_notebook(data, module_files, label)
    answers = answers_from_notebook(data, label)  # the cell tagged `answers`: the quiz, as answers.toml
    size = max((len(text) for text in files.values()), default=0)
    if size > MAX_SOURCE_BYTES:
        raise SubmissionError(f"{label}: the code assembled from its cells is {_mib(size)}, more than the "
                              f"{_mib(MAX_SOURCE_BYTES)} a Python file may be")
    if answers is not None and ANSWERS_FILE not in files:
        files[ANSWERS_FILE] = answers.encode("utf-8")
    check_sizes(label, {name: len(text) for name, text in files.items()}, module_files)
    return files


def _listing(names: list[str]) -> str:
    if not names:
        return "nothing"
    shown = [_shown(name) for name in sorted(names)[:LISTED_FILES]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def locate_workspace(files: dict[str, bytes], expected: tuple[str, ...],
                     label: str) -> tuple[dict[str, bytes], str]:
    """(the files relative to the folder that holds the assignment's files, that folder's path).

    The top counts when it holds any of `expected`; else the shallowest folder below that holds one
    (at most WORKSPACE_DEPTH down), when it is the only one at its depth. Raises SubmissionError when
    no folder holds any of them (listing what the hand-in holds) or two folders do."""
    if any(name in files for name in expected):
        return files, ""
    holders: dict[int, set[str]] = {}
    for name in files:
        path = PurePosixPath(name)
        depth = len(path.parts) - 1
        if path.name in expected and 1 <= depth <= WORKSPACE_DEPTH:
            holders.setdefault(depth, set()).add(str(path.parent))
    wanted = ", ".join(expected)
    if not holders:
        raise SubmissionError(f"{label} holds none of the assignment's files ({wanted}), at its top or up to "
                              f"{WORKSPACE_DEPTH} folders down; it holds: {_listing(list(files))}; hand in a "
                              f"folder, .zip or .ipynb with {wanted}")
    shallowest = holders[min(holders)]
    if len(shallowest) > 1:
        folders = ", ".join(f"{_shown(folder)}/" for folder in sorted(shallowest))
        raise SubmissionError(f"{label} holds the assignment's files in more than one folder ({folders}); "
                              f"hand in one folder with {wanted}")
    folder = shallowest.pop()
    prefix = folder + "/"
    return {name[len(prefix):]: data for name, data in files.items() if name.startswith(prefix)}, folder


def load_submission(path: str | Path, module_files: tuple[str, ...], *, student: str | None = None,
                    submitted_at: datetime | None = None) -> Submission:
    """Read a folder, .zip or .ipynb within the caps. Raises SubmissionError with a one-line reason.

    The student id is `student`, else the workspace's name (a folder's name, a
    file's stem); either must follow grader/core/student_ids.py.
    """
    path = Path(path)
    label = _shown(path.name or str(path))
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise SubmissionError(f"workspace {one_line(str(path), 200)} does not exist") from exc
    except OSError as exc:
        raise SubmissionError(f"cannot read the workspace {label}: {exc.strerror}") from exc
    if student is None:
        default = path.name if stat.S_ISDIR(info.st_mode) else path.stem
        student = check_student_id(default, f"the workspace name {label}",
                                   fix="pass --student ID, or rename the workspace")
    else:
        check_student_id(student, "student")
    try:
        if stat.S_ISDIR(info.st_mode):
            files, form = _from_folder(path, module_files), "folder"
        elif path.suffix == ".zip":
            files, form = _from_zip(path, module_files), "zip"
        elif path.suffix == ".ipynb":
            files, form = _from_notebook(path, module_files), "notebook"
        else:
            raise SubmissionError(f"{label}: expected a folder, a .zip or an .ipynb notebook")
    except GraderError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise SubmissionError(f"{label} is too complex for the grader to read "
                              f"({type(exc).__name__}); hand in only the assignment's files") from exc
    except Exception as exc:  # whatever else a hostile file makes a reader raise: still one student's problem
        raise SubmissionError(f"{label} could not be read ({type(exc).__name__}: {one_line(str(exc), 160)}); "
                              f"hand in a folder, a .zip or an .ipynb") from exc
    notes = []
    found_in = ""
    if form != "notebook":  # a notebook's cells make the modules: nothing to look for
        files, found_in = locate_workspace(files, (*module_files, ANSWERS_FILE), label)
    if found_in:
        notes.append(f"the assignment's files were in the folder {_shown(found_in)}/ inside {label}: "
                     f"that folder was graded")
    missing = tuple(name for name in module_files if name not in files)
    if missing:
        notes.append(f"missing file(s): {', '.join(missing)}")
    return Submission(files=files, source=str(path), form=form, student=student,
                      submitted_at=submitted_at, notes=tuple(notes), missing=missing, found_in=found_in)


def open_submission(assignment: Assignment, workspace: str | Path | None = None, *,
                    student: str | None = None, submitted_at: datetime | None = None) -> Submission:
    """The submission at `workspace` (default: the assignment's own folder, i.e. the stubs)."""
    workspace = Path(workspace) if workspace else assignment.folder
    return load_submission(workspace, assignment.manifest.files, student=student, submitted_at=submitted_at)
