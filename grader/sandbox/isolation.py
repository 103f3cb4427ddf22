"""How the worker process is fenced in: bubblewrap namespaces when they work,
plain process limits otherwise. The level used is recorded in every report.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

GRADER_PACKAGE = Path(__file__).resolve().parent.parent  # .../grader
RUNTIME_MOUNT = "/opt/grader-runtime"  # where the grader package appears inside bwrap
WORKDIR_MOUNT = "/submission"


@dataclass(frozen=True)
class Isolation:
    level: str  # "bubblewrap" or "process"
    description: str


@functools.lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """True when bubblewrap can create namespaces here (it cannot in some containers)."""
    if os.environ.get("GRADE_NO_BWRAP"):
        return False
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
            capture_output=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def describe(level: str) -> Isolation:
    if level == "bubblewrap":
        return Isolation(level, "bubblewrap: own user, PID, network, IPC and mount namespaces; "
                                "read-only system, only the submission folder writable; "
                                "no network; resource limits")
    return Isolation(level, "process: separate process group, scrubbed environment, private "
                            "temporary folder, resource limits (bubblewrap unavailable here)")


def _python_roots() -> list[str]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    # Keep only outermost folders that exist and are not already covered.
    existing = sorted({os.path.realpath(r) for r in roots if r and os.path.exists(r)})
    outer: list[str] = []
    for path in existing:
        if not any(path == o or path.startswith(o + os.sep) for o in outer):
            outer.append(path)
    return outer


def bwrap_command(workdir: str, use_gpu: bool) -> list[str]:
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    cmd += ["--dev-bind", "/dev", "/dev"] if use_gpu else ["--dev", "/dev"]
    for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/alternatives",
                   "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                   "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
                   "/sys/devices/system/cpu"):
        if os.path.lexists(system):
            if os.path.islink(system):
                cmd += ["--symlink", os.readlink(system), system]
            else:
                cmd += ["--ro-bind", system, system]
    for root in _python_roots():
        cmd += ["--ro-bind", root, root]
    if use_gpu and os.path.isdir("/sys"):
        cmd += ["--ro-bind", "/sys", "/sys"]
    cmd += ["--ro-bind", str(GRADER_PACKAGE), f"{RUNTIME_MOUNT}/grader"]
    cmd += ["--bind", workdir, WORKDIR_MOUNT, "--chdir", WORKDIR_MOUNT]
    return cmd


def scrubbed_env(use_gpu: bool, home: str) -> dict[str, str]:
    """Only what the worker needs; no tokens, proxies or course paths."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        # One thread: tests use small tensors, and a batch runs one worker per core.
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TRITON_CACHE_DIR": os.path.join(home, ".triton"),
    }
    if not use_gpu:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    for key in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH",
                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if use_gpu and key in os.environ:
            env[key] = os.environ[key]
        elif key.startswith("OPENBLAS") and key in os.environ:
            env[key] = os.environ[key]
    return env


def limit_resources(memory_mb: int, cpu_time_s: int, file_size_mb: int,
                    use_gpu: bool, max_processes: int = 256) -> None:
    """Run in the child between fork and exec (preexec_fn).

    RLIMIT_NPROC counts every process of the real user and is not enforced for
    root; a fork bomb is then still contained by bubblewrap's PID namespace and
    killed with it."""
    if os.getuid() != 0:
        current = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if current == resource.RLIM_INFINITY or current > max_processes:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_time_s, cpu_time_s + 5))
    size = file_size_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not use_gpu:  # the CUDA driver reserves huge address space: no AS limit there
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
