"""`grade batch --executor ray` on a local Ray cluster (two CPU slots, started by these tests).

A mixed class of twelve entries of the tiny course is graded twice, for real: by
the local process pool and by Ray actors, at one fixed batch seed. Every record
must be the same (scores, per-test outcomes, diagnoses, findings, seeds, notes,
errors); only what measures time or names a uid may differ. The Ray run reads
the course from a copy (`--node-course`, as a node would) while its reports land
in the driver's course. Then: a rerun skips everything, a node whose course copy
differs stops the batch before anyone is graded, and an actor killed by one job
costs only that student, as a broken local pool does. Without Ray installed the
cluster tests skip and the command says how to install it.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

import class_builder
import pytest
from class_builder import ASSIGNMENT, BY_ID, build_class, grade_or_exit
from click.testing import CliRunner
from process_tree import open_temp, sandbox_folders

from grader.cli.main import main
from grader.pipeline.batch import GradingJob, run_batch, student_seed
from grader.storage.gradebook import Gradebook
from tests.conftest import assignment_of

HAS_RAY = find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason='Ray is not installed (pip install -e ".[ray]")')

CLASS = ["s01", "s08", "s10", "s11", "s13", "s14", "s15", "s16", "s18", "s24", "s28", "s29"]
GRADED = [s for s in CLASS if not BY_ID[s].error]
SEED = 7
VOLATILE = {"graded_at", "duration_s", "isolation"}  # clocks, and the uid each worker happened to get


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def actors_temp():
    """The temporary folder of the module's Ray actors, checked for sandbox folders they left."""
    folder = open_temp()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster(actors_temp: Path):
    """A Ray instance on this machine with two CPU slots, whose workers use `actors_temp` as their
    temporary folder; the executor joins it as it finds it."""
    if not HAS_RAY:
        pytest.skip('Ray is not installed (pip install -e ".[ray]")')
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             runtime_env={"env_vars": {"TMPDIR": str(actors_temp)}})
    yield ray
    ray.shutdown()


def comparable(result: dict) -> dict:
    """A stored GradeResult without what measures time or names a uid (the level itself stays)."""
    kept = {key: value for key, value in result.items() if key not in VOLATILE}
    kept["outcomes"] = [{k: v for k, v in outcome.items() if k != "duration_s"} for outcome in result["outcomes"]]
    return kept


def records(gradebook: Path) -> tuple[dict[str, dict], dict[str, str]]:
    with Gradebook(gradebook) as book:
        results = {s: comparable(r.result.to_dict()) for s, r in book.latest(ASSIGNMENT).items()}
        errors = {e["student"]: e["error"] for e in book.errors(ASSIGNMENT)}
    return results, errors


@pytest.fixture(scope="module")
def two_runs(ray_cluster, tmp_path_factory):
    """The class graded by the local pool (--jobs 2) and by Ray actors, both at --seed 7."""
    root = tmp_path_factory.mktemp("ray-class")
    course, submissions = build_class(root, [BY_ID[s] for s in CLASS])
    node_course = root / "node-copy"  # where "the nodes" hold the course
    shutil.copytree(course, node_course)
    common = ["--course", str(course), "batch", ASSIGNMENT, str(submissions), "--seed", str(SEED)]
    local = invoke(*common, "--jobs", "2", "--no-reports", "--gradebook", str(root / "local.sqlite"))
    assert local.exit_code == 0, local.output
    on_ray = invoke(*common, "--executor", "ray", "--node-course", str(node_course),
                    "--gradebook", str(root / "ray.sqlite"))
    assert on_ray.exit_code == 0, on_ray.output
    return root, course, submissions, node_course, local.output, on_ray.output


@needs_ray
@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.slow
def test_ray_gives_exactly_the_records_the_local_pool_gives(two_runs):
    root, course, _, node_course, local_output, ray_output = two_runs
    local, local_errors = records(root / "local.sqlite")
    on_ray, ray_errors = records(root / "ray.sqlite")
    assert sorted(local) == sorted(on_ray) == sorted(GRADED)
    for student in GRADED:
        assert on_ray[student] == local[student], student
        expected = BY_ID[student]
        assert on_ray[student]["seed"] == student_seed(SEED, student)  # fixed per student, not per run
        assert on_ray[student]["score"]["total"] == pytest.approx(expected.expected_total, abs=0.01), student
        diagnosed = {o["diagnosis"]["id"] for o in on_ray[student]["outcomes"] if o["diagnosis"]}
        assert diagnosed == set(expected.diagnoses), student
    assert ray_errors == local_errors and sorted(ray_errors) == ["s28", "s29"]
    for output in (local_output, ray_output):  # the same summary from either executor
        assert re.search(r"graded\s*│\s*10\b", output) and re.search(r"grader errors\s*│\s*0\b", output)
        assert re.search(r"hand-in problems \(not readable as a submission\)\s*│\s*2\b", output)
    # reports are written by the driver, into its own course; the nodes' copy is only read
    for student in GRADED:
        report = course / ".grade" / "reports" / student / f"{ASSIGNMENT}.html"
        assert report.is_file() and student in report.read_text(), student
    assert not list((course / ".grade" / "reports").rglob("*.part"))  # each written whole
    assert not (node_course / ".grade").exists()


@needs_ray
@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.slow
def test_the_actors_leave_no_sandbox_folder(ray_cluster, two_runs, actors_temp: Path):
    """ray.kill skips every exit hook: the executor has each actor close its templates before it ends it,
    and removes what an actor on this machine left once its process is gone."""
    assert ray_cluster.get(ray_cluster.remote(tempfile.gettempdir).remote()) == str(actors_temp)  # where they made them
    assert sandbox_folders(actors_temp) == []


@needs_ray
@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.slow
def test_a_second_ray_run_skips_everything(two_runs):
    root, course, submissions, node_course, _, _ = two_runs
    before = records(root / "ray.sqlite")
    result = invoke("--course", str(course), "batch", ASSIGNMENT, str(submissions), "--executor", "ray",
                    "--node-course", str(node_course), "--gradebook", str(root / "ray.sqlite"))
    assert result.exit_code == 0, result.output
    assert re.search(r"graded\s*│\s*0\b", result.output)
    assert re.search(r"skipped \(already graded\)\s*│\s*10\b", result.output)
    assert records(root / "ray.sqlite")[0] == before[0]


@needs_ray
@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.slow
def test_a_node_with_another_copy_of_the_hidden_tests_grades_nobody(two_runs, tmp_path: Path):
    _, course, submissions, node_course, _, _ = two_runs
    stale = tmp_path / "stale-course"
    shutil.copytree(node_course, stale)
    hidden = next((stale / "reference" / ASSIGNMENT / "tests").glob("test_*.py"))
    hidden.write_text(hidden.read_text() + "\n# an older copy of the hidden tests\n")
    gradebook = tmp_path / "stale.sqlite"
    result = CliRunner().invoke(main, ["--course", str(course), "batch", ASSIGNMENT, str(submissions),
                                       "--executor", "ray", "--node-course", str(stale),
                                       "--gradebook", str(gradebook)])
    assert result.exit_code == 2, result.output
    assert "holds a different copy of the course" in result.output
    with Gradebook(gradebook) as book:
        assert book.count("submissions") == 0


@needs_ray
@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.slow
def test_an_actor_killed_by_one_job_costs_only_that_student(ray_cluster, actors_temp: Path, tmp_path: Path):
    from ray import cloudpickle

    from grader.pipeline.ray_executor import GradingActor, RayExecutor

    course_dir, submissions = build_class(tmp_path, [BY_ID[s] for s in ("s01", "s03", "s05")])
    started = tmp_path / "started"
    started.mkdir()
    started_dir = str(started)

    class KillingActor(GradingActor):
        """The real grading actor, whose job for s03 ends its process once a neighbour's grading started."""

        def run(self, job, submission, render_report):
            return grade_or_exit(job, submission, killer="s03", started=started_dir, render_report=render_report)

    class KillingActors(RayExecutor):
        """The real Ray executor, whose actors are KillingActors."""

        actor = KillingActor

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.submitted: list[str] = []
            self.restarts = 0

        def submit(self, job: GradingJob):
            self.submitted.append(job.student)
            return super().submit(job)

        def restart(self) -> None:
            self.restarts += 1
            super().restart()

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the actors cannot import this file
    cloudpickle.register_pickle_by_value(class_builder)  # nor the job function's module
    assignment = assignment_of(course_dir, ASSIGNMENT)
    executor = KillingActors(2, assignment=assignment)
    try:
        with Gradebook(tmp_path / "gb.sqlite") as book:
            summary = run_batch(assignment, submissions, book, executor=executor)
            errors = {e["student"]: e["error"] for e in book.errors(ASSIGNMENT)}
            latest = book.latest(ASSIGNMENT)
    finally:
        executor.shutdown(cancel=True)
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert set(errors) == {"s03"} and "died 2 times" in errors["s03"]
    assert sorted(summary.graded) == sorted(latest) == ["s01", "s05"]
    for student in ("s01", "s05"):
        assert latest[student].total == pytest.approx(BY_ID[student].expected_total, abs=0.01)
        assert (course_dir / ".grade" / "reports" / student / f"{ASSIGNMENT}.html").is_file()
    # as with a local pool: all three in flight at the first death, then each alone, and only
    # s03's own deaths charged (twice, then recorded); the actors replaced after every death
    assert sorted(executor.submitted[:3]) == ["s01", "s03", "s05"]
    assert executor.submitted[3:] == ["s01", "s03", "s03", "s05"]
    assert executor.restarts == 3
    assert sandbox_folders(actors_temp) == []  # the killed actors' folders too


@pytest.mark.slow
def test_without_ray_the_command_says_how_to_install_it(tmp_path: Path):
    course, submissions = build_class(tmp_path, [BY_ID["s01"]])
    hide_ray = ("import sys; sys.modules['ray'] = None; from grader.cli.main import main; "
                "main(sys.argv[1:], prog_name='grade')")
    command = [sys.executable, "-c", hide_ray, "--course", str(course), "batch", ASSIGNMENT, str(submissions),
               "--executor", "ray", "--gradebook", str(tmp_path / "gb.sqlite")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert 'pip install -e ".[ray]"' in done.stderr
    # Ray's own flags with the local pool are refused before anything is graded
    result = invoke("--course", str(course), "batch", ASSIGNMENT, str(submissions), "--address", "auto",
                    "--gradebook", str(tmp_path / "gb.sqlite"))
    assert result.exit_code == 2 and "for --executor ray" in result.output
