"""The entries of a class's submissions folder, found without trusting them.

Every entry is one student: a folder, a `.zip` or an `.ipynb`, named by the student's
id (the stem); `timestamps.csv` (`student,submitted_at`) may date them. Entries are
looked at without following links; an entry that cannot be graded is returned with
its problem (a batch records it as that student's error and goes on). `raw_sha256` keys
an entry that could not even be read, within a budget, without following links.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from grader.core.errors import ClassDataError, GraderError, SubmissionError
from grader.core.student_ids import check_student_id
from grader.core.text import one_line, printable

TIMESTAMPS_FILE = "timestamps.csv"
SUBMISSION_SUFFIXES = (".zip", ".ipynb")


@dataclass(frozen=True)
class Entry:
    student: str  # the entry's name (a folder's name, a file's stem): the student id when valid
    path: Path
    problem: str | None = None  # why this entry cannot be graded (recorded as its error)


def discover(directory: str | Path, *, strict: bool = True) -> tuple[list[Entry], list[str]]:
    """The submissions in `directory` (student id = the entry's stem), and ignored names.

    Entries are looked at without following links. An entry that cannot be
    graded (a name that is not a valid student id, a symbolic link, something
    that is not a regular file or folder, two entries for one student) raises
    ClassDataError when `strict`; otherwise it is returned with its `problem`
    set, so a batch records it as that entry's error and goes on.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise SubmissionError(f"{directory} is not a folder of submissions")
    entries: list[Entry] = []
    ignored: list[str] = []
    for item in sorted(directory.iterdir()):
        if item.name.startswith((".", "_")) or item.name == TIMESTAMPS_FILE:
            continue
        try:
            mode = os.lstat(item).st_mode
        except OSError as exc:
            entries.append(Entry(item.stem, item, f"SubmissionError: cannot read {printable(item.name)}: "
                                                  f"{exc.strerror}"))
            continue
        submission_file = item.suffix in SUBMISSION_SUFFIXES
        student = item.name if stat.S_ISDIR(mode) else item.stem
        problem = None
        if stat.S_ISLNK(mode):
            if not submission_file and not item.is_dir():
                ignored.append(item.name)
                continue
            problem = (f"SubmissionError: {item.name} is a symbolic link; batch entries must be real "
                       f"folders or files (copy the files in)")
        elif not stat.S_ISDIR(mode):
            if not submission_file:
                ignored.append(item.name)
                continue
            if not stat.S_ISREG(mode):
                problem = f"SubmissionError: {item.name} is not a regular file; hand in a folder, a .zip or an .ipynb"
        if problem is None:
            try:
                check_student_id(student, f"entry {item.name!r}", fix="rename the entry to the student's id")
            except GraderError as exc:
                problem = f"{type(exc).__name__}: {exc}"
        entries.append(Entry(student, item, None if problem is None else one_line(problem, 1000)))
    by_student: dict[str, list[Entry]] = {}
    for entry in entries:
        by_student.setdefault(entry.student, []).append(entry)
    for student, same in by_student.items():
        if len(same) > 1:
            names = " and ".join(printable(e.path.name) for e in same)
            message = f"student {student!r} has two submissions: {names}"
            if strict:
                raise ClassDataError(message)
            entries = [Entry(e.student, e.path, f"ClassDataError: {message}; keep one and run the batch again")
                       if e.student == student else e for e in entries]
    if strict:
        for entry in entries:
            if entry.problem:
                raise ClassDataError(entry.problem)
    return entries, ignored


HASHED_BYTES = 64 * 1024 * 1024  # of an unreadable entry, at most this much is hashed for its key
HASHED_FILES = 10_000


def raw_sha256(path: Path) -> str:
    """A key for a submission that could not be read (never raises, never follows links).

    A file: the sha256 of its bytes; a folder: of each regular file's relative
    path and bytes, in path order. At most HASHED_BYTES are read, in chunks,
    and at most HASHED_FILES files; whatever cannot be read adds its error.
    """
    digest = hashlib.sha256()
    budget = [HASHED_BYTES]

    def add_file(item: Path) -> None:
        try:
            fd = os.open(item, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            digest.update(f"unreadable: {exc.errno}".encode())
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                digest.update(b"not a regular file")
                return
            while budget[0] > 0:
                chunk = os.read(fd, min(1 << 20, budget[0]))
                if not chunk:
                    break
                budget[0] -= len(chunk)
                digest.update(chunk)
        except OSError as exc:
            digest.update(f"unreadable: {exc.errno}".encode())
        finally:
            os.close(fd)

    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            digest.update(b"link\0" + os.fsencode(os.readlink(path)))
        elif not stat.S_ISDIR(mode):
            add_file(path)
        else:
            found: list[tuple[tuple[str, ...], Path]] = []
            folders, seen = [(path, ())], 0
            while folders and seen <= HASHED_FILES:
                folder, parts = folders.pop()
                with os.scandir(folder) as listing:
                    for entry in listing:  # lazily, so a folder of millions of files costs HASHED_FILES
                        seen += 1
                        if seen > HASHED_FILES:
                            break
                        if entry.is_dir(follow_symlinks=False):
                            folders.append((Path(entry.path), (*parts, entry.name)))
                        elif entry.is_file(follow_symlinks=False):
                            found.append(((*parts, entry.name), Path(entry.path)))
            for parts, item in sorted(found):
                digest.update("/".join(parts).encode("utf-8", "surrogateescape") + b"\0")
                add_file(item)
    except (OSError, ValueError) as exc:
        digest.update(f"unreadable: {type(exc).__name__}".encode())
    return digest.hexdigest()
