"""Student-controlled text made safe to show on a terminal or in a report.

Whatever a submission prints, raises or is named reaches staff terminals,
HTML reports and results.json. `printable` removes everything in such text
that a terminal or a browser would act on instead of showing: ANSI/VT escape
sequences (CSI, OSC, DCS, SOS, PM, APC and the short ESC forms, in their
7-bit and 8-bit spellings), C0 controls except newline and tab, DEL, C1
controls, carriage returns that do not end a line, the Unicode bidi
controls that reorder what is displayed, and lone surrogates (which no
terminal, file or database can encode). Ordinary text, newlines and tabs are
kept as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Control strings: OSC, DCS, SOS, PM, APC, ended by BEL or ST (7-bit ESC \ or 8-bit 0x9C).
_CONTROL_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
# CSI: ESC [ or 0x9B, parameter bytes, intermediate bytes, one final byte.
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
# Any other escape: ESC, intermediate bytes, one final byte (ESC c, ESC ( B, ESC 7 ...).
_SHORT_ESCAPE = r"\x1b[\x20-\x2f]*[\x30-\x7e]"
_SEQUENCES = re.compile(f"{_CONTROL_STRING}|{_CSI}|{_SHORT_ESCAPE}")
# What is left: C0 controls but tab and newline, DEL, C1 controls, lone CRs, bidi controls, surrogates.
_SINGLES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff]|\r(?!\n)")


def printable(text: str) -> str:
    """`text` without escape sequences, control characters, lone CRs or bidi controls."""
    if not isinstance(text, str):
        text = str(text)
    if text.isprintable():  # the common case: nothing to remove (newlines and tabs are not "printable")
        return text
    return _SINGLES.sub("", _SEQUENCES.sub("", text)).replace("\r\n", "\n")


def storable(text: str) -> str:
    """`text` as valid UTF-8 text: lone surrogates (undecodable bytes) become backslash escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape" if _ESCAPED_BYTES.fullmatch(text) else "backslashreplace") \
            .decode("utf-8", "backslashreplace")


_ESCAPED_BYTES = re.compile("[^\ud800-\udc7f\udd00-\udfff]*", re.DOTALL)  # only U+DC80-U+DCFF: os-decoded bytes


def one_line(text: str, limit: int = 500) -> str:
    """`printable(text)` on a single line (newlines and tabs become spaces), cut at `limit`."""
    line = " ".join(printable(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def printable_data(value):
    """A copy of JSON-like data (dicts, lists, tuples) with `printable` applied to every string."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(printable_data(v) for v in value)
    return value
