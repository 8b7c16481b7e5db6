"""A small tracked repository whose commits move model memory up and down.

The main command records its history, and tests reuse it: it is a real git repository
with a real ``peakwatch.toml`` at every commit.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEMO_AUTHOR = ("Ada Planner", "ada@example.com")

#: (commit message, manifest) pairs; each manifest is the whole file at that commit.
DEMO_COMMITS: list[tuple[str, dict]] = [
    (
        "Track a small CNN, a residual CNN and a DenseNet",
        {"small-cnn": {"channels": 8, "resolution": 32},
         "residual-cnn": {"channels": 8, "resolution": 32, "blocks": 2},
         "densenet": {"resolution": 32, "classes": 10}},
    ),
    (
        "Widen the residual CNN to 16 channels",
        {"small-cnn": {"channels": 8, "resolution": 32},
         "residual-cnn": {"channels": 16, "resolution": 32, "blocks": 2},
         "densenet": {"resolution": 32, "classes": 10}},
    ),
    (
        "Feed the small CNN 48x48 inputs",
        {"small-cnn": {"channels": 8, "resolution": 48},
         "residual-cnn": {"channels": 16, "resolution": 32, "blocks": 2},
         "densenet": {"resolution": 32, "classes": 10}},
    ),
    (
        "Grow the DenseNet by 16 channels a layer",
        {"small-cnn": {"channels": 8, "resolution": 48},
         "residual-cnn": {"channels": 16, "resolution": 32, "blocks": 2},
         "densenet": {"resolution": 32, "classes": 10, "growth": 16}},
    ),
    (
        "Drop one residual block",
        {"small-cnn": {"channels": 8, "resolution": 48},
         "residual-cnn": {"channels": 16, "resolution": 32, "blocks": 1},
         "densenet": {"resolution": 32, "classes": 10, "growth": 16}},
    ),
    (
        "Go back to 32x32 inputs for the small CNN",
        {"small-cnn": {"channels": 8, "resolution": 32},
         "residual-cnn": {"channels": 16, "resolution": 32, "blocks": 1},
         "densenet": {"resolution": 32, "classes": 10, "growth": 16}},
    ),
]

#: What the demo compares; tests that build their own repositories default to the first three.
DEMO_STRATEGIES = ("tvm-stock", "none", "greedy-by-size", "best-fit+rewrites")
BASIC_STRATEGIES = DEMO_STRATEGIES[:3]

_SOURCES = {
    "small-cnn": "zoo:small_cnn",
    "residual-cnn": "zoo:residual_cnn",
    "densenet": "zoo:densenet",
}


def render_manifest(models: dict, strategies=BASIC_STRATEGIES) -> str:
    lines = [
        "# Peakwatch suite: which models this repository tracks, and how.",
        "[suite]",
        "strategies = [" + ", ".join(f'"{s}"' for s in strategies) + "]",
        'boards = ["cpu"]',
        "",
    ]
    for name, entry in models.items():
        params = {k: v for k, v in entry.items() if k != "source"}
        source = entry.get("source") or _SOURCES[name]
        inline = ", ".join(f"{k} = {v}" for k, v in params.items())
        lines += ["[[models]]", f'name = "{name}"', f'source = "{source}"',
                  f"params = {{ {inline} }}", ""]
    return "\n".join(lines)


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True,
        env={**os.environ, **(env or {})},
    ).stdout.strip()


def commit_file(repo: Path, path: str, text: str, message: str, when: datetime) -> str:
    (repo / path).write_text(text)
    git(repo, "add", path)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S+0000")
    git(repo, "commit", "-q", "-m", message, env={
        "GIT_AUTHOR_NAME": DEMO_AUTHOR[0], "GIT_AUTHOR_EMAIL": DEMO_AUTHOR[1],
        "GIT_COMMITTER_NAME": DEMO_AUTHOR[0], "GIT_COMMITTER_EMAIL": DEMO_AUTHOR[1],
        "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
    })
    return git(repo, "rev-parse", "HEAD")


def create_demo_repository(path: Path, commits=DEMO_COMMITS, *, now: datetime | None = None,
                           strategies=BASIC_STRATEGIES) -> list[str]:
    """Create a git repository at ``path`` with one commit per entry; returns the shas."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    start = (now or datetime.now(UTC)) - timedelta(hours=len(commits))
    return [
        commit_file(path, "peakwatch.toml", render_manifest(models, strategies), message,
                    start + timedelta(hours=i))
        for i, (message, models) in enumerate(commits)
    ]
