"""Hostile and broken submissions for the tiny course, built on disk for real.

Each builder writes one entry (a zip, a notebook, a folder) under a folder
and returns its path. `HOSTILE` maps an entry's student id to its builder
and the exact error the grader must record for it, so the intake tests and
the batch test check the same list.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

GOOD = '''import torch


def double(x):
    return x * 2


def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)
'''
MIB = 1024 * 1024


# ------------------------------------------------------------------ zip surgery
def zip_bytes(files: dict[str, bytes | str], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def patch_headers(data: bytes, *, flags: int | None = None, method: int | None = None,
                  file_size: int | None = None) -> bytes:
    """Rewrite fields of every local and central header (what a hand-made zip can claim)."""
    out = bytearray(data)
    for signature, flag_at, method_at, size_at in ((b"PK\x03\x04", 6, 8, 22), (b"PK\x01\x02", 8, 10, 24)):
        at = out.find(signature)
        while at >= 0:
            if flags is not None:
                out[at + flag_at:at + flag_at + 2] = struct.pack("<H", flags)
            if method is not None:
                out[at + method_at:at + method_at + 2] = struct.pack("<H", method)
            if file_size is not None:
                out[at + size_at:at + size_at + 4] = struct.pack("<L", file_size)
            at = out.find(signature, at + 4)
    return bytes(out)


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def notebook_json(cells: list[dict], nbformat: int = 4) -> str:
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": nbformat, "nbformat_minor": 5},
                      ensure_ascii=False)


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": None, "outputs": [],
            "source": source}


# ---------------------------------------------------------------------- entries
def encrypted_zip(folder: Path) -> Path:
    return write(folder / "z01.zip", patch_headers(zip_bytes({"mini.py": GOOD}), flags=0x1))


def bad_crc_zip(folder: Path) -> Path:
    data = bytearray(zip_bytes({"mini.py": GOOD}, zipfile.ZIP_STORED))
    at = data.find(b"return x * 2")
    data[at:at + 12] = b"return x * 3"
    return write(folder / "z02.zip", bytes(data))


def unknown_method_zip(folder: Path) -> Path:
    return write(folder / "z03.zip", patch_headers(zip_bytes({"mini.py": GOOD}), method=77))


def deflate64_zip(folder: Path) -> Path:
    return write(folder / "z04.zip", patch_headers(zip_bytes({"mini.py": GOOD}), method=9))


def truncated_zip(folder: Path) -> Path:
    data = zip_bytes({"mini.py": GOOD, "answers.toml": "row_sum = 1\n"})
    return write(folder / "z05.zip", data[: len(data) // 2])


BOMB = zip_bytes({"mini.py": GOOD, "data.bin": bytes(8 * MIB)})
BOMB_PACKED = zipfile.ZipFile(io.BytesIO(BOMB)).getinfo("data.bin").compress_size  # zlib's own business


def bomb_zip(folder: Path) -> Path:
    return write(folder / "z06.zip", BOMB)


def lying_size_zip(folder: Path) -> Path:
    """The header says 64 bytes; the data inflates to 64 MiB of zeros."""
    data = zip_bytes({"mini.py": b"\0" * (64 * MIB)})
    return write(folder / "z07.zip", patch_headers(data, file_size=64))


def many_entries_zip(folder: Path) -> Path:
    return write(folder / "z08.zip", zip_bytes({f"junk/{i}.txt": "" for i in range(2001)} | {"mini.py": GOOD}))


def lying_count_zip(folder: Path) -> Path:
    """2001 entries, and an end record that claims one."""
    data = bytearray(zip_bytes({f"junk/{i}.txt": "" for i in range(2001)}))
    at = data.rfind(b"PK\x05\x06")
    data[at + 8:at + 12] = struct.pack("<2H", 1, 1)
    return write(folder / "z09.zip", bytes(data))


def too_many_files_zip(folder: Path) -> Path:
    return write(folder / "z10.zip", zip_bytes({f"f{i}.py": "" for i in range(201)} | {"mini.py": GOOD}))


def huge_module_zip(folder: Path) -> Path:
    return write(folder / "z11.zip", zip_bytes({"mini.py": GOOD + "#" * (2 * MIB)}, zipfile.ZIP_STORED))


def python_heavy_zip(folder: Path) -> Path:
    """Three helpers of 200 KiB each: the grader would parse 600 KiB of Python."""
    return write(folder / "z14.zip", zip_bytes({"mini.py": GOOD} | {f"h{i}.py": "#" * (200 * 1024) for i in range(3)}))


def huge_answers_zip(folder: Path) -> Path:
    return write(folder / "z15.zip", zip_bytes({"mini.py": GOOD, "answers.toml": "x = 1\n" * 20_000}))


def duplicate_name_zip(folder: Path) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mini.py", GOOD)
        archive.writestr("./mini.py", "x = 1\n")
    return write(folder / "z12.zip", buffer.getvalue())


def huge_zip_file(folder: Path) -> Path:
    path = folder / "z13.zip"
    with open(path, "wb") as fh:  # sparse: 48 MiB on paper, nothing on disk
        fh.truncate(48 * MIB)
    return path


def not_json_notebook(folder: Path) -> Path:
    return write(folder / "n01.ipynb", '{"cells": [ this is not json')


def nbformat3_notebook(folder: Path) -> Path:
    return write(folder / "n02.ipynb", json.dumps({"nbformat": 3, "nbformat_minor": 0,
                                                   "worksheets": [{"cells": []}], "metadata": {}}))


def latin1_notebook(folder: Path) -> Path:
    return write(folder / "n03.ipynb", notebook_json([code_cell("# café\n" + GOOD)]).encode("utf-8")
                 .replace("café".encode(), "café".encode("latin-1")))


def deep_notebook(folder: Path) -> Path:
    return write(folder / "n04.ipynb", '{"cells": [], "nbformat": 4, "metadata": ' + "[" * 100_000
                 + "]" * 100_000 + "}")


def huge_cell_notebook(folder: Path) -> Path:
    return write(folder / "n05.ipynb", notebook_json([code_cell(GOOD + "X = 1\n" * (400 * 1024))]))


def value_flood_notebook(folder: Path) -> Path:
    """10 MB of `[]`: millions of objects if parsed."""
    return write(folder / "n06.ipynb", '{"nbformat": 4, "cells": [], "metadata": {"x": ['
                 + "[]," * (3_500_000) + "[]]}}")


def big_notebook(folder: Path) -> Path:
    """A real 30 MiB notebook (one cell, a huge output), written in chunks."""
    path = folder / "n07.ipynb"
    head = '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", ' \
           '"metadata": {}, "execution_count": 1, "source": "x = 1", "outputs": [{"output_type": ' \
           '"stream", "name": "stdout", "text": "'
    with open(path, "w") as fh:
        fh.write(head)
        for _ in range(30):
            fh.write("y" * MIB)
        fh.write('"}]}]}')
    return path


def wrong_shape_notebook(folder: Path) -> Path:
    return write(folder / "n08.ipynb", json.dumps({"nbformat": 4, "cells": [{"cell_type": "code",
                                                                            "source": 42}]}))


def many_files_folder(folder: Path) -> Path:
    path = folder / "f01"
    path.mkdir()
    (path / "mini.py").write_text(GOOD)
    for i in range(201):
        (path / f"extra{i}.txt").write_text("")
    return path


def huge_sparse_folder(folder: Path) -> Path:
    path = folder / "f02"
    path.mkdir()
    (path / "mini.py").write_text(GOOD)
    with open(path / "weights.bin", "wb") as fh:
        fh.truncate(30 * MIB)
    return path


def deep_folder(folder: Path) -> Path:
    path = folder / "f03"
    (path / Path(*["d"] * 40)).mkdir(parents=True)
    (path / "mini.py").write_text(GOOD)
    return path


def bad_name_folder(folder: Path) -> Path:
    path = folder / "bob smith"
    path.mkdir()
    (path / "mini.py").write_text(GOOD)
    return path


def formula_name_zip(folder: Path) -> Path:
    return write(folder / '=HYPERLINK("http:x")' ".zip", zip_bytes({"mini.py": GOOD}))


def undecodable_name_zip(folder: Path) -> Path:
    return write(folder / os.fsdecode(b"\xffbad.zip"), zip_bytes({"mini.py": GOOD}))


def link_entry(folder: Path) -> Path:
    outside = folder.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "mini.py").write_text(GOOD)
    os.symlink(outside, folder / "l01")
    return folder / "l01"


def fifo_entry(folder: Path) -> Path:
    os.mkfifo(folder / "p01.zip")
    return folder / "p01.zip"


Builder = Callable[[Path], Path]
UNREADABLE = "is not a readable Jupyter notebook"
# student id → (builder, the exact error recorded for it by `grade batch`)
HOSTILE: dict[str, tuple[Builder, str]] = {
    "z01": (encrypted_zip, "SubmissionError: z01.zip: mini.py is password-protected; zip the folder again "
                           "without a password"),
    "z02": (bad_crc_zip, "SubmissionError: z02.zip: mini.py is damaged (bad CRC-32); zip the folder again"),
    "z03": (unknown_method_zip, "SubmissionError: z03.zip: mini.py uses compression method 77 (unknown), which "
                                "the grader does not read; zip the folder again with the standard (deflate) method"),
    "z04": (deflate64_zip, "SubmissionError: z04.zip: mini.py uses compression method 9 (deflate64), which the "
                           "grader does not read; zip the folder again with the standard (deflate) method"),
    "z05": (truncated_zip, "SubmissionError: z05.zip is not a valid zip file (no end-of-archive record: truncated "
                           "or not a zip); zip the folder again"),
    "z06": (bomb_zip, f"SubmissionError: z06.zip: data.bin would expand {8 * MIB // BOMB_PACKED}× (from "
                      f"{BOMB_PACKED} to 8388608 bytes), more than the 200× the grader accepts (a zip bomb?); "
                      f"zip the folder again"),
    "z07": (lying_size_zip, "SubmissionError: z07.zip: mini.py is damaged (bad CRC-32); zip the folder again"),
    "z08": (many_entries_zip, "SubmissionError: z08.zip holds more than 2000 entries; zip only the assignment's "
                              "files"),
    "z09": (lying_count_zip, "SubmissionError: z09.zip holds more than 2000 entries; zip only the assignment's "
                             "files"),
    "z10": (too_many_files_zip, "SubmissionError: z10.zip holds 202 files, more than the 200 a submission may "
                                "hold; hand in only the assignment's files"),
    "z11": (huge_module_zip, "SubmissionError: z11.zip: mini.py is 2.0 MiB, more than the 256 KiB a Python file "
                             "may be"),
    "z14": (python_heavy_zip, "SubmissionError: z14.zip holds 601 KiB of Python, more than the 512 KiB the grader "
                              "reads; leave generated or copied code out"),
    "z15": (huge_answers_zip, "SubmissionError: z15.zip: answers.toml is 118 KiB, more than the 64 KiB a quiz "
                              "answers file may be"),
    "z12": (duplicate_name_zip, "SubmissionError: z12.zip holds mini.py twice; zip the folder again"),
    "z13": (huge_zip_file, "SubmissionError: z13.zip is 48.0 MiB, more than the 40.0 MiB a zip may be; hand in "
                           "only the assignment's files"),
    "n01": (not_json_notebook, f"SubmissionError: n01.ipynb {UNREADABLE}: it is not valid JSON (line 1, column "
                               f"13); open it in Jupyter and save it again"),
    "n02": (nbformat3_notebook, f"SubmissionError: n02.ipynb {UNREADABLE}: it is nbformat 3, and the grader reads "
                                f"nbformat 4; open it in a current Jupyter and save it again"),
    "n03": (latin1_notebook, f"SubmissionError: n03.ipynb {UNREADABLE}: it is not UTF-8 text (byte 116); open it "
                             f"in Jupyter and save it again"),
    "n04": (deep_notebook, f"SubmissionError: n04.ipynb {UNREADABLE}: its JSON is nested too deeply; open it in "
                           f"Jupyter and save it again"),
    "n05": (huge_cell_notebook, f"SubmissionError: n05.ipynb {UNREADABLE}: code cell 1 holds more than 256 KiB "
                                f"of code; move data out of the code, or split the cell"),
    "n06": (value_flood_notebook, f"SubmissionError: n06.ipynb {UNREADABLE}: it holds more than 1000000 JSON "
                                  f"values; clear the outputs (Restart & Clear Output) and save it again"),
    "n07": (big_notebook, "SubmissionError: n07.ipynb is 30.0 MiB, more than the 20.0 MiB limit; clear the "
                          "outputs (Restart & Clear Output) and save it again"),
    "n08": (wrong_shape_notebook, f"SubmissionError: n08.ipynb {UNREADABLE}: cell 1 has no cell_type or source "
                                  f"text; open it in Jupyter and save it again"),
    "f01": (many_files_folder, "SubmissionError: f01 holds 202 files, more than the 200 a submission may hold; "
                               "hand in only the assignment's files"),
    "f02": (huge_sparse_folder, "SubmissionError: f02 holds 30.0 MiB, more than the 20.0 MiB a submission may "
                                "hold; leave data, checkpoints and outputs out"),
    "f03": (deep_folder, "SubmissionError: f03 nests folders more than 32 deep; hand in only the assignment's "
                         "files"),
}
# entries whose name or kind is the problem: recorded by `grade batch`, never opened
BAD_ENTRIES: dict[str, tuple[Builder, str]] = {
    "bob smith": (bad_name_folder, "InvalidStudentId: entry 'bob smith': 'bob smith' is not a usable student id: "
                                   "ids are used as folder names and gradebook keys, so use 1 to 64 letters, "
                                   "digits and . _ - @ +, starting with a letter or digit; rename the entry to "
                                   "the student's id"),
    '=HYPERLINK("http:x")': (formula_name_zip, "InvalidStudentId: entry '=HYPERLINK(\"http:x\").zip': "
                                               "'=HYPERLINK(\"http:x\")' is not a usable student id: ids are used "
                                               "as folder names and gradebook keys, so use 1 to 64 letters, digits "
                                               "and . _ - @ +, starting with a letter or digit; rename the entry "
                                               "to the student's id"),
    "\\xffbad": (undecodable_name_zip, "InvalidStudentId: entry '\\udcffbad.zip': '\\udcffbad' is not a usable "
                                      "student id: ids are used as folder names and gradebook keys, so use 1 to "
                                      "64 letters, digits and . _ - @ +, starting with a letter or digit; rename "
                                      "the entry to the student's id"),
    "l01": (link_entry, "SubmissionError: l01 is a symbolic link; batch entries must be real folders or files "
                        "(copy the files in)"),
    "p01": (fifo_entry, "SubmissionError: p01.zip is not a regular file; hand in a folder, a .zip or an .ipynb"),
}
