"""A student's .zip, read within limits.

Nothing in a zip is trusted: before `zipfile` parses the central directory,
its entries are counted from the raw records (a count in the end record can
lie, the records cannot), and an entry is read only after its header passed
the caps (size, compression ratio, method, encryption). Entries are then
decompressed in chunks and cut off at the size their header declared, so a
header that lies cannot make the grader hold more than the caps. Every
problem of any kind becomes one SubmissionError naming the zip, the entry
and what to do.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from typing import BinaryIO

from grader.core.errors import SubmissionError
from grader.core.text import one_line

END_RECORD = b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_END_RECORD = b"PK\x06\x06"
CENTRAL_HEADER = b"PK\x01\x02"
END_RECORD_SIZE = 22
MAX_COMMENT = 0xFFFF
CHUNK = 1 << 20
SUPPORTED_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
METHOD_NAMES = {1: "shrink", 6: "implode", 9: "deflate64", 12: "bzip2", 14: "lzma", 93: "zstandard",
                95: "xz", 98: "ppmd", 99: "AES encryption"}
ENCRYPTED = 0x1


def _name(text: str) -> str:
    return one_line(text, 120)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _invalid(label: str, why: str) -> SubmissionError:
    return SubmissionError(f"{label} is not a valid zip file ({why}); zip the folder again")


def count_entries(fh: BinaryIO, size: int, label: str, limit: int) -> int:
    """The number of central-directory records, counted without trusting the end record's count.

    Raises SubmissionError when there is no end record, the directory lies
    outside the file, or there are more than `limit` records.
    """
    tail_size = min(size, END_RECORD_SIZE + MAX_COMMENT)
    fh.seek(size - tail_size)
    tail = fh.read(tail_size)
    at = tail.rfind(END_RECORD)
    while at >= 0 and at + END_RECORD_SIZE > len(tail):
        at = tail.rfind(END_RECORD, 0, at)
    if at < 0:
        raise _invalid(label, "no end-of-archive record: truncated or not a zip")
    end_at = size - tail_size + at
    directory_size = struct.unpack("<4s4H2LH", tail[at:at + END_RECORD_SIZE])[5]
    directory_end = end_at
    locator_at = end_at - 20
    locator = b""
    if locator_at >= 0:
        fh.seek(locator_at)
        locator = fh.read(20)
    if locator[:4] == ZIP64_LOCATOR:  # zip64: the real sizes are in the zip64 end record
        if locator_at < 56:
            raise _invalid(label, "a damaged zip64 end record")
        fh.seek(locator_at - 56)
        record = fh.read(56)
        if len(record) < 56 or record[:4] != ZIP64_END_RECORD:
            raise _invalid(label, "a damaged zip64 end record")
        directory_size = struct.unpack("<Q", record[40:48])[0]
        directory_end = locator_at - 56
    start = directory_end - directory_size
    if start < 0:
        raise _invalid(label, "its central directory lies outside the file")
    fh.seek(start)
    directory = fh.read(directory_size)
    if len(directory) < directory_size:
        raise _invalid(label, "its central directory is cut short")
    count, position = 0, 0
    while position < len(directory):
        if directory[position:position + 4] != CENTRAL_HEADER or position + 46 > len(directory):
            raise _invalid(label, "a damaged central directory")
        name_length, extra_length, comment_length = struct.unpack("<3H", directory[position + 28:position + 34])
        position += 46 + name_length + extra_length + comment_length
        count += 1
        if count > limit:
            raise SubmissionError(f"{label} holds more than {limit} entries; zip only the assignment's files")
    return count


def open_zip(fh: BinaryIO, label: str, limit: int) -> zipfile.ZipFile:
    """`fh` as a ZipFile, once its central directory was counted (at most `limit` entries)."""
    size = os.fstat(fh.fileno()).st_size
    count_entries(fh, size, label, limit)
    fh.seek(0)
    try:
        return zipfile.ZipFile(fh)
    except zipfile.BadZipFile as exc:
        raise _invalid(label, one_line(str(exc), 160)) from exc
    except Exception as exc:  # zipfile raises several unrelated types on damaged input
        raise _invalid(label, f"{type(exc).__name__}: {one_line(str(exc), 160)}") from exc


def check_entry(info: zipfile.ZipInfo, label: str, *, max_bytes: int, max_ratio: float,
                ratio_floor: int) -> None:
    """Refuse an entry from its header alone: encrypted, unknown method, too large, a bomb."""
    name = _name(info.filename)
    if info.flag_bits & ENCRYPTED:
        raise SubmissionError(f"{label}: {name} is password-protected; zip the folder again without a password")
    if info.compress_type not in SUPPORTED_METHODS:
        method = METHOD_NAMES.get(info.compress_type, "unknown")
        raise SubmissionError(f"{label}: {name} uses compression method {info.compress_type} ({method}), "
                              f"which the grader does not read; zip the folder again with the standard "
                              f"(deflate) method")
    if info.file_size > max_bytes:
        raise SubmissionError(f"{label}: {name} is {_mib(info.file_size)}, more than the "
                              f"{_mib(max_bytes)} a submission may hold")
    if info.file_size > ratio_floor and info.file_size > max_ratio * max(info.compress_size, 1):
        raise SubmissionError(f"{label}: {name} would expand {info.file_size // max(info.compress_size, 1)}× "
                              f"(from {info.compress_size} to {info.file_size} bytes), more than the "
                              f"{max_ratio:g}× the grader accepts (a zip bomb?); zip the folder again")


def read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> bytes:
    """The entry's bytes, decompressed in chunks and never more than its header declared."""
    name = _name(info.filename)
    chunks, total = [], 0
    try:
        with archive.open(info) as stream:
            while True:
                chunk = stream.read(min(CHUNK, info.file_size - total + 1))
                if not chunk:
                    break
                total += len(chunk)
                if total > info.file_size:
                    raise SubmissionError(f"{label}: {name} holds more data than its header says; "
                                          f"zip the folder again")
                chunks.append(chunk)
    except SubmissionError:
        raise
    except zipfile.BadZipFile as exc:
        problem = "bad CRC-32" if "CRC" in str(exc) else one_line(str(exc), 160)
        raise SubmissionError(f"{label}: {name} is damaged ({problem}); zip the folder again") from exc
    except EOFError as exc:
        raise SubmissionError(f"{label}: {name} is cut short (the zip is truncated); zip the folder again") from exc
    except zlib.error as exc:
        raise SubmissionError(f"{label}: {name} is damaged (bad compressed data: {one_line(str(exc), 120)}); "
                              f"zip the folder again") from exc
    except RuntimeError as exc:  # zipfile's "password required" for an encrypted entry
        raise SubmissionError(f"{label}: {name} cannot be read ({one_line(str(exc), 120)}); "
                              f"zip the folder again without a password") from exc
    except NotImplementedError as exc:
        raise SubmissionError(f"{label}: {name} uses a compression method the grader does not read; "
                              f"zip the folder again with the standard (deflate) method") from exc
    except Exception as exc:  # anything else a damaged entry can raise
        raise SubmissionError(f"{label}: {name} cannot be read ({type(exc).__name__}: "
                              f"{one_line(str(exc), 120)}); zip the folder again") from exc
    return b"".join(chunks)
