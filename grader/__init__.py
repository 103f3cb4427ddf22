"""The attention course grader.

Data flows one way: manifest → submission → sandboxed run → outcomes → score →
gradebook → report. Each stage lives in its own module (see docs/ARCHITECTURE.md).
"""

__version__ = "0.1.0"
