"""Landlock: the kernel's unprivileged file-system and network fence (Linux ≥ 5.13).

A process that calls `restrict()` can from then on open only what its rules
allow, and so can everything it starts; the rules cannot be lifted. The
rights a kernel knows grow with its ABI version, so the ruleset asks only for
what this kernel handles and says what it got:

- ABI 1+: read / write / execute / make / remove, path by path;
- ABI 2: renaming or linking across folders (REFER); ABI 3: truncate;
- ABI 4: TCP bind and connect (no rule is added, so neither is allowed);
- ABI 5: ioctl on devices (allowed only where device access is granted);
- ABI 6: signals and abstract unix sockets scoped to the process's own domain.

Landlock does not limit path look-ups, only what is done at the end of one,
so a folder does not have to be readable for a file under it to be allowed.
Standard library only: this module runs inside the sandbox worker.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass, field

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_ONLY_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file may hold

READ = READ_FILE | READ_DIR
READ_EXECUTE = READ | EXECUTE
DEVICE = READ_FILE | WRITE_FILE | IOCTL_DEV
EVERYTHING = FS_RIGHTS_BY_ABI[5]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when Landlock is missing or disabled)."""
    result = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, int(result))


def _fs_rights(abi: int) -> int:
    return next(FS_RIGHTS_BY_ABI[v] for v in sorted(FS_RIGHTS_BY_ABI, reverse=True) if abi >= v)


@dataclass(frozen=True)
class Rule:
    """`rights` beneath `path` (a folder and all under it, or one file)."""

    path: str
    rights: int


@dataclass
class Outcome:
    """What `restrict()` achieved, for the sandbox report."""

    abi: int = 0
    applied: bool = False
    scoped: list[str] = field(default_factory=list)  # signal, abstract_unix_socket
    network: bool = False  # TCP bind/connect denied
    skipped: list[str] = field(default_factory=list)  # rule paths that do not exist here
    error: str = ""

    def describe(self) -> str:
        if not self.applied:
            return f"landlock unavailable: {self.error or 'not supported by this kernel'}"
        parts = ["files"] + (["TCP"] if self.network else []) + self.scoped
        return f"landlock ABI {self.abi} ({', '.join(parts)})"


def restrict(rules: list[Rule], *, deny_tcp: bool = True, scope: bool = True) -> Outcome:
    """Allow only `rules` from now on, in this process and its future children."""
    outcome = Outcome(abi=abi_version())
    if outcome.abi < 1:
        outcome.error = "the kernel has no Landlock (ABI 0)"
        return outcome
    handled = _fs_rights(outcome.abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if outcome.abi >= 4 and deny_tcp:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if outcome.abi >= 6 and scope:
        attr.scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
        size = 24
    ruleset = _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        outcome.error = f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
        return outcome
    try:
        for rule in rules:
            try:
                fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                outcome.skipped.append(rule.path)
                continue
            try:
                rights = rule.rights & handled
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= FILE_ONLY_RIGHTS
                beneath = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                if _libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                                 ctypes.byref(beneath), ctypes.c_uint32(0)) < 0:
                    outcome.error = f"landlock_add_rule({rule.path}) failed: {os.strerror(ctypes.get_errno())}"
                    return outcome
            finally:
                os.close(fd)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            outcome.error = f"no_new_privs failed: {os.strerror(ctypes.get_errno())}"
            return outcome
        if _libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            code = ctypes.get_errno()
            outcome.error = f"landlock_restrict_self failed: {errno.errorcode.get(code, code)}"
            return outcome
    finally:
        os.close(ruleset)
    outcome.applied = True
    outcome.network = bool(attr.handled_access_net)
    outcome.scoped = (["signals", "abstract sockets"] if attr.scoped else [])
    return outcome
