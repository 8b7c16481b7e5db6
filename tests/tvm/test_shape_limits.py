"""A shape axis never runs past what the model was built for (issue 33): a point beyond a
bound the model declares is refused, naming both; sources build for the axis's bound."""

from dataclasses import replace

import pytest

from planner.shapes import ShapeError, parse_cli
from planner.tvm.shape_axis import check_limits
from planner.tvm.sources import ModelSource, build_network
from planner.tvm.sources.handover import load_imported, save_imported

POOL = ModelSource("zoo:pool_reuse", {"resolution": 32, "channels": 4, "dynamic": True})


@pytest.fixture(scope="module")
def limited():
    # As if the model held a table of 16 rows per side.
    return replace(build_network(POOL), shape_limits={"h": (16, "a 16-row table")})


def test_a_point_past_the_models_bound_is_refused_naming_both(limited):
    with pytest.raises(ShapeError) as refused:
        check_limits(limited, parse_cli(["h=8,32", "w=h"]))

    message = str(refused.value)
    assert "point h=32,w=32 is past the bound h <= 16" in message
    assert "pool_reuse declares (a 16-row table)" in message


def test_an_axis_bound_past_the_models_bound_is_refused(limited):
    with pytest.raises(ShapeError, match="the axis's bound h=64 is past the bound h <= 16"):
        check_limits(limited, parse_cli(["h=8,16:64", "w=h"]))


def test_points_within_the_bound_pass(limited):
    check_limits(limited, parse_cli(["h=8,16", "w=h"]))
    check_limits(build_network(POOL), parse_cli(["h=8,1024", "w=h"]))


def test_the_bound_survives_the_hand_over_between_sandboxes(tmp_path, limited):
    save_imported(limited.bind_weights(), tmp_path)

    loaded = load_imported(tmp_path, name="pool").network

    assert loaded.shape_limits == {"h": (16, "a 16-row table")}


def test_a_python_factory_is_built_for_the_axiss_bound(tmp_path):
    (tmp_path / "models.py").write_text(
        "from dataclasses import replace\n"
        "from planner.tvm.zoo.mlp import mlp\n\n\n"
        "def tiny(seq=4, hidden=8):\n"
        "    return replace(mlp(features=4, hidden=[hidden], classes=2), name=f'seq{seq}')\n"
    )
    source = ModelSource("models.py:tiny")

    assert build_network(source, base_dir=tmp_path, axis=parse_cli(["seq=24"])).name == "seq24"
    # A bound the manifest gives wins; a symbol the factory does not take is not passed.
    given = ModelSource("models.py:tiny", {"seq": 12})
    assert build_network(given, base_dir=tmp_path, axis=parse_cli(["seq=24"])).name == "seq12"
    assert build_network(source, base_dir=tmp_path, axis=parse_cli(["h=24"])).name == "seq4"


def test_a_model_files_position_table_refuses_a_longer_point_before_compiling():
    from pathlib import Path

    from planner.shapes import parse_cli_dims
    from planner.tvm.shape_axis import compile_shapes

    models = Path(__file__).with_name("torch_models.py")
    source = ModelSource(f"{models}:gpt2_table", {"positions": 16})
    axis = parse_cli_dims(["seq=ids:1"], parse_cli(["seq=8,32"]))

    # Past the table TVM's build reads other rows (or NaN) where PyTorch raises: refused,
    # naming where the model says how long the table is.
    with pytest.raises(ShapeError) as refused:
        compile_shapes(source, ["best-fit"], axis, repeat=0, memory_configs=())
    message = str(refused.value)
    assert "point seq=32 is past the bound seq <= 16" in message
    assert "GPT2Config.n_positions, the model's position table" in message

    shorter = parse_cli_dims(["seq=ids:1"], parse_cli(["seq=8,16"]))
    within = compile_shapes(source, ["best-fit"], shorter, repeat=0, memory_configs=())
    assert all(r.ok for r in within), [r.error for r in within]
