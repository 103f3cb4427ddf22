"""Which sandbox layers this host can give a worker, and how to launch one.

A level is the list of layers that took effect, joined by '+', e.g.
`process+uid+landlock+seccomp+reaper` or `bubblewrap+uid+landlock+seccomp+reaper`:

- bubblewrap: own user, PID, network, IPC and mount namespaces (only the
  submission folder and read-only system paths exist inside);
- process: a separate process in its own session with a scrubbed environment
  and resource limits (the base when namespaces are unavailable, e.g. in
  Docker or on Gradescope, whose seccomp profile blocks user namespaces);
- uid: an unprivileged uid of its own, no supplementary groups (root only);
- landlock: read-only system and Python, read-write only its own folder, its
  own /proc entry only, no TCP, signals and abstract sockets scoped;
- seccomp: no tracing, other processes' memory, new sockets, namespaces, mounts;
- reaper: every descendant ends with the worker (a subreaper supervisor, and
  a PID namespace under bubblewrap).

Every layer is detected, applied where it exists (inside bubblewrap too), and
named in every report; grader.pipeline.policy decides whether a level may give an
official grade.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import landlock, namespaces, scratch, seccomp_filter, uids
from grader.sandbox.limits import WORKER_TORCH_THREADS

SANDBOX_PACKAGE = Path(__file__).resolve().parent  # .../grader/sandbox
RUNTIME_MOUNT = "/opt/grader-runtime"  # where the runtime copy appears inside bwrap
WORKDIR_MOUNT = "/submission"
LAYER_ORDER = ("bubblewrap", "process", "uid", "landlock", "seccomp", "reaper")
# What the worker runs, and nothing else of the grader: the runtime copy holds these only.
WORKER_MODULES = ("__init__.py", "facts.py", "forbidden.py", "kernel_counts.py", "landlock.py", "layers.py",
                  "limits.py", "namespaces.py", "protocol.py", "seccomp_filter.py", "supervisor.py", "timer.py",
                  "worker.py", "zygote.py")


@dataclass(frozen=True)
class Isolation:
    """The layers of one worker: what took effect, and why any other is missing."""

    layers: tuple[str, ...]
    details: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    fixes: dict[str, str] = field(default_factory=dict)  # a missing layer this host could give → the command

    @property
    def gaps(self) -> tuple[str, ...]:
        """One line for each missing layer this host could give, with the command that gives it."""
        return tuple(f"the sandbox ran without its {name} layer, which this host can give: `{command}` "
                     f"(then grade again; `grade sandbox` shows every layer)" for name, command in self.fixes.items())

    @property
    def level(self) -> str:
        return "+".join(self.layers)

    @property
    def description(self) -> str:
        text = "; ".join(f"{name}: {self.details.get(name, 'on')}" for name in self.layers)
        if self.missing:
            text += " — missing: " + "; ".join(f"{name} ({why})" for name, why in self.missing.items())
        return text


def ordered(layers) -> tuple[str, ...]:
    return tuple(name for name in LAYER_ORDER if name in layers)


_BWRAP: dict[bool, bool] = {}


def _bwrap_probe(as_uid: int | None) -> bool:
    """Whether bwrap works here, as this user or as an unprivileged one (asked once per process)."""
    key = as_uid is not None
    if key not in _BWRAP:
        _BWRAP[key] = _run_bwrap_probe(as_uid)
    return _BWRAP[key]


def _run_bwrap_probe(as_uid: int | None) -> bool:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    user = {} if as_uid is None else {"user": as_uid, "group": as_uid, "extra_groups": []}
    try:
        probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                               capture_output=True, timeout=10, **user)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


NO_BWRAP_ENV = "GRADE_NO_BWRAP"  # force the no-namespace level, as on a host where bubblewrap cannot work
WITHOUT_ENV = "GRADE_SANDBOX_WITHOUT"  # e.g. "uid,seccomp": behave as a host without those layers
NO_ZYGOTE_ENV = "GRADE_NO_ZYGOTE"  # start every worker from scratch (no template worker), at either level


@dataclass(frozen=True)
class SandboxSwitches:
    """What the course staff switched off to rehearse a weaker host (each can only weaken a level,
    and every grade's level is still checked against the course's requirement).

    Read from the environment once, where a command starts (`from_environment`), and passed
    down with the assignment, so a pool worker or a Ray actor grades with the switches of the
    command that asked, whatever its own environment holds."""

    no_bubblewrap: bool = False
    without: frozenset[str] = frozenset()  # layers turned off: uid, landlock, seccomp, bubblewrap
    no_template: bool = False  # no template worker: every worker starts from scratch

    @classmethod
    def from_environment(cls, environ=None) -> SandboxSwitches:
        env = os.environ if environ is None else environ
        return cls(no_bubblewrap=bool(env.get(NO_BWRAP_ENV)),
                   without=frozenset(p.strip() for p in env.get(WITHOUT_ENV, "").split(",") if p.strip()),
                   no_template=bool(env.get(NO_ZYGOTE_ENV)))

    def why_off(self, layer: str) -> str:
        """'' when `layer` is not switched off, else which switch turned it off."""
        if layer == "bubblewrap" and self.no_bubblewrap:
            return f"turned off by {NO_BWRAP_ENV}"
        return f"turned off by {WITHOUT_ENV}" if layer in self.without else ""


def bwrap_works(as_uid: int | None = None, switches: SandboxSwitches | None = None) -> bool:
    """True when bubblewrap can create namespaces here (it cannot in most containers) and is not
    switched off."""
    switches = SandboxSwitches.from_environment() if switches is None else switches
    if switches.why_off("bubblewrap"):
        return False
    return _bwrap_probe(as_uid)


def python_roots() -> list[str]:
    """The outermost folders of this Python installation (prefixes, stdlib, site-packages)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    existing = sorted({os.path.realpath(r) for r in roots if r and os.path.exists(r)})
    outer: list[str] = []
    for path in existing:
        if not any(path == o or path.startswith(o + os.sep) for o in outer):
            outer.append(path)
    return outer


def library_paths(use_gpu: bool) -> list[str]:
    """Extra library folders a GPU worker loads from (the CUDA driver's, from LD_LIBRARY_PATH)."""
    if not use_gpu:
        return []
    return [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p and os.path.isdir(p)]


@functools.lru_cache(maxsize=1)
def runtime_files() -> tuple[str, ...]:
    """Files the uid layer needs readable by the worker's user: the interpreter, torch and Triton
    (found without importing them)."""
    files = [os.__file__]
    for package in ("torch", "triton"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            files.append(spec.origin)
    return tuple(os.path.realpath(f) for f in files)


GPU_DEVICES_ENV = "GRADE_GPU_DEVICES"  # "all": a GPU worker gets the host's whole /dev (the former behaviour)
BASE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SHARED_GPU_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")


def own_gpu_minor(proc_root: str = "/proc/driver/nvidia/gpus") -> int | None:
    """The device minor (N of /dev/nvidiaN) of the GPU this process computes on (CUDA's current
    device), read from the driver's /proc entry for its PCI address; None when it cannot be told."""
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        address = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        with open(os.path.join(proc_root, address, "information")) as fh:
            for line in fh:
                if line.startswith("Device Minor:"):
                    return int(line.split(":", 1)[1])
    except Exception:  # no CUDA, an older torch without PCI fields, no /proc entry: every GPU's file
        return None
    return None


def gpu_device_files(minor: int | None, dev_root: str = "/dev") -> list[str]:
    """The device files a GPU worker gets: the ordinary ones, the driver's shared ones, and its own
    GPU's (/dev/nvidia<minor>); every GPU's when `minor` is None (the GPU could not be told), the
    whole of /dev when GRADE_GPU_DEVICES=all."""
    if os.environ.get(GPU_DEVICES_ENV) == "all":
        return [dev_root]
    files = [os.path.join(dev_root, os.path.basename(path)) for path in BASE_DEVICES]
    files += [os.path.join(dev_root, name) for name in SHARED_GPU_DEVICES]
    gpus = sorted(glob.glob(os.path.join(dev_root, "nvidia[0-9]*")))
    own = os.path.join(dev_root, f"nvidia{minor}")
    files += [own] if minor is not None and own in gpus else gpus
    return [path for path in files if os.path.lexists(path)]


def worker_gpu_devices() -> list[str]:
    """`gpu_device_files` for this host and this process's GPU."""
    return gpu_device_files(own_gpu_minor())


def no_gpu_here() -> bool:
    """True when this machine surely has no CUDA device for a worker (no NVIDIA device file, or none
    made visible), so a CPU worker's template may be started before torch is imported to ask."""
    return os.environ.get("CUDA_VISIBLE_DEVICES") == "" or not glob.glob("/dev/nvidia[0-9]*")


def build_runtime(target: Path) -> Path:
    """A private copy of only what the worker runs: target/grader/sandbox/<WORKER_MODULES>.

    Never the course root and never the whole grader package: student code that
    walks sys.path finds the sandbox's own modules and nothing else of ours."""
    package = target / "grader" / "sandbox"
    package.mkdir(parents=True)
    (target / "grader" / "__init__.py").write_text('"""The sandbox worker\'s runtime copy."""\n')
    for name in WORKER_MODULES:
        shutil.copyfile(SANDBOX_PACKAGE / name, package / name)
    for folder in (target, target / "grader", package):
        folder.chmod(0o755)
    for item in package.iterdir():
        item.chmod(0o644)
    return target


@dataclass(frozen=True)
class HostLayers:
    """What this host can give a worker, before one is started."""

    bubblewrap: bool
    uid: str  # "" when available, else why not
    landlock_abi: int
    seccomp: str  # "" when available, else why not
    bubblewrap_missing: str = ""  # why bubblewrap is not used, when a switch turned it off
    landlock_missing: str = ""  # likewise for Landlock
    nested: str = "bubblewrap is not used"  # "" when bubblewrap workers may fork from a template, else why not
    uid_fix: str = ""  # when the uid layer is missing only because a folder is closed: the command that opens it

    def predicted(self) -> Isolation:
        layers = {"bubblewrap" if self.bubblewrap else "process", "reaper"}
        missing: dict[str, str] = {}
        if not self.bubblewrap:
            missing["bubblewrap"] = self.bubblewrap_missing or bubblewrap_reason()
        for name, reason in (("uid", self.uid), ("seccomp", self.seccomp)):
            if reason:
                missing[name] = reason
            else:
                layers.add(name)
        if self.landlock_abi >= 1:
            layers.add("landlock")
        else:
            missing["landlock"] = self.landlock_missing or "this kernel has no Landlock"
        return Isolation(ordered(layers), {}, missing, {"uid": self.uid_fix} if self.uid_fix else {})


def bubblewrap_reason() -> str:
    if not shutil.which("bwrap"):
        return "bwrap is not installed"
    return "bwrap cannot create namespaces here (a container's seccomp profile blocks them)"


def uid_reason(uid: int | None) -> str:
    """'' when the worker can run as `uid`, else why not."""
    if os.geteuid() != 0:
        return "the grader is not root, so it cannot give the worker a uid of its own"
    if uid is None:
        return "no uid could be claimed"
    return uids.runtime_reachable(uid, runtime_files())


def host_layers(probe_uid: int | None, switches: SandboxSwitches | None = None) -> HostLayers:
    """Detect the layers (cheap; the probes are cached per process), less those switched off."""
    switches = SandboxSwitches.from_environment() if switches is None else switches
    uid_problem = switches.why_off("uid") or uid_reason(probe_uid)
    as_uid = probe_uid if not uid_problem else None
    bubblewrap_off = switches.why_off("bubblewrap")
    bubblewrap = not bubblewrap_off and bwrap_works(as_uid, switches)
    nested = "bubblewrap is not used"
    if bubblewrap:
        nested = (f"turned off by {NO_ZYGOTE_ENV}" if switches.no_template else nested_namespaces(as_uid))
    closed = uids.closed_folders(runtime_files()) if uid_problem and not switches.why_off("uid") \
        and os.geteuid() == 0 and probe_uid is not None else ()
    return HostLayers(bubblewrap=bubblewrap, uid=uid_problem, uid_fix=f"chmod o+x {' '.join(closed)}" if closed else "",
                      landlock_abi=0 if switches.why_off("landlock") else landlock.abi_version(),
                      seccomp=switches.why_off("seccomp") or seccomp_filter.available(),
                      bubblewrap_missing=bubblewrap_off, landlock_missing=switches.why_off("landlock"),
                      nested=nested)


def _bwrap_base(runtime: str, use_gpu: bool, tmp_size: int) -> list[str]:
    """bubblewrap's namespaces with read-only system and Python folders and the runtime copy; a /tmp of
    `tmp_size` bytes."""
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--proc", "/proc", "--size", str(tmp_size), "--tmpfs", "/tmp", "--tmpfs", "/run"]
    cmd += ["--dev", "/dev"]  # bubblewrap's own minimal /dev; a GPU worker adds its GPU's files alone
    if use_gpu:
        for path in worker_gpu_devices():
            cmd += ["--dev-bind", path, path]
    for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/alternatives",
                   "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                   "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
                   "/sys/devices/system/cpu"):
        if os.path.lexists(system):
            if os.path.islink(system):
                cmd += ["--symlink", os.readlink(system), system]
            else:
                cmd += ["--ro-bind", system, system]
    for root in python_roots() + library_paths(use_gpu):
        cmd += ["--ro-bind", root, root]
    if use_gpu and os.path.isdir("/sys"):
        cmd += ["--ro-bind", "/sys", "/sys"]
    cmd += ["--ro-bind", runtime, RUNTIME_MOUNT]
    return cmd


def bwrap_command(workdir: str, runtime: str, use_gpu: bool, size: int) -> tuple[list[str], list[int]]:
    """One worker in bubblewrap: a tmpfs of `size` bytes (the write budget) at WORKDIR_MOUNT holding a
    copy of `workdir`'s folders and regular files, which bubblewrap writes from descriptors opened here.
    The command, and those descriptors (for `pass_fds`; the caller closes them once bubblewrap runs)."""
    cmd = _bwrap_base(runtime, use_gpu, size) + ["--size", str(size), "--tmpfs", WORKDIR_MOUNT]
    fds: list[int] = []
    try:
        for folder, dirs, names in os.walk(workdir):
            relative = os.path.relpath(folder, workdir)
            inside = WORKDIR_MOUNT if relative == "." else os.path.join(WORKDIR_MOUNT, relative)
            for name in dirs:
                cmd += ["--perms", "0755", "--dir", os.path.join(inside, name)]
            for name in names:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                fds.append(fd)
                cmd += ["--perms", "0644", "--file", str(fd), os.path.join(inside, name)]
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return cmd + ["--chdir", WORKDIR_MOUNT], fds


def template_bwrap_command(slot_root: str, runtime: str, use_gpu: bool, tmp_size: int) -> list[str]:
    """A template worker in bubblewrap for one executor slot: the slot's folder of workdirs at
    SLOT_MOUNT, and an empty WORKDIR_MOUNT for each worker to mount its own tmpfs on
    (grader.sandbox.namespaces)."""
    return _bwrap_base(runtime, use_gpu, tmp_size) + ["--bind", slot_root, namespaces.SLOT_MOUNT,
                                                      "--dir", WORKDIR_MOUNT, "--chdir", "/"]


_NESTED: dict[bool, str] = {}


def nested_namespaces(as_uid: int | None) -> str:
    """'' when a process inside bubblewrap may make a worker's own namespaces (a user namespace
    nested in bubblewrap's, with mount, PID, network and IPC ones), else why not. Asked once per
    process, by running grader.sandbox.namespaces.probe inside bubblewrap."""
    key = as_uid is not None
    if key not in _NESTED:
        _NESTED[key] = _run_nested_probe(as_uid)
    return _NESTED[key]


def _run_nested_probe(as_uid: int | None) -> str:
    folder = scratch.make("probe")
    try:
        folder.chmod(0o755)
        runtime = build_runtime(folder / "runtime")
        user = {} if as_uid is None else {"user": as_uid, "group": as_uid, "extra_groups": []}
        probe = (f"import sys; sys.path.insert(0, {RUNTIME_MOUNT!r}); "
                 "from grader.sandbox.namespaces import probe; probe()")
        command = _bwrap_base(str(runtime), False, 1 << 20) + ["--chdir", "/", sys.executable, "-I", "-S", "-c", probe]
        done = subprocess.run(command, capture_output=True, timeout=30, env=scrubbed_env(False, "/tmp", "/tmp"),
                              **user)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the nested namespaces probe did not run ({type(exc).__name__}: {exc})"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode == 0:
        return ""
    why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
    return f"a worker inside bubblewrap cannot make namespaces of its own ({why[0][-200:]})"


def scrubbed_env(use_gpu: bool, home: str, tmp: str) -> dict[str, str]:
    """Only what the worker needs; no tokens, proxies or course paths."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        # One thread: tests use small tensors, and a batch runs one worker per core.
        "OMP_NUM_THREADS": str(WORKER_TORCH_THREADS),
        "MKL_NUM_THREADS": str(WORKER_TORCH_THREADS),
        "OPENBLAS_NUM_THREADS": str(WORKER_TORCH_THREADS),  # numpy's BLAS would start a thread per core
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


def observed(pid: int) -> dict[str, str]:
    """What /proc says about a worker from outside: its real uid, no_new_privs, seccomp mode."""
    seen: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("Uid", "NoNewPrivs", "Seccomp"):
                    seen[key] = value.split()[0]
    except OSError:
        pass
    return seen
