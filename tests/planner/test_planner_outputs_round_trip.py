"""What the planner writes reads back as what it means: a plan file as its problem, and
``planner strategies`` as exactly the names ``--strategy`` takes."""

import json

import pytest

from planner import strategies as library
from planner.cli import main
from planner.tvm import strategies as compile_strategies
from tests.planner.conftest import run_cli as run


def height_of(*args) -> int:
    result = run("solve", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["height"]


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_written_plan_solves_again_as_its_problem(data_dir, tmp_path, suffix):
    # Given a plan that wastes memory, written with its offsets
    plan = tmp_path / f"plan{suffix}"
    assert height_of(data_dir / "input.12.csv", "-s", "none", "-o", plan) == 20

    # When it is solved again, each strategy plans afresh
    again = run("solve", plan, "-s", "none")
    assert json.loads(again.stdout)["height"] == 20
    assert height_of(plan, "-s", "best-fit") == 12
    assert "its offsets are taken as a plan's and ignored" in again.stderr


def test_offsets_are_kept_as_fixed_only_when_asked(data_dir, tmp_path):
    plan = tmp_path / "plan.csv"
    height_of(data_dir / "input.12.csv", "-s", "none", "-o", plan)

    result = run("solve", plan, "-s", "best-fit", "--fixed-offsets")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["height"] == 20
    assert result.stderr == ""


def listed(capsys, *args) -> list[list[str]]:
    assert main(["strategies", *args]) == 0
    return [line.split("\t") for line in capsys.readouterr().out.splitlines()]


def test_strategies_lists_every_name_some_strategy_option_takes(capsys):
    names = [row[0] for row in listed(capsys)]

    assert set(names) == set(library.strategy_names()) | set(compile_strategies.strategy_names())
    assert {"tvm-stock", "best-fit+rewrites", "best-fit+reorder"} <= set(names)


def test_every_listed_name_is_taken_by_the_subcommands_it_names(capsys, data_dir):
    rows = listed(capsys, "--verbose")

    for name, summary, commands in rows:
        assert summary, name
        solves = main(["solve", str(data_dir / "input.12.csv"), "-s", name])
        assert (solves == 0) == ("solve" in commands.split(",")), name
        # One unknown name beside it: the compile stops at the names, before TVM, and
        # names only the unknown one.
        compiles = main(["compile", "zoo:small_cnn", "--strategy", name, "--strategy", "nope"])
        error = capsys.readouterr().err
        assert compiles == 2
        assert "unknown strategy nope;" in error, name
        assert "compile" in commands.split(","), name


def test_strategies_for_one_subcommand_lists_only_what_it_takes(capsys):
    assert [row[0] for row in listed(capsys, "--for", "solve")] == library.strategy_names()
    assert "tvm-stock" in [row[0] for row in listed(capsys, "--for", "compile")]
