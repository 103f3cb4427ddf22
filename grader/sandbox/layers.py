"""The fences a worker puts up around itself before any student code runs.

`WorkerSpec` is what the trusted side decided (paths, uid, limits, layers);
it travels to the worker as JSON. In the worker, after the fork from its
supervisor, `enter_limits`, `drop_privileges` and `fence` apply it in this
order: resource limits, then the unprivileged uid (so torch is imported by
the worker's own user), then Landlock and seccomp. What took effect comes
back in a report that the worker sends before it imports a student file, so
the report is written by grader code, never by the student's.

Standard library only: this module runs inside the sandbox worker.
"""

from __future__ import annotations

import json
import os
import resource
from dataclasses import asdict, dataclass, field

from grader.sandbox import landlock, seccomp_filter
from grader.sandbox.limits import file_size_limit

# Read-only system folders a Python process with torch and Triton needs.
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/sys")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
PROC_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/filesystems", "/proc/sys",
              "/proc/self", "/proc/thread-self")


@dataclass
class WorkerSpec:
    """Everything the worker needs to fence itself in and start serving."""

    workdir: str
    modules: list[str]
    request_fd: int
    reply_fd: int
    lifeline_fd: int
    status_fd: int
    memory_mb: int  # these five: the trusted side's SandboxLimits (grader.sandbox.limits)
    cpu_time_s: int
    file_size_mb: int
    max_processes: int
    write_budget_mb: int
    use_gpu: bool = False
    uid: int | None = None  # drop to this uid/gid (None: stay, e.g. bubblewrap already dropped)
    landlock: bool = True
    seccomp: bool = True
    read_paths: list[str] = field(default_factory=list)  # Python roots, the grader runtime
    devices: list[str] = field(default_factory=list)  # a GPU worker's device files (isolation.gpu_device_files)
    protected: list[str] = field(default_factory=list)  # must be unreadable afterwards (course, records)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        return cls(**json.loads(text))


def enter_limits(spec: WorkerSpec) -> None:
    """rlimits of this process (and, for the process count, of its uid)."""
    resource.setrlimit(resource.RLIMIT_CPU, (spec.cpu_time_s, spec.cpu_time_s + 5))
    size = file_size_limit(spec.file_size_mb, spec.write_budget_mb)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not spec.use_gpu:  # the CUDA driver reserves huge address space: no AS limit there
        limit = spec.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _limit_processes(spec: WorkerSpec) -> None:
    # RLIMIT_NPROC counts the processes of the real uid and is not enforced for root:
    # with a uid of its own the worker's count is exact; bubblewrap's PID namespace
    # bounds a root worker's.
    if os.getuid() != 0:
        current = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if current == resource.RLIM_INFINITY or current > spec.max_processes:
            resource.setrlimit(resource.RLIMIT_NPROC, (spec.max_processes, spec.max_processes))


def drop_privileges(spec: WorkerSpec) -> dict[str, str]:
    """Become `spec.uid` with no supplementary groups; {layer: description}."""
    report: dict[str, str] = {}
    if spec.uid is not None:
        os.setgroups([])
        os.setresgid(spec.uid, spec.uid, spec.uid)
        os.setresuid(spec.uid, spec.uid, spec.uid)
        if os.getresuid() != (spec.uid,) * 3 or os.getgroups():
            raise PermissionError(f"could not become uid {spec.uid}")
        report["uid"] = f"uid {spec.uid}, gid {spec.uid}, no supplementary groups"
    _limit_processes(spec)
    return report


def _rules(spec: WorkerSpec) -> list[landlock.Rule]:
    rules = [landlock.Rule(path, landlock.READ_EXECUTE) for path in (*SYSTEM_READ, *spec.read_paths)]
    rules.append(landlock.Rule(spec.workdir, landlock.EVERYTHING))
    rules += [landlock.Rule(path, landlock.READ) for path in PROC_FILES]
    # /proc/self resolves to this pid: other processes' /proc entries stay closed.
    rules.append(landlock.Rule(f"/proc/{os.getpid()}", landlock.READ))
    devices = (spec.devices or ["/dev"]) if spec.use_gpu else DEVICES
    rules += [landlock.Rule(path, landlock.DEVICE | landlock.READ_DIR) for path in devices]
    return rules


def _still_readable(paths: list[str]) -> list[str]:
    readable = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        os.close(fd)
        readable.append(path)
    return readable


def fence(spec: WorkerSpec) -> tuple[dict[str, str], dict[str, str]]:
    """Landlock, then seccomp. Returns ({layer: description}, {layer: why it is missing})."""
    applied: dict[str, str] = {}
    missing: dict[str, str] = {}
    if spec.landlock:
        outcome = landlock.restrict(_rules(spec))
        leaks = _still_readable(spec.protected) if outcome.applied else []
        if leaks:
            missing["landlock"] = f"applied, but {', '.join(leaks)} is still readable"
        elif outcome.applied:
            applied["landlock"] = outcome.describe()
        else:
            missing["landlock"] = outcome.error
    if spec.seccomp:
        result = seccomp_filter.install(single_task=not spec.use_gpu)
        if result.applied:
            applied["seccomp"] = result.describe()
        else:
            missing["seccomp"] = result.error
    return applied, missing
