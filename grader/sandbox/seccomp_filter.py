"""A seccomp filter for the sandbox worker, compiled by libseccomp.

Everything is allowed except the system calls that reach outside the worker:
other processes' memory and tracing (ptrace, process_vm_*, pidfd_getfd), new
sockets (network, and unix sockets that could reach a host daemon), new
namespaces and mounts, System V and POSIX IPC objects (shared memory, message
queues, semaphores: they outlive a process and are a channel to the next
student's worker), kernel keyrings, BPF, io_uring (which bypasses this
filter), kernel modules, clocks, and the terminal's input queue. A denied
call fails with EPERM, so student code gets an ordinary PermissionError and
the grader records it; system calls of another architecture (32-bit entry
points) kill the process, which is libseccomp's default.

With `single_task` (every CPU worker) the worker may start no thread and no
process once the filter is loaded: clone, fork and vfork fail with EPERM
(clone3, whose flags a filter cannot read, with ENOSYS, so glibc falls back to
clone). Everything a student call does then happens on the thread the grader
called it on, where the run-time recorder (grader.sandbox.facts) sees it; a
`threading.Thread` fails with "can't start new thread". A GPU worker keeps
threads and processes: the CUDA driver starts threads of its own, and Triton
compiles kernels with ptxas in a child process.

The filter is built with libseccomp through its Python bindings (`seccomp`,
as packaged by Linux distributions, or `pyseccomp` from PyPI, which speak the
same API). Standard library only otherwise: this module runs in the worker.
"""

from __future__ import annotations

import errno
import importlib
from dataclasses import dataclass, field

DENIED_SYSCALLS = (
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # the network and host daemons (socketpair, which reaches nothing, stays allowed)
    "socket",
    # namespaces, mounts, roots
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    # kernel facilities a grader never needs
    "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd", "fanotify_init",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
    "quotactl", "lookup_dcookie", "syslog", "vhangup", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    # System V and POSIX IPC: objects that outlive the worker and reach other workers
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semtimedop", "semctl", "ipc",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
)
# With single_task: no new thread and no new process (clone3 is answered ENOSYS in any case).
NEW_TASK_SYSCALLS = ("clone", "fork", "vfork")
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                         0x40000000, 0x00000080)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
TERMINAL_INJECTION = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX


def _bindings():
    for name in ("seccomp", "pyseccomp"):
        try:
            return importlib.import_module(name)
        except Exception:  # missing module, or libseccomp itself missing
            continue
    return None


def available() -> str:
    """'' when a filter can be built here, else why not."""
    return "" if _bindings() is not None else "libseccomp and its Python bindings (pyseccomp) are not installed"


@dataclass
class Outcome:
    applied: bool = False
    denied: list[str] = field(default_factory=list)
    error: str = ""
    single_task: bool = False  # threads and processes refused

    def describe(self) -> str:
        if not self.applied:
            return f"seccomp unavailable: {self.error}"
        tasks = "new threads and processes, " if self.single_task else ""
        return (f"seccomp ({len(self.denied)} system calls denied; {tasks}IPC objects, namespaces and "
                f"32-bit calls refused)")


def install(single_task: bool = False) -> Outcome:
    """Load the filter into this process (and every process it starts); `single_task`: refuse
    every new thread and process from now on."""
    outcome = Outcome()
    lib = _bindings()
    if lib is None:
        outcome.error = available()
        return outcome
    try:
        rules = lib.SyscallFilter(defaction=lib.ALLOW)
        deny = lib.ERRNO(errno.EPERM)
        for name in DENIED_SYSCALLS:
            try:
                rules.add_rule(deny, name)
            except (OSError, ValueError, RuntimeError):
                continue  # not a system call on this architecture
            outcome.denied.append(name)
        if single_task:
            for name in NEW_TASK_SYSCALLS:
                try:
                    rules.add_rule(deny, name)
                except (OSError, ValueError, RuntimeError):
                    continue  # fork and vfork do not exist on every architecture
                outcome.denied.append(name)
        else:
            for flag in CLONE_NAMESPACE_FLAGS:
                rules.add_rule(deny, "clone", lib.Arg(0, lib.MASKED_EQ, flag, flag))
        # clone3 passes its flags in memory, out of a filter's sight: glibc falls back to clone.
        rules.add_rule(lib.ERRNO(errno.ENOSYS), "clone3")
        for request in TERMINAL_INJECTION:
            rules.add_rule(deny, "ioctl", lib.Arg(1, lib.EQ, request))
        rules.load()
    except Exception as exc:  # libseccomp refused: report it, the trusted side decides
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
    outcome.applied = True
    outcome.single_task = single_task
    return outcome
