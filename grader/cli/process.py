"""The `grade` command as a process: the console script and `python -m grader.cli` start here.

A command's work is done when Click returns; what is left is Python tearing down every module
it imported, which with torch loaded takes about half a second of a student's `grade check`.
So the process ends with `os._exit` once the exit handlers (`atexit`: the template workers, a
pool's forkserver, logging) have run and stdout and stderr are flushed. Every file the grader
writes is closed by then (each is written whole by grader.core.files.write_atomic or inside a
`with`), so nothing is lost. Tests call the Click group (grader.cli.main) in-process, which
never comes through here.
"""

from __future__ import annotations

import atexit
import os
import sys

from grader.cli import main


def run() -> None:
    """Run the `grade` command line and end the process with its exit code. Never returns."""
    code: int = 0
    try:
        main(prog_name="grade")
    except SystemExit as exc:
        if isinstance(exc.code, int):
            code = exc.code
        elif exc.code is not None:  # a message: as sys.exit would print it
            print(exc.code, file=sys.stderr)
            code = 1
    atexit._run_exitfuncs()  # what the interpreter would run at exit, in the same order
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
