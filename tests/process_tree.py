"""A command run under a child subreaper, so that its whole process tree can be seen and checked.

`TreeRun(command)` starts a small keeper process that makes itself a child subreaper
(PR_SET_CHILD_SUBREAPER) and runs `command` in a process group of its own, as a shell runs a
foreground job. Every process the command starts stays a descendant of the keeper, whatever
dies in between (an orphan is re-parented to the keeper, not to init), so "no process of its
tree remains" is a question /proc answers: `tree.processes()`. Signals go to the command
(`signal`) or to its whole process group, as a terminal's Ctrl-C does (`signal(..., group=True)`).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KEEPER = r'''
import ctypes, os, select, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = subprocess.Popen(sys.argv[1:], start_new_session=True,
                         stdout=open(os.environ["TREE_STDOUT"], "wb"), stderr=open(os.environ["TREE_STDERR"], "wb"))
print(child.pid, flush=True)
done = False
while True:  # reap the command and every orphan of its tree until told to stop (stdin closed)
    try:
        pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pid = 0
    if pid == child.pid:
        print(os.waitstatus_to_exitcode(status), flush=True)
    if pid == 0:
        ready, _, _ = select.select([sys.stdin], [], [], 0.05)
        if ready and not os.read(sys.stdin.fileno(), 1):
            break
'''


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    state: str
    command: str


def all_processes() -> dict[int, Process]:
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        found[int(entry.name)] = Process(int(entry.name), int(fields[1]), fields[0].decode(), command)
    return found


class TreeRun:
    """`command` under a keeper (see the module docstring); its stdout and stderr go to files."""

    def __init__(self, command: list[str], *, env: dict | None = None, cwd: str | None = None, folder=None):
        folder = folder or os.environ.get("TMPDIR", "/tmp")
        self.stdout_path = os.path.join(folder, f"tree-{os.getpid()}-{time.monotonic_ns()}.out")
        self.stderr_path = self.stdout_path[:-4] + ".err"
        env = {**(env or os.environ), "TREE_STDOUT": self.stdout_path, "TREE_STDERR": self.stderr_path}
        self.keeper = subprocess.Popen([sys.executable, "-c", KEEPER, *command], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, env=env, cwd=cwd)
        self.pid = int(self._line(120))
        self.code: int | None = None
        self.temp = (env or {}).get("TMPDIR")  # the command's temporary folder, when the test chose one

    def _line(self, timeout: float) -> str:
        ready, _, _ = select.select([self.keeper.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError("the keeper said nothing")
        return self.keeper.stdout.readline().decode().strip()

    def processes(self) -> list[Process]:
        """Every live process of the command's tree (zombies, already dead, are not counted)."""
        table = all_processes()
        children: dict[int, list[int]] = {}
        for process in table.values():
            children.setdefault(process.ppid, []).append(process.pid)
        found, frontier = [], [self.keeper.pid]
        while frontier:
            for pid in children.get(frontier.pop(), ()):
                frontier.append(pid)
                if table[pid].state != "Z":
                    found.append(table[pid])
        return found

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:g} s for {what}; the tree: "
                                     f"{[(p.pid, p.command[:80]) for p in self.processes()]}; "
                                     f"stderr: {self.stderr()[-2000:]}")
            time.sleep(0.2)

    def signal(self, signum: int, *, group: bool = False) -> None:
        if group:
            os.killpg(self.pid, signum)
        else:
            os.kill(self.pid, signum)

    def wait(self, timeout: float) -> int | None:
        """The command's exit code, or None when it has not ended within `timeout`."""
        if self.code is None:
            try:
                self.code = int(self._line(timeout))
            except TimeoutError:
                return None
        return self.code

    def stdout(self) -> str:
        with open(self.stdout_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def stderr(self) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def close(self) -> None:
        """Kill whatever is left of the tree, then the keeper."""
        for process in self.processes():
            try:
                os.kill(process.pid, signal.SIGKILL)
            except OSError:
                pass
        if self.keeper.stdin:
            self.keeper.stdin.close()
        try:
            self.keeper.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.keeper.kill()
        for path in (self.stdout_path, self.stderr_path):
            try:
                os.unlink(path)
            except OSError:
                pass


# ------------------------------------------------------------------ the grade command under a keeper
EXIT_BOUND_S = 120  # the command must have exited by then (it takes seconds)
GONE_BOUND_S = 120  # and every process of its tree must be gone by then
START_BOUND_S = 600  # how long the command may take to start grading on a busy machine


def grading_in_a_sandbox(tree: TreeRun) -> bool:
    """Whether a sandbox worker of the command is up (bubblewrap, or a sandbox process: python -I)."""
    return any(p.command.startswith("bwrap ") or " -I -c " in f" {p.command} " for p in tree.processes())


def sandbox_folders(temp: str | Path) -> list[str]:
    """The sandbox folders (a template's runtime and slot, a worker's, a probe's) left in the temporary
    folder `temp`."""
    from grader.sandbox import scratch

    prefixes = tuple(f"grade-{kind}-" for kind in scratch.KINDS)
    return sorted(p.name for p in Path(temp).iterdir() if p.name.startswith(prefixes))


def stop_and_check(tree: TreeRun, signum: int, *, group: bool) -> str:
    """Signal the command once it grades in a sandbox; check its exit code, that no process of its tree
    remains and, when its environment names a TMPDIR, that no sandbox folder remains there."""
    tree.wait_for(lambda: grading_in_a_sandbox(tree), START_BOUND_S, "the command to grade in a sandbox")
    tree.signal(signum, group=group)
    code = tree.wait(EXIT_BOUND_S)
    assert code is not None, f"still running {EXIT_BOUND_S} s after the signal: {tree.processes()}"
    expected = {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
    assert code == expected, (code, tree.stderr()[-3000:])
    tree.wait_for(lambda: not tree.processes(), GONE_BOUND_S, "every process of the command's tree to end")
    if tree.temp is not None:
        left = sandbox_folders(tree.temp)
        assert left == [], f"sandbox folders left in {tree.temp}: {left}"
    return tree.stderr()


def grade_command(course: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "grader.cli", "--course", str(course), *args]


def environment(temp: Path | None = None) -> dict:
    """The grader of this checkout, whatever folder the command runs in; `temp`: its TMPDIR (a folder the
    sandbox's uids can pass through, made here), so that what it leaves there can be checked."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if temp is not None:
        temp.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(temp)
    return env


def open_temp() -> Path:
    """A fresh temporary folder under the system's, open for traversal to the sandbox's uids (unlike
    pytest's tmp_path, under a folder of mode 700); the caller removes it."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="grade-test-tmp-", dir="/tmp"))
    folder.chmod(0o755)
    return folder
