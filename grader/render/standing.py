"""Each student's grade as it stands: the latest graded submission, with the late policy of the
student's current extension and the staff overrides applied (grader.core.scoring.final_score).

The class report, the exports and the staff commands all read grades through here, so an
extension granted or an override set after grading counts everywhere at once, and nothing
is computed twice. The recorded grading itself is never changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.core.compat import parse_iso
from grader.core.due import DueDate
from grader.core.manifest import Manifest
from grader.core.records import Score
from grader.core.scoring import final_score
from grader.storage.gradebook import ExtensionRecord, Gradebook, OverrideRecord, SubmissionRecord


@dataclass(frozen=True)
class Standing:
    """One student's latest record and the score that counts for it today."""

    record: SubmissionRecord
    score: Score  # the final score (late policy with the extension, then overrides)
    extension: ExtensionRecord | None
    overrides: tuple[OverrideRecord, ...]  # the active ones

    @property
    def student(self) -> str:
        return self.record.student_id

    @property
    def total(self) -> float:
        return self.score.total


def standing_of(manifest: Manifest, record: SubmissionRecord, extension: ExtensionRecord | None,
                overrides: list[OverrideRecord] | tuple[OverrideRecord, ...]) -> Standing:
    """`record`'s final score under `extension` and `overrides`."""
    submitted = parse_iso(record.submitted_at) if record.submitted_at else None
    due = DueDate(deadline=manifest.deadline)
    score = final_score(manifest, record.result.score, submitted, due=extension.applied_to(due) if extension else due,
                        overrides=[o.as_override() for o in overrides])
    return Standing(record, score, extension, tuple(overrides))


def standings(manifest: Manifest, book: Gradebook) -> dict[str, Standing]:
    """student → Standing, for every student with a graded submission of the assignment."""
    extensions = book.extensions(manifest.id)
    overrides: dict[str, list[OverrideRecord]] = {}
    for override in book.overrides(manifest.id):
        overrides.setdefault(override.student_id, []).append(override)
    return {student: standing_of(manifest, record, extensions.get(student), overrides.get(student, []))
            for student, record in book.latest(manifest.id).items()}


def standing_for(manifest: Manifest, book: Gradebook, student: str) -> Standing | None:
    """One student's Standing (None when they have no graded submission of the assignment)."""
    record = book.latest_for(manifest.id, student)
    if record is None:
        return None
    return standing_of(manifest, record, book.extension_for(student, manifest.id),
                       book.overrides(manifest.id, student))
