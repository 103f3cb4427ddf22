"""The `grade` command: thin Click commands (main.py) and the console output (console.py)."""

from grader.cli.main import main

__all__ = ["main"]
