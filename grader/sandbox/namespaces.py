"""Fresh namespaces for one worker forked from a template that lives inside bubblewrap.

Under bubblewrap a template worker (grader.sandbox.zygote) runs in the namespaces
bubblewrap made for one executor slot: its own user, PID, network, IPC and mount
namespaces, as that slot's uid. Each student's worker is forked from it and, before
anything else, gets namespaces of its own nested in the slot's:

- `enter` (in the forked child): a new user namespace (the slot's uid mapped to
  itself, nothing else), and new mount, PID, network, IPC and UTS namespaces; a tmpfs
  of the write budget's size at the submission's mount point, holding a copy of its own
  folder (so what the worker writes stays in memory, never past the budget, and never
  reaches the host's disk), the slot's folder of workdirs hidden under an empty tmpfs, a
  fresh /tmp and /dev/shm of the same size (bubblewrap's read-only binds below them, an
  interpreter in a virtual environment under /tmp say, bound again);
- `become_init` (in the first child of the new PID namespace, the supervisor,
  PID 1 there): a /proc of its own PID namespace, then every capability dropped,
  so that the worker it forks holds none.

So nothing one student leaves (processes, files, System V or POSIX IPC objects,
abstract sockets, memory) reaches the next worker of the slot, the template or
another slot: the PID namespace ends with its supervisor, the IPC and network
namespaces with their last process, the mounts with the mount namespace. The
worker then puts up its own fences (grader.sandbox.layers: rlimits, Landlock,
seccomp) as at every level.

Standard library only: this module runs in the sandbox's runtime copy.
"""

from __future__ import annotations

import ctypes
import os
import stat

from grader.sandbox.limits import BLOCK

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
WORKER_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS

MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
LAST_CAPABILITY = 63  # dropping an unknown one fails with EINVAL, which is ignored

SLOT_MOUNT = "/slots"  # the slot's folder of workdirs inside the template's bubblewrap
FRESH = ("/tmp", "/dev/shm")  # an empty tmpfs of its own for each worker

_libc = ctypes.CDLL(None, use_errno=True)


class NamespaceError(OSError):
    """A namespace or mount could not be made: the worker must not start."""


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise NamespaceError(number, f"{what}: {os.strerror(number)}")


def _mount(source: str, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), kind.encode() if kind else None, flags,
                       data.encode() if data else None), f"mount {source} on {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _unshare() -> None:
    """New user (this uid and gid mapped to themselves, nothing else), mount, PID, network, IPC and
    UTS namespaces; mounts made from here on stay in this one."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(WORKER_NAMESPACES), "unshare (user, mount, PID, network, IPC, UTS)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)


def _mounts_below(folder: str) -> list[str]:
    """The outermost mount points strictly below `folder` (say the interpreter's read-only folder
    that bubblewrap bound under /tmp, when Python lives in a virtual environment there)."""
    below = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(folder.rstrip("/") + "/"):
                below.append(point)
    return [p for p in sorted(set(below)) if not any(p.startswith(q + "/") for q in below if q != p)]


def tmpfs_options(size: int, mode: str) -> str:
    """A tmpfs of `size` bytes with as many inodes as blocks (grader.sandbox.limits counts each entry
    as a block at least)."""
    return f"size={size},nr_inodes={max(64, size // BLOCK)},mode={mode}"


def _copy_tree(source: str, target: str) -> None:
    """The folders and regular files under `source`, with their modes, into `target` (nothing else:
    the trusted side writes only those there)."""
    for folder, dirs, names in os.walk(source):
        relative = os.path.relpath(folder, source)
        into = target if relative == "." else os.path.join(target, relative)
        for name in list(dirs):
            info = os.lstat(os.path.join(folder, name))
            if not stat.S_ISDIR(info.st_mode):
                dirs.remove(name)
                continue
            os.mkdir(os.path.join(into, name), info.st_mode & 0o7777)
        for name in names:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            with open(path, "rb") as src, open(os.path.join(into, name), "xb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.chmod(os.path.join(into, name), info.st_mode & 0o7777)


def _fresh(folders, size: int) -> None:
    """An empty tmpfs of `size` bytes on each folder, with the mounts bubblewrap made below it (read-only
    system or Python folders) bound again at their places in it: only what others left there is gone."""
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        kept = []
        try:
            for point in _mounts_below(folder):
                kept.append((point, os.open(point, os.O_PATH)))
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options(size, "1777"))
            for point, handle in kept:
                if os.path.isdir(f"/proc/self/fd/{handle}"):
                    os.makedirs(point, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(point), exist_ok=True)
                    os.close(os.open(point, os.O_CREAT | os.O_WRONLY, 0o444))
                _mount(f"/proc/self/fd/{handle}", point, None, MS_BIND | MS_REC)
        finally:
            for _, handle in kept:
                os.close(handle)


def enter(source: str, mountpoint: str, size: int) -> None:
    """In the forked child: new namespaces, a tmpfs of `size` bytes (the write budget) at `mountpoint`
    holding a copy of `source` (a folder under SLOT_MOUNT), the other workdirs hidden, a fresh /tmp
    and /dev/shm of that size. Raises NamespaceError (OSError when the copy does not fit)."""
    _unshare()
    real = os.path.realpath(source)
    if not real.startswith(SLOT_MOUNT + "/"):
        raise NamespaceError(0, f"{source} is not a workdir under {SLOT_MOUNT}")
    _mount("tmpfs", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options(size, "0755"))
    _copy_tree(real, mountpoint)
    _mount("tmpfs", SLOT_MOUNT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
    _fresh(FRESH, size)


def probe() -> None:
    """Exit 0 when a process here (inside bubblewrap) can make a worker's namespaces as `enter` and
    `become_init` do, else exit 1 with the step that failed on stderr."""
    try:
        _unshare()
        _fresh(("/tmp",), 1 << 20)
        pid = os.fork()
        if pid == 0:
            try:
                become_init()
            except OSError as exc:
                os.write(2, f"{exc}".encode())
                os._exit(1)
            os._exit(0)
        code = wait_for(pid)
    except OSError as exc:
        os.write(2, f"{exc}".encode())
        code = 1
    os._exit(code)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capability left in any set (bounding, ambient, permitted, effective, inheritable)."""
    for cap in range(LAST_CAPABILITY + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(_libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), (_CapData * 2)()), "capset")
    with open("/proc/self/status") as fh:
        held = {k: v.strip() for k, _, v in (line.partition(":") for line in fh) if k in ("CapEff", "CapPrm")}
    if any(int(v, 16) for v in held.values()):
        raise NamespaceError(0, f"capabilities still held: {held}")


def become_init() -> None:
    """In the first child of the new PID namespace (PID 1 there): its own /proc, then no capability."""
    if os.getpid() != 1:
        raise NamespaceError(0, "not the first process of a new PID namespace")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    drop_capabilities()


def wait_for(pid: int) -> int:
    """The exit code that passes `pid`'s end on (a signal as 128 + its number)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 70
        except InterruptedError:
            continue
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
