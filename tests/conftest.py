"""Fixtures shared by every test: a real tracked git repository and recorded history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.demo import create_demo_repository, git
from planner.report import StrategyReport
from tests.helpers import Repo

#: Files whose tests share a costly session fixture, run by one test process together.
_SHARED_SESSIONS = {"toolchains": "tests/toolchains/"}


# tryfirst: xdist's worker reads the group markers in its own hook of the same name, which
# ran first and found none (every file's tests were spread over both processes, and each
# built its module-scoped fixtures, CI of 035a898).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``--dist loadgroup``, .ci/run), each file's tests run in one
    process, so that a module-scoped fixture (a compiled model) is built once; files that
    share a costly session fixture (a toolchain made from PyPI) run in one process too."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        group = next(
            (name for name, prefix in _SHARED_SESSIONS.items() if path.startswith(prefix)),
            path,
        )
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _artifacts_in_tmp(settings, tmp_path):
    # Artifacts and mirrors of one test never leak into another, or into var/.
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.PEAKWATCH = {**settings.PEAKWATCH, "WORK_DIR": tmp_path / "work"}


@pytest.fixture
def demo_repository_path(tmp_path):
    """A real git repository with the demo's manifests, one commit each."""
    path = tmp_path / "tracked"
    create_demo_repository(path)
    return path


def fake_report(planned: int, latency: float, **extra) -> StrategyReport:
    """A :class:`planner.report.StrategyReport` with plausible figures.

    For page and API tests that need many results quickly; the pipeline itself is
    exercised for real in tests/workers and tests/tvm.
    """
    return StrategyReport.from_json({
        "model": "model",
        "strategy": "strategy",
        "planned_bytes": planned,
        "intermediate_bytes": planned - 1024,
        "output_bytes": 1024,
        "lower_bound_bytes": int(planned * 0.8),
        "latency_ms": {"median": latency, "p90": latency * 1.1, "samples": [latency]},
        "outputs_match": True,
        "max_abs_diff": 0.0,
        "compile_seconds": 0.5,
        "tvm_version": "0.27.0.post1",
        "target": "llvm",
        "environment": {"machine": "x86_64"},
        **extra,
    })


def report_of(**fields) -> StrategyReport:
    """A report with only ``fields`` set (a failed one: ``report_of(error="...")``)."""
    return StrategyReport(model="model", strategy="strategy", **fields)


@pytest.fixture
def recorded_history(db):
    """Two models x three strategies over four commits on main, recorded through actions."""
    from dashboard import actions
    from dashboard.models import Run

    repository = actions.track_repository("demo", "/nonexistent/demo.git")
    start = datetime(2026, 11, 1, tzinfo=UTC)
    parent = ""
    runs = []
    for i in range(4):
        commit = actions.record_commit(
            repository,
            sha=f"{i:02d}" + "a" * 38,
            parent_sha=parent,
            branch="main",
            author="Ada Planner",
            message=f"Commit number {i}\n\nBody text.",
            committed_at=start + timedelta(hours=i),
        )
        parent = commit.sha
        run = Run.objects.create(repository=repository, commit=commit, trigger="test")
        actions.begin_run(
            run,
            models=[("small-cnn", "zoo:small_cnn"), ("residual-cnn", "zoo:residual_cnn")],
            strategies=["tvm-stock", "none", "greedy-by-size"],
            boards=["cpu"],
            total=6,
        )
        for model, base in (("small-cnn", 50_000), ("residual-cnn", 200_000)):
            for strategy, factor in (("tvm-stock", 1.0), ("none", 1.6), ("greedy-by-size", 0.9)):
                actions.record_result(
                    run, model=model, strategy=strategy, board="cpu",
                    report=fake_report(int(base * factor) + 4096 * i, 1.0 + 0.1 * i),
                )
        actions.finish_run(run)
        runs.append(run)
    return runs


@pytest.fixture
def maintainer(db):
    """A user with the maintainer permission (approve runs, triage alerts)."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("maintainer", password="maintainer-password")
    user.user_permissions.add(Permission.objects.get(codename="maintain"))
    return user


@pytest.fixture
def maintainer_client(client, maintainer):
    client.force_login(maintainer)
    return client


@pytest.fixture
def empty_repo(tmp_path) -> Repo:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return Repo(path)
