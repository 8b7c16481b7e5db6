"""The command line, run as ``python -m planner`` in a subprocess."""

import json
from pathlib import Path

import pytest

from planner.cli import build_parser, main, register_subcommand
from planner.strategies import strategy_names
from tests.planner.conftest import run_cli as run

ROOT = Path(__file__).resolve().parents[2]


def test_it_lists_the_strategies_one_per_line_solves_first():
    result = run("strategies")

    assert result.returncode == 0
    names = result.stdout.splitlines()
    assert names[: len(strategy_names())] == strategy_names()
    assert len(names) == len(set(names))


def test_it_solves_a_problem_and_writes_the_plan(data_dir, tmp_path):
    out = tmp_path / "plan.csv"

    result = run("solve", data_dir / "input.12.csv", "--strategy", "optimal", "-o", out)

    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary == {
        "strategy": "optimal",
        "buffers": 5,
        "height": 12,
        "lower_bound": 12,
        "proven_lower_bound": 12,
        "gap": 0.0,
        "seconds": summary["seconds"],
        "proven_optimal": True,
        "fits": None,
    }
    lines = out.read_text().splitlines()
    assert lines[0] == "id,lower,upper,size,offset"
    assert [line.split(",")[0] for line in lines[1:]] == ["b1", "b2", "b3", "b4", "b5"]


def test_it_exits_3_when_the_capacity_cannot_be_met_but_still_prints_the_summary(data_dir):
    result = run("solve", data_dir / "input.12.csv", "-s", "none", "--capacity", "12")

    assert result.returncode == 3
    summary = json.loads(result.stdout)
    assert summary["fits"] is False
    assert summary["height"] == 20
    assert "more than the capacity 12" in result.stderr


def test_it_exits_0_when_the_capacity_is_met(data_dir):
    result = run("solve", data_dir / "input.12.csv", "-s", "best-fit", "--capacity", "12")

    assert result.returncode == 0
    assert json.loads(result.stdout)["fits"] is True


def test_it_reads_and_writes_json(data_dir, tmp_path):
    from planner.problem import problem_to_json, read_csv

    source = tmp_path / "p.json"
    source.write_text(json.dumps(problem_to_json(read_csv(data_dir / "input.12.csv"))))
    out = tmp_path / "plan.json"

    result = run("solve", source, "-s", "greedy-by-size", "-o", out)

    assert result.returncode == 0, result.stderr
    offsets = {b["id"]: b["offset"] for b in json.loads(out.read_text())["buffers"]}
    assert len(offsets) == 5 and all(isinstance(v, int) for v in offsets.values())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,lower,upper,size\na,0,1,x\n", "bad.csv:2: column 4 (size)"),
        ("id,lower,upper\n", "bad.csv:1: column 4: missing column(s) size"),
    ],
)
def test_it_exits_2_with_one_line_on_a_malformed_file(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)

    result = run("solve", path, "-s", "none")

    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_it_exits_2_on_an_unknown_strategy(data_dir):
    result = run("solve", data_dir / "input.12.csv", "-s", "magic")

    assert result.returncode == 2
    assert "unknown strategy 'magic'; known strategies: none" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["solve"],
        ["solve", "x.csv"],
        ["solve", "x.csv", "-s", "none", "--capacity", "lots"],
        ["solve", "x.csv", "-s", "none", "--time-limit", "-1"],
        ["frobnicate"],
        [],
    ],
)
def test_it_exits_2_on_bad_arguments(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("planner: error: ")
    assert len(err.strip().splitlines()) == 1


def test_it_exits_2_on_a_missing_file(tmp_path, capsys):
    assert main(["solve", str(tmp_path / "missing.csv"), "-s", "none"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_other_modules_can_register_a_subcommand(capsys):
    calls = []

    def configure(parser):
        parser.add_argument("model")

    def handler(args):
        calls.append(args.model)
        return 0

    register_subcommand("compile-test", configure, handler, help="a test subcommand")
    try:
        assert main(["compile-test", "resnet"]) == 0
    finally:
        from planner import cli

        del cli._subcommands["compile-test"]
    assert calls == ["resnet"]
    assert "compile-test" not in build_parser().subcommands.choices
