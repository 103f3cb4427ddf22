"""The `grade` command: thin Click commands (main.py, the staff's in class_commands.py, the
LMS link's in lms_commands.py, the course server's in serve_commands.py) and the
console output (console.py)."""

from grader.cli import (
    class_commands,  # noqa: F401  (registers the staff's commands on main)
    lms_commands,  # noqa: F401  (registers the LMS commands on main)
    serve_commands,  # noqa: F401  (registers grade serve and grade serve-link)
)
from grader.cli.main import main

__all__ = ["main"]
