"""Fixtures of the planner tests: small problems and a brute-force optimum."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from planner.problem import Buffer, Problem
from planner.strategies._placement import Instance, place_in_order, plan_height

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args) -> subprocess.CompletedProcess:
    """``python -m planner ARGS`` in a subprocess, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "planner", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def brute_force_height(problem: Problem) -> int:
    """The optimal height, by first fit over every order (exact: first fit in the offset
    order of an optimal plan puts no buffer higher than that plan does)."""
    instance = Instance.of(problem)
    return min(
        (
            plan_height(instance, place_in_order(instance, order))
            for order in itertools.permutations(range(len(problem)))
        ),
        default=0,
    )


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def example_problem() -> Problem:
    """MiniMalloc's examples/input.12.csv as a Problem (its optimum is 12)."""
    from planner.problem import read_csv

    return read_csv(DATA / "input.12.csv")


@pytest.fixture(scope="session")
def brute_force():
    return brute_force_height


def problem_of(*rows: tuple) -> Problem:
    """A problem from ``(id, lower, upper, size[, alignment[, offset]])`` rows."""
    return Problem(tuple(Buffer(*row) for row in rows))


@pytest.fixture(scope="session")
def make_problem():
    return problem_of
