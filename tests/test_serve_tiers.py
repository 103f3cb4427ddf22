"""The two tiers' decisions and the leaderboard (pure), and the GPU queue in the gradebook: the latest
submission wins, a quota per student. Fast lane."""

from __future__ import annotations

from pathlib import Path

from grader.core.manifest import load_manifest
from grader.core.records import GradeResult, TestOutcome
from grader.core.scoring import score
from grader.serve.tiers import alias, kernel_tasks, leaderboard, timing_tasks, wants_timing
from grader.storage.gradebook import Gradebook
from tests.conftest import ROOT

A3 = load_manifest(ROOT / "assignments" / "assignment3" / "assignment.toml")
A1 = load_manifest(ROOT / "assignments" / "assignment1" / "assignment.toml")


def a3_result(student: str, *, kernel_passes: bool, timed: float | None = None) -> GradeResult:
    outcomes = [TestOutcome(name="test_flash_forward", task="flash_forward",
                            status="passed" if kernel_passes else "failed", fraction=float(kernel_passes))]
    if timed is None:
        outcomes.append(TestOutcome(name="test_flash_speed", task="flash_speed", status="pending"))
    else:
        outcomes.append(TestOutcome(name="test_flash_speed", task="flash_speed", status="passed", fraction=1.0,
                                    detail={"timing": {"ratio": timed}}))
    return GradeResult(assignment_id="assignment3", assignment_title=A3.title, student=student, mode="submit",
                       score=score(A3, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256=(student * 64)[:64], submission_form="folder", submitted_at=None,
                       graded_at="2026-12-01T10:00:00+00:00", seed=1, isolation="process", isolation_level="process",
                       duration_s=1.0)


def test_only_a_passing_kernel_with_pending_speed_goes_to_the_gpu():
    assert timing_tasks(A3) == ("flash_speed",) and kernel_tasks(A3) == ("flash_forward",)
    assert timing_tasks(A1) == () and kernel_tasks(A1) == ()
    assert wants_timing(A3, a3_result("a", kernel_passes=True))
    assert not wants_timing(A3, a3_result("b", kernel_passes=False))  # a failing kernel is not timed
    assert not wants_timing(A3, a3_result("c", kernel_passes=True, timed=0.5))  # already timed


def test_the_leaderboard_shows_aliases_and_ties_as_ties():
    key = b"k" * 32
    results = {"ann": a3_result("ann", kernel_passes=True, timed=0.5),
               "ben": a3_result("ben", kernel_passes=True, timed=0.5),
               "cat": a3_result("cat", kernel_passes=True, timed=1.25),
               "dan": a3_result("dan", kernel_passes=True)}  # not timed: not on the board
    rows = leaderboard(results, key, reader="cat")
    assert [(r.rank, r.speedup) for r in rows] == [(1, 2.0), (1, 2.0), (3, 0.8)]
    assert [r.own for r in rows] == [False, False, True]
    shown = {r.alias for r in rows}
    assert shown == {alias(key, s) for s in ("ann", "ben", "cat")} and not shown & set(results)
    assert alias(key, "ann") == alias(key, "ann") != alias(b"j" * 32, "ann")


def test_the_latest_submission_wins_the_gpu_queue_within_a_quota(tmp_path: Path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        cpu = [book.enqueue_job("ann", "assignment3", sha * 64, "upload.zip", b"PK", f"2026-12-01T10:0{i}:00+00:00")[0]
               for i, sha in enumerate("abcd")]
        since = "2026-12-01T00:00:00+00:00"
        first, _ = book.enqueue_timing(cpu[0].id, "2026-12-01T10:00:30+00:00", quota=2, since=since)
        second, _ = book.enqueue_timing(cpu[1].id, "2026-12-01T10:01:30+00:00", quota=2, since=since)
        assert book.job(first.id).state == "superseded" and second.state == "queued" and second.tier == "gpu"
        again, _ = book.enqueue_timing(cpu[1].id, "2026-12-01T10:01:40+00:00", quota=2, since=since)
        assert again.id == second.id  # the same files: the same timing
        granted, upload = book.grant_job("gpu", 1.0, 60)
        assert granted.id == second.id and upload == b"PK"
        third, _ = book.enqueue_timing(cpu[2].id, "2026-12-01T10:02:30+00:00", quota=2, since=since)
        assert third is not None  # one timing granted so far: within the quota of two
        book.grant_job("gpu", 2.0, 60)
        refused, why = book.enqueue_timing(cpu[3].id, "2026-12-01T10:03:30+00:00", quota=2, since=since)
        assert refused is None and "quota" in why
        assert book.enqueue_timing(cpu[3].id, "2026-12-02T10:03:30+00:00", quota=2,
                                   since="2026-12-02T00:00:00+00:00")[0] is not None  # a day later


def test_a_passing_kernel_is_queued_for_timing_and_the_page_says_where_it_stands(tmp_path: Path):
    from grader.core.assignment import Assignment
    from grader.core.course import Course
    from grader.core.settings import ServeSettings
    from grader.pipeline.local_pool import LocalProcessExecutor
    from grader.serve.app import ServerState, timing_text
    from grader.serve.auth import Signer
    from grader.serve.queue import ServerBook
    from grader.serve.runner import Runner
    from grader.serve.server import queue_timing

    assignment = Assignment.load(Course(ROOT), "assignment3")
    store = ServerBook(tmp_path / "g.sqlite")
    runners = {tier: Runner(store, LocalProcessExecutor(1), {"assignment3": assignment}, tmp_path, tier=tier)
               for tier in ("cpu", "gpu")}  # no job is handed over: no worker starts
    state = ServerState(Course(ROOT), {"assignment3": assignment}, store, Signer(b"k" * 32, 1, 1),
                        ServeSettings(gpu_timings_per_day=3), runners=runners, spool=tmp_path)
    with store.book() as book:
        passing, _ = book.enqueue_job("ann", "assignment3", "a" * 64, "upload.zip", b"PK", "2026-12-01T10:00:00+00:00")
        failing, _ = book.enqueue_job("ben", "assignment3", "b" * 64, "upload.zip", b"PK", "2026-12-01T10:00:00+00:00")
    assert "your latest submission whose kernel tasks all pass is timed" in timing_text(state, assignment, "ann")
    queue_timing(state, passing, assignment, a3_result("ann", kernel_passes=True))
    queue_timing(state, failing, assignment, a3_result("ben", kernel_passes=False))
    timings = store.call(lambda book: book.jobs(tier="gpu"))
    assert [(j.student_id, j.state, j.reason) for j in timings] == [("ann", "queued", "timing on a GPU")]
    assert timing_text(state, assignment, "ann").startswith(f"GPU timing of your submission {timings[0].id}: queued")
    assert "at most 3 timings a day" in timing_text(state, assignment, "ann")
    del runners["gpu"]  # a server without a GPU worker
    assert "Speed points stay pending: this server has no GPU worker" in timing_text(state, assignment, "ben")
    store.close()
