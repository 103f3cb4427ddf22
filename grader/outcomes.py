"""The records that flow from a run to scoring, storage and reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASSED, FAILED, PENDING = "passed", "failed", "pending"


@dataclass(frozen=True)
class TestOutcome:
    """One test's verdict. `fraction` is the share of the test's credit earned."""

    __test__ = False  # not a pytest test class

    name: str
    task: str | None
    status: str  # passed | failed | pending
    kind: str = ""  # why it failed: wrong | raised | not_implemented | timeout | crashed |
    #                 forbidden | missing | import_failed | unsupported | budget | test_error
    message: str = ""
    fraction: float = 0.0
    duration_s: float = 0.0
    visibility: str = "hidden"  # hidden | visible
    diagnosis: dict | None = None
    measured: str = ""
    heatmap: dict | None = None
    output: str = ""  # what the student's code printed during this test (escaped when shown)
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TestOutcome:
        return cls(**data)


@dataclass(frozen=True)
class StaticFinding:
    """A forbidden API found in the source (the whole task earns 0)."""

    task: str
    function: str
    group: str
    line: int
    code: str

    def to_dict(self) -> dict:
        return asdict(self)
