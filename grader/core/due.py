"""When one student's work is due: one typed value, built where the dates are known.

A `DueDate` holds the deadline a student is held to (the manifest's, a hosted
grader's, or a date of the student's own), the extra time on top of it, the
time after which nothing is earned, and where each of them came from. The late
policy (grader.core.scoring), the gradebook's extensions, a batch's jobs, the
Gradescope metadata and the staff commands all speak it; nothing passes dates
around as loose keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from grader.core.compat import parse_iso

MANIFEST, OWN_DATE, HOSTED = "manifest", "the student's own deadline", "the hosted grader"


@dataclass(frozen=True)
class DueDate:
    """The dates one submission is held to.

    `deadline`: when it is due before any extension (None: undated, never late);
    `extension`: extra time past the deadline; `closes_at`: after this (moved by the
    extension too) a submission earns nothing. `deadline_from` and `extension_from`
    say where each came from (for the report and the staff commands)."""

    deadline: datetime | None = None
    extension: timedelta | None = None
    closes_at: datetime | None = None
    deadline_from: str = MANIFEST
    extension_from: str = ""

    @property
    def due(self) -> datetime | None:
        """The deadline the student is held to: the deadline plus the extension."""
        if self.deadline is None:
            return None
        return self.deadline + self.extension if self.extension else self.deadline

    @property
    def closes(self) -> datetime | None:
        """When the late window closes for this student (moved by the extension)."""
        if self.closes_at is None:
            return None
        return self.closes_at + self.extension if self.extension else self.closes_at

    def with_extension(self, *, extra: timedelta | None = None, until: datetime | None = None,
                       source: str = "gradebook") -> DueDate:
        """This due date with a student's extension: `extra` time, or a deadline of their own (`until`)."""
        if until is not None:
            return replace(self, deadline=until, extension=None, deadline_from=OWN_DATE, extension_from=source)
        return replace(self, extension=extra if extra else None, extension_from=source if extra else "")

    def to_dict(self) -> dict:
        """Plain data (ISO 8601 and seconds), for a job sent to another process or machine."""
        return {"deadline": self.deadline.isoformat() if self.deadline else None,
                "extension_s": self.extension.total_seconds() if self.extension else None,
                "closes_at": self.closes_at.isoformat() if self.closes_at else None,
                "deadline_from": self.deadline_from, "extension_from": self.extension_from}

    @classmethod
    def from_dict(cls, data: dict) -> DueDate:
        return cls(deadline=parse_iso(data["deadline"]) if data.get("deadline") else None,
                   extension=timedelta(seconds=data["extension_s"]) if data.get("extension_s") else None,
                   closes_at=parse_iso(data["closes_at"]) if data.get("closes_at") else None,
                   deadline_from=data.get("deadline_from", MANIFEST), extension_from=data.get("extension_from", ""))
