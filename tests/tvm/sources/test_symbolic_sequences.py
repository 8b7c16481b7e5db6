"""Sequence models along a symbolic length, as users call them: a decoder with token ids
alone (no mask), BART and T5 with their default cache. Each once failed in TVM: a slice with
a negative axis in folding, a clamped symbolic slice bound whose ``if_then_else`` TVM cannot
type, T5's ``bias[:, :, -seq:, :]``; the importer's slices are taken as torch reads them."""

from pathlib import Path

import pytest

from planner.shapes import parse_cli, parse_cli_dims
from planner.tvm.shape_axis import compile_shapes
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


def _along_seq(factory: str, params: dict, places: str):
    axis = parse_cli_dims([f"seq={places}"], parse_cli(["seq=4,8"]))
    return compile_shapes(
        ModelSource(f"{MODELS}:{factory}", params), ["tvm-stock", "best-fit+rewrites"], axis,
        repeat=0, memory_configs=(),
    )


@pytest.mark.parametrize(("factory", "params", "places"), [
    ("gpt2_table", {"positions": 16, "masked": False}, "ids:1"),
    ("encoder_decoder", {"family": "bart"}, "ids:1,decoder_ids:1"),
    ("encoder_decoder", {"family": "t5"}, "ids:1,decoder_ids:1"),
], ids=["decoder-without-mask", "bart", "t5"])
def test_it_plans_builds_and_matches_pytorch_at_every_point(factory, params, places):
    reports = _along_seq(factory, params, places)

    assert [r.shape_point for r in reports] == [{"seq": 4}] * 2 + [{"seq": 8}] * 2
    for report in reports:
        assert report.ok and report.outputs_match is True, (report.shape_point, report.error)
        assert report.reference_check == "PyTorch"
    stock, rewrites = reports[2:]
    assert rewrites.planned_bytes < stock.planned_bytes
