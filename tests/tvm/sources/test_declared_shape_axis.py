"""A model file or an ONNX file declares the symbol of a shape axis (issue 31).

A factory returns ``(module, example inputs, dynamic_shapes)`` with ``torch.export.Dim``
named like the axis's symbol; or the axis says where the symbol is (``dims``) and the
export is made symbolic there; or an ONNX input's ``dim_param`` has the symbol's name. Each
way the network has the axis's symbol, bounded by the axis, and a mismatch says what to
write. The models are a user's repository, laid out as a user would: a hand-written encoder
block, a LLaMA decoder with an attention mask, small ONNX files.
"""

import json
import shutil
from pathlib import Path

import pytest

from planner.shapes import ShapeError, parse_cli, parse_cli_dims, parse_dims, parse_shapes
from planner.tvm.shape_axis import check_symbols, compile_shapes, symbols_of
from planner.tvm.sources import ModelSource, ModelSourceError, build_network
from tests.tvm.test_compile_cli import planner

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tracked-repository"
AXIS = parse_shapes({"seq": [8, 16]})

#: Small modules on (1, seq, 8) tensors: an export costs a second or two.
BLOCKS = '''
import torch
from torch import nn


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x, scale):
        return torch.relu(self.linear(x)) * scale


def example(seq):
    torch.manual_seed(0)
    return Mix(), (torch.randn(1, seq, 8), torch.randn(1, seq, 1))


def static(seq: int = 16):
    return example(seq)


def as_dict(seq: int = 16):
    module, inputs = example(seq)
    length = torch.export.Dim("seq", min=2, max=64)
    return {"module": module, "inputs": inputs, "dynamic_shapes": ({1: length}, {1: length})}


def misnamed(seq: int = 16):
    length = torch.export.Dim("length", min=2, max=64)
    return (*example(seq), ({1: length}, {1: length}))


def narrow():
    # Takes no seq: its example stays at 8, within a range that ends at 12.
    length = torch.export.Dim("seq", min=2, max=12)
    return (*example(8), ({1: length}, {1: length}))


def unnamed(seq: int = 16):
    return (*example(seq), ({1: torch.export.Dim.AUTO}, {1: torch.export.Dim.AUTO}))


def network():
    from planner.tvm.zoo.mlp import mlp

    return mlp(features=4, hidden=[8], classes=2)
'''

#: A LLaMA decoder from a tiny configuration, called with an attention mask (padding).
DECODER = '''
import torch
from transformers import LlamaConfig, LlamaForCausalLM


class Decoder(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = LlamaForCausalLM(config)

    def forward(self, input_ids, attention_mask):
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
            return_dict=False,
        )[0]


def build(seq: int = 16):
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (1, seq))
    return Decoder(config), (ids, torch.ones_like(ids))
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "models").mkdir()
    shutil.copy(EXAMPLE / "models" / "encoder.py", root / "models" / "encoder.py")
    (root / "models" / "blocks.py").write_text(BLOCKS)
    (root / "models" / "decoder.py").write_text(DECODER)
    for name, seq in (("named", "seq"), ("other", "sequence"), ("fixed", 16)):
        _write_onnx(root / "models" / f"{name}.onnx", seq)
    return root


def _write_onnx(path: Path, seq) -> None:
    """tokens (1, seq, 8) -> MatMul -> Relu -> MatMul, with ``seq`` its dim_param (or size)."""
    onnx = pytest.importorskip("onnx", reason="ONNX sources need the onnx package")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
        for n, s in (("w1", (8, 16)), ("w2", (16, 8)))
    ]
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["tokens", "w1"], ["hidden"]),
            helper.make_node("Relu", ["hidden"], ["active"]),
            helper.make_node("MatMul", ["active", "w2"], ["out"]),
        ],
        "tokens_mlp",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [1, seq, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, seq, 8])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def build(repo: Path, source: str, axis=AXIS, **params):
    return build_network(ModelSource(source, params), base_dir=repo, axis=axis)


def refused(repo: Path, source: str, axis=AXIS) -> str:
    with pytest.raises(ModelSourceError) as error:
        build(repo, source, axis)
    return str(error.value)


# The factory declares its symbol (a): torch.export's own terms.


def test_a_factory_returns_dynamic_shapes_with_a_dim_named_after_the_axis(repo):
    network = build(repo, "models/encoder.py:build")

    assert symbols_of(network) == {"seq"}
    assert network.input_shapes[0] == (1, "seq")
    assert network.shape_bounds == {"seq": 16}
    # The Dim's max is a bound the axis may not pass.
    assert network.shape_limits["seq"][0] == 512
    check_symbols(network, AXIS)


def test_a_factory_may_return_a_dict(repo):
    network = build(repo, "models/blocks.py:as_dict")

    assert network.input_shapes[:2] == [(1, "seq", 8), (1, "seq", 1)]
    assert network.shape_bounds == {"seq": 16}


def test_a_dim_named_otherwise_than_the_axis_says_what_to_write(repo):
    message = refused(repo, "models/blocks.py:misnamed")

    assert 'blocks.py:misnamed declares torch.export.Dim("length") but the shape axis names ' \
        "seq: their names must agree" in message
    assert 'torch.export.Dim("seq", ...)' in message and "shapes = { length = [...] }" in message


def test_an_axis_past_the_dims_range_is_refused_naming_the_range(repo):
    message = refused(repo, "models/blocks.py:narrow")

    assert "the shape axis has seq=16, outside the range torch.export kept for seq (2..12) " \
        "in blocks.py:narrow" in message


def test_a_symbolic_dimension_no_dim_names_is_refused(repo):
    message = refused(repo, "models/blocks.py:unnamed")

    assert "no torch.export.Dim names it" in message
    assert 'torch.export.Dim("NAME", min=..., max=...)' in message


def test_dims_and_dynamic_shapes_together_are_refused(repo):
    message = refused(repo, "models/blocks.py:as_dict", parse_dims({"seq": "x:1"}, AXIS))

    assert "declare each symbol once" in message


# The axis says where its symbol is (b): dims.


def test_dims_make_a_static_model_symbolic_by_input_name_or_position(repo):
    for places in (["x:1", "scale:1"], ["0:1", "1:1"]):
        network = build(repo, "models/blocks.py:static", parse_dims({"seq": places}, AXIS))

        assert network.input_shapes[:2] == [(1, "seq", 8), (1, "seq", 1)], places
        assert network.shape_bounds == {"seq": 16}
        # Exported as torch.export.Dim("seq", min=1, max=16): any point of the axis fits.
        assert network.shape_limits["seq"][0] == 16


@pytest.mark.parametrize(
    ("places", "message"),
    [
        (["ids:1"], "dims.seq = 'ids:1': blocks.py:static's module has no input named 'ids'; "
         "its inputs (name and position): x (0), scale (1)"),
        (["x:3"], "dims.seq = 'x:3': input 'x' has 3 dimension(s) (example shape (1, 16, 8)), "
         "so no dimension 3; they count from 0"),
        (["2:1"], "dims.seq = '2:1': blocks.py:static gives 2 example input(s), so no input 2"),
        (["x:0"], "dims.seq = 'x:0': the example input 'x' is 1 long on dimension 0; "
         "torch.export needs an example from 2 to the axis's bound 16 there"),
    ],
)
def test_dims_that_name_no_dimension_say_what_the_inputs_are(repo, places, message):
    assert message in refused(repo, "models/blocks.py:static", parse_dims({"seq": places}, AXIS))


def test_a_model_that_leaves_its_dimensions_static_is_told_how_to_declare_them(repo):
    network = build(repo, "models/blocks.py:static")

    with pytest.raises(ShapeError) as error:
        check_symbols(network, AXIS)

    message = str(error.value)
    assert "has no symbolic dimensions to take a shape axis" in message
    assert 'dims = { seq = "INPUT:DIM" }' in message and "--dim seq=INPUT:DIM" in message
    assert 'torch.export.Dim("seq", ...)' in message


def test_a_network_has_no_inputs_for_dims_to_name(repo):
    message = refused(repo, "models/blocks.py:network", parse_dims({"seq": "0:1"}, AXIS))

    assert "returned a Network, whose symbols are its own" in message


# ONNX (c): a dim_param named like the axis, or dims.


def test_an_onnx_dim_param_named_like_the_axis_is_its_symbol(repo):
    network = build(repo, "models/named.onnx")

    assert network.input_shapes[0] == (1, "seq", 8)
    assert network.shape_bounds == {"seq": 16}


def test_dims_name_an_onnx_dimension_whatever_the_file_calls_it(repo):
    for source, places in (("models/other.onnx", "tokens:1"), ("models/fixed.onnx", "0:1")):
        network = build(repo, source, parse_dims({"seq": places}, AXIS))

        assert network.input_shapes[0] == (1, "seq", 8), source


def test_an_onnx_dim_param_named_otherwise_says_what_to_write(repo):
    message = refused(repo, "models/other.onnx")

    assert "input 'tokens' has a symbolic dimension sequence (dimension 1)" in message
    assert "name the shape axis after it (shapes = { sequence = [...] })" in message
    assert 'dims = { seq = "tokens:1" }' in message


def test_an_onnx_axis_symbol_nowhere_in_the_file_is_refused(repo):
    message = refused(repo, "models/fixed.onnx")

    assert "fixed.onnx has no input dimension named seq for the shape axis (its symbolic " \
        'dimensions: none): name that dim_param seq, or say where it is with dims = ' \
        '{ seq = "INPUT:DIM" }' in message
    assert "has no input 'tokens' with a dimension 5" in refused(
        repo, "models/fixed.onnx", parse_dims({"seq": "tokens:5"}, AXIS)
    )


# Compiled at each point, from the command line and the API.


def test_the_command_line_compiles_a_model_file_at_each_point_of_its_dims(repo, tmp_path):
    out = tmp_path / "reports.json"

    proc = planner(
        "compile", str(repo / "models" / "blocks.py") + ":static", "--shape", "seq=8,16",
        "--dim", "seq=x:1,scale:1", "--strategy", "tvm-stock",
        "--repeat", "0", "--no-memory", "--json", str(out),
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = json.loads(out.read_text())
    assert {(r["strategy"], r["shape_point"]["seq"]) for r in reports} == {
        ("tvm-stock", 8), ("tvm-stock", 16)
    }
    for report in reports:
        assert report["outputs_match"] is True, report
    by_point = {r["shape_point"]["seq"]: r for r in reports if r["strategy"] == "tvm-stock"}
    assert by_point[8]["intermediate_bytes"] < by_point[16]["intermediate_bytes"]


def test_the_command_line_refuses_dims_without_points():
    proc = planner("compile", "models/x.py:build", "--dim", "seq=0:1")

    assert proc.returncode == 2
    assert "--dim says where a --shape symbol is" in proc.stderr


@pytest.mark.parametrize("source", ["models/encoder.py:build", "models/named.onnx"])
def test_a_declared_axis_is_compiled_and_checked_at_each_point(repo, source):
    reports = compile_shapes(
        ModelSource(source), ["tvm-stock"], AXIS, base_dir=repo, repeat=0, memory_configs=(),
    )

    assert [r.shape_point for r in reports] == [{"seq": 8}, {"seq": 16}]
    for report in reports:
        assert report.ok and report.outputs_match is True, (report.shape_point, report.error)
    assert reports[0].intermediate_bytes < reports[1].intermediate_bytes


def test_a_hugging_face_decoder_with_an_attention_mask_takes_the_axis_at_both_inputs(repo):
    pytest.importorskip("transformers")
    axis = parse_cli_dims(["seq=input_ids:1,attention_mask:1"], parse_cli(["seq=8,16"]))

    reports = compile_shapes(
        ModelSource("models/decoder.py:build"), ["tvm-stock"], axis, base_dir=repo, repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.ok and report.outputs_match is True, (report.shape_point, report.error)
    assert reports[0].intermediate_bytes < reports[1].intermediate_bytes
    assert reports[0].reserved_at_bound_bytes >= reports[1].intermediate_bytes


def test_a_size_read_from_the_values_is_named_with_where_it_comes_from():
    # Beside its input's symbolic length, a size the model reads with .item(): no shape axis
    # can give it points, and the refusal says what it is instead of naming a bare symbol.
    models = Path(__file__).parents[1] / "torch_models.py"
    network = build_network(ModelSource(f"{models}:counted_rows", {}), axis=AXIS)

    with pytest.raises(ShapeError) as error:
        check_symbols(network, AXIS)

    message = str(error.value)
    assert "no points for _local_scalar_dense_dim" in message
    assert "is no dimension of an input: the model reads it from a tensor's values" in message
    assert "size it from the input's shape instead" in message
