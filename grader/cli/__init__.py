"""The `grade` command: thin Click commands (main.py, and the staff's in class_commands.py) and the
console output (console.py)."""

from grader.cli import (
    class_commands,  # noqa: F401  (registers the staff's commands on main)
    lms_commands,  # noqa: F401  (registers the LMS commands on main)
)
from grader.cli.main import main

__all__ = ["main"]
