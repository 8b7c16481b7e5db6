"""``python -m planner export`` and ``python -m planner micro``."""

from __future__ import annotations

import json

from planner.cli import main
from planner.tvm.micro.cli import JSON_FIELDS
from tests.tvm.micro.models import TINY_INT8

MODEL, PARAMS = TINY_INT8
PARAM_ARGS = ["--param", "resolution=8", "--param", "channels=[4,8]"]


def test_micro_writes_one_json_object_per_strategy(toolchain, tmp_path, capsys):
    out = tmp_path / "micro.json"
    code = main([
        "micro", MODEL, *PARAM_ARGS, "--strategy", "none", "--strategy", "tvm-token-reuse",
        "--machine", "mps2-an500", "--json", str(out),
    ])
    assert code == 0, capsys.readouterr()
    rows = json.loads(out.read_text())
    assert [r["strategy"] for r in rows] == ["none", "tvm-token-reuse"]
    for row in rows:
        assert set(JSON_FIELDS) <= set(row)
        assert row["outputs_match"] is True and row["instructions"] > 0
    assert rows[0]["arena_bytes"] >= rows[1]["arena_bytes"]
    assert "instructions" in capsys.readouterr().out


def test_export_writes_the_c_project(tmp_path, capsys):
    code = main(["export", MODEL, *PARAM_ARGS, "--strategy", "greedy-by-size",
                 "-o", str(tmp_path / "proj")])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["strategy"] == "greedy-by-size"
    assert (tmp_path / "proj" / "model.c").exists()


def test_an_unknown_strategy_is_bad_input(tmp_path, capsys):
    code = main(["export", MODEL, *PARAM_ARGS, "--strategy", "nope", "-o", str(tmp_path)])
    assert code == 2
    assert "nope" in capsys.readouterr().err
