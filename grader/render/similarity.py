"""Near-identical code: pairs of students, and copies of instructor sources.

Method: winnowing (Schleimer, Wilkerson & Aiken, SIGMOD 2003; the idea
behind MOSS) over a normalised token stream. Each file is tokenised with
Python's own `tokenize`; comments and blank lines are dropped, local names
become `V`, strings `S`, numbers `N`, while keywords, operators, attribute
names (`.exp`, `.sum`) and imported module names (`torch`, `tl`) are kept so
renaming variables or reformatting changes nothing but a different
algorithm still looks different. Hashes of every k-gram of tokens are
winnowed (the minimum of each window of w hashes), which guarantees that any
shared run of at least w + k - 1 tokens is found.

Why our own ~150 lines rather than copydetect: we need the normalisation
above for Python only, deterministic hashes (blake2b, not the per-process
salted `hash`), winnowed hashes from in-memory files straight out of the
gradebook, and a way to subtract starter code and class-wide boilerplate.
copydetect works on files on disk, uses its own lexer for many languages
and renders its own HTML; here the result is data for the class report.

What is compared:
- every pair of students (their latest submissions' modules);
- every student against the instructor sources: `reference/<id>/*.py`
  (not `mutants.py`: a mutant *is* a common mistake, and students who make
  it independently would all be flagged), `course_kernels/*.py`, and any files an instructor drops into
  `reference/<id>/similarity_sources/` (e.g. a public tutorial kernel the
  assignment resembles). Nothing is downloaded: staff choose what to add.
Winnowed hashes in the stubs students start from, and those shared by more than
half the class (the obvious way to write a two-line function), are ignored.
Flags are evidence for a person to read, never a verdict.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import keyword
import re
import tokenize
from collections import defaultdict, deque
from dataclasses import dataclass
from itertools import combinations

from grader.core.course import Course

K = 8  # tokens per k-gram (noise threshold: shorter matches are ignored)
WINDOW = 4  # hashes per winnowing window: matches of K + WINDOW - 1 tokens are always found
THRESHOLD = 0.8  # share of the smaller document's winnowed hashes that must match
MIN_SHARED = 4  # winnowed hashes: below this a "match" is too small to mean anything
COMMON_SHARE = 0.5  # winnowed hashes in more than this share of the class are boilerplate
SOURCES_DIR = "similarity_sources"

_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_BUILTINS = set(dir(builtins))
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)  # Python 3.12 on
# One line each: blanks and tabs only, never a newline, so a file of blank lines is read once (with
# `\s*` the search from every line start ran over all the blank lines after it: quadratic).
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+\S+[ \t]+)?import[ \t]+(.+)$", re.MULTILINE)


@dataclass(frozen=True)
class WinnowedHash:
    hash: int
    line: int


@dataclass(frozen=True)
class Match:
    """Two documents that share most of their winnowed hashes."""

    a: str
    b: str
    kind: str  # "pair" (two students) | "source" (a student and an instructor file)
    shared: int
    share_a: float  # of a's winnowed hashes, the share also in b
    share_b: float
    lines_a: str  # the lines of a that match, e.g. "3–9, 12"
    lines_b: str

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "kind": self.kind, "shared": self.shared,
                "share_a": round(self.share_a, 3), "share_b": round(self.share_b, 3),
                "percent": round(100 * max(self.share_a, self.share_b)), "lines_a": self.lines_a,
                "lines_b": self.lines_b}


def _imported_names(text: str) -> set[str]:
    names = set()
    for match in _IMPORT.finditer(text):
        for part in match.group(1).strip("() ").split(","):
            words = part.split()
            if words:
                names.add(words[-1] if "as" in words else words[0].split(".")[0])
    return names


def tokens(text: str) -> list[tuple[str, int]]:
    """(normalised token, line) for a Python source; falls back to a plain split if it
    does not tokenise (a syntax error must not hide a copy)."""
    keep = _imported_names(text) | _BUILTINS
    out: list[tuple[str, int]] = []
    previous = ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _SKIPPED:
                continue
            value = token.string
            if token.type == tokenize.NAME and not keyword.iskeyword(value) and previous != "." \
                    and value not in keep:
                value = "V"
            elif token.type == tokenize.STRING or token.type == _FSTRING_START:
                value = "S"
            elif token.type == tokenize.NUMBER:
                value = "N"
            elif token.type == tokenize.NEWLINE:
                value = ";"
            elif token.type in (tokenize.INDENT, tokenize.DEDENT):
                value = "{" if token.type == tokenize.INDENT else "}"
            out.append((value, token.start[0]))
            previous = token.string
        return out
    except (tokenize.TokenError, SyntaxError, IndentationError):
        out = []
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.split("#", 1)[0]
            for word in re.findall(r"[A-Za-z_]\w*|\d+(?:\.\d*)?|\S", line):
                if word[0].isdigit():
                    word = "N"
                elif (word[0].isalpha() or word[0] == "_") and not keyword.iskeyword(word) \
                        and word not in keep:
                    word = "V"
                out.append((word, number))
        return out


def _hash(gram: tuple[str, ...]) -> int:
    return _hash_text("\x1f".join(gram))


def _hash_text(joined: str) -> int:
    return int.from_bytes(hashlib.blake2b(joined.encode(), digest_size=8).digest(), "big")


def winnowed_hashes(text: str, k: int = K, window: int = WINDOW) -> list[WinnowedHash]:
    """Winnowed k-gram hashes of a source, with the line each one starts on.

    Linear in the number of tokens: one hash per k-gram, and the rightmost minimum of each window
    kept by a monotonic queue (each position enters and leaves it once)."""
    stream = tokens(text)
    if len(stream) < k:
        return [WinnowedHash(_hash(tuple(t for t, _ in stream)), stream[0][1])] if stream else []
    values = [t for t, _ in stream]
    known: dict[str, int] = {}  # a k-gram seen before is not hashed again (padding repeats itself)
    hashes = []
    for i in range(len(stream) - k + 1):
        joined = "\x1f".join(values[i:i + k])
        value = known.get(joined)
        if value is None:
            value = known[joined] = _hash_text(joined)
        hashes.append(value)
    if len(hashes) <= window:
        low = min(range(len(hashes)), key=hashes.__getitem__)  # the first minimum, as min() picks
        return [WinnowedHash(hashes[low], stream[low][1])]
    chosen: list[int] = []
    queue: deque[int] = deque()  # positions of the window, their hashes strictly increasing
    for i, value in enumerate(hashes):
        while queue and hashes[queue[-1]] >= value:  # ties: the later position is the rightmost minimum
            queue.pop()
        queue.append(i)
        if queue[0] <= i - window:
            queue.popleft()
        if i >= window - 1 and (not chosen or chosen[-1] != queue[0]):
            chosen.append(queue[0])
    return [WinnowedHash(hashes[i], stream[i][1]) for i in chosen]


def _ranges(lines: set[int]) -> str:
    """{3, 4, 5, 9} → "3–5, 9" (gaps of one line are bridged)."""
    ordered = sorted(lines)
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        start = end = ordered[i]
        while i + 1 < len(ordered) and ordered[i + 1] <= end + 2:
            i += 1
            end = ordered[i]
        parts.append(str(start) if start == end else f"{start}–{end}")
        i += 1
    return ", ".join(parts)


class Corpus:
    """Documents as winnowed hashes, with base code and boilerplate subtracted."""

    def __init__(self, base: list[str] = ()):
        self.base = {f.hash for text in base for f in winnowed_hashes(text)}
        self.documents: dict[str, dict[int, set[int]]] = {}  # name → hash → lines

    def add(self, name: str, text: str) -> None:
        prints: dict[int, set[int]] = defaultdict(set)
        for f in winnowed_hashes(text):
            if f.hash not in self.base:
                prints[f.hash].add(f.line)
        self.documents[name] = dict(prints)

    def _match(self, a: str, b: str, kind: str, ignore: set[int]) -> Match | None:
        fa = {h: ls for h, ls in self.documents[a].items() if h not in ignore}
        fb = {h: ls for h, ls in self.documents[b].items() if h not in ignore}
        shared = fa.keys() & fb.keys()
        if len(shared) < MIN_SHARED or not fa or not fb:
            return None
        share_a, share_b = len(shared) / len(fa), len(shared) / len(fb)
        if max(share_a, share_b) < THRESHOLD:
            return None
        return Match(a, b, kind, len(shared), share_a, share_b,
                     _ranges({line for h in shared for line in fa[h]}),
                     _ranges({line for h in shared for line in fb[h]}))

    def compare(self, students: list[str], sources: list[str]) -> list[Match]:
        """Student pairs, then students against sources; the closest first."""
        seen_in: dict[int, int] = defaultdict(int)
        for name in students:
            for h in self.documents[name]:
                seen_in[h] += 1
        limit = max(2, int(COMMON_SHARE * len(students)))
        common = {h for h, n in seen_in.items() if n > limit} if len(students) >= 4 else set()
        matches = [m for a, b in combinations(sorted(students), 2)
                   if (m := self._match(a, b, "pair", common))]
        matches += [m for a in sorted(students) for b in sources
                    if (m := self._match(a, b, "source", common))]
        return sorted(matches, key=lambda m: (-max(m.share_a, m.share_b), m.a, m.b))


def instructor_sources(course: Course, assignment_id: str) -> dict[str, str]:
    """Reference modules, reference kernels and staff-chosen similarity sources, by display name
    (a path relative to the course root)."""
    course_root = course.root
    reference = course.reference_for(assignment_id)
    paths = sorted(reference.glob("*.py")) + sorted(course.kernels_dir.glob("*.py"))
    extra = reference / SOURCES_DIR
    if extra.is_dir():
        paths += sorted(p for p in extra.rglob("*") if p.is_file())
    sources = {}
    for path in paths:
        if path.name in ("__init__.py", "mutants.py"):  # mutants are the mistakes students make
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            sources[str(path.relative_to(course_root))] = text
    return sources


def find_similar(submissions: dict[str, str], sources: dict[str, str] | None = None,
                 starter: list[str] = ()) -> list[Match]:
    """submissions: student → their code (modules joined); sources: name → instructor text."""
    corpus = Corpus(list(starter))
    for student, text in submissions.items():
        corpus.add(student, text)
    for name, text in (sources or {}).items():
        if name not in submissions:
            corpus.add(name, text)
    return corpus.compare(list(submissions), [n for n in (sources or {}) if n not in submissions])


def clusters(matches: list[Match]) -> list[list[str]]:
    """Groups of students linked by pair matches (connected components), largest first."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        parent.setdefault(name, name)
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for match in matches:
        if match.kind == "pair":
            parent[root(match.a)] = root(match.b)
    groups: dict[str, list[str]] = defaultdict(list)
    for name in parent:
        groups[root(name)].append(name)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g))
