"""A model's shape axis in the manifest: the points it is measured at, checked up front."""

import pytest

from planner.shapes import ShapeAxis, parse_place
from workers.manifest import ManifestError, parse

SUITE = """
[suite]
strategies = ["tvm-stock", "greedy-by-size"]
boards = ["cpu"]

[[models]]
name = "pool"
source = "zoo:pool_reuse"
params = {{ resolution = 16, channels = 4, dynamic = true }}
{shapes}

[[models]]
name = "fixed"
source = "zoo:small_cnn"
"""


def test_it_reads_a_shape_axis_and_counts_each_point_in_the_suite():
    suite = parse(SUITE.format(shapes='shapes = { h = [16, 8], w = "h" }'))
    pool, fixed = suite.models

    assert pool.points == ({"h": 8, "w": 8}, {"h": 16, "w": 16})
    assert pool.labels == ["h=8,w=8", "h=16,w=16"]
    assert pool.shapes.bounds == {"h": 16, "w": 16}
    # A model without an axis is the one empty point, so it counts once as before.
    assert fixed.shapes is None and fixed.points == ({},) and fixed.labels == [""]
    assert suite.size == (2 + 1) * 2


def test_a_bound_above_the_points_is_kept_for_the_symbolic_build():
    suite = parse(SUITE.format(shapes="shapes = { seq = { points = [128, 512], bound = 4096 } }"))

    assert suite.models[0].shapes.bounds == {"seq": 4096}
    assert suite.models[0].labels == ["seq=128", "seq=512"]


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ("shapes = []", "model 'pool': shapes must be a table of symbols"),
        ("shapes = { h = [] }", "model 'pool': shapes.h must be a list of sizes"),
        ("shapes = { h = [8, -1] }", "model 'pool': shapes.h: every point must be a positive"),
        ('shapes = { w = "h" }', "model 'pool': shapes.w = 'h' names no symbol"),
        ("shapes = { h = { points = [64], bound = 32 } }", "model 'pool': .*above the bound"),
        ('shapes = { "1h" = [8] }', "model 'pool': '1h' is not a symbol name"),
        ("shapes = { a = [1,2,3,4,5,6,7,8], b = [1,2,3,4,5,6,7,8,9] }",
         "model 'pool': shapes declare 72 points"),
    ],
)
def test_a_bad_shape_axis_is_a_manifest_error_naming_the_model(shapes, message):
    with pytest.raises(ManifestError, match=message):
        parse(SUITE.format(shapes=shapes))


DIMS_SUITE = """
[[models]]
name = "encoder"
source = "{source}"
shapes = {{ seq = [64, 128], len = "seq" }}
{dims}
"""


def test_it_reads_where_each_symbol_is_in_a_model_files_inputs():
    suite = parse(DIMS_SUITE.format(
        source="models/encoder.py:build",
        dims='dims = { seq = "input_ids:1", len = ["0:2", "attention_mask:1"] }',
    ))
    axis = suite.models[0].shapes

    assert axis.dims == {"seq": ("input_ids:1",), "len": ("0:2", "attention_mask:1")}
    # The places travel with the axis to the sandboxed compile, and with any of its points.
    assert ShapeAxis.from_json(axis.to_json()) == axis
    assert axis.at([{"seq": 64, "len": 64}]).dims == axis.dims
    assert parse_place("input_ids:1") == ("input_ids", 1)
    assert parse_place("0:2") == (0, 2)
    assert parse_place("ids:0:1") == ("ids:0", 1)


def test_an_axis_without_places_keeps_its_json():
    axis = parse(SUITE.format(shapes='shapes = { h = [8], w = "h" }')).models[0].shapes

    assert axis.dims == {} and set(axis.to_json()) == {"points", "bounds"}


@pytest.mark.parametrize(
    ("source", "dims", "message"),
    [
        ("models/e.py:build", 'dims = { seq = "input_ids" }',
         "model 'encoder': dims.seq: 'input_ids' is not INPUT:DIM; write the input's name or "
         'position and the dimension, counting from 0, e.g. "input_ids:1" or "0:1"'),
        ("models/e.py:build", 'dims = { seq = "input_ids:-1", len = "0:1" }', "is not INPUT:DIM"),
        ("models/e.py:build", 'dims = { seq = 1, len = "0:1" }',
         'dims.seq must be "INPUT:DIM" or a list of them'),
        ("models/e.py:build", 'dims = { seq = "0:1" }',
         'dims gives no place to len: .* e.g. len = "input_ids:1"'),
        ("models/e.py:build", 'dims = { seq = "0:1", len = "0:1" }',
         "dims: '0:1' is given to seq and to len"),
        ("models/e.py:build", 'dims = { length = "0:1" }',
         r"dims.length: length has no points in shapes \(its symbols: seq, len\)"),
        ("models/e.onnx", 'dims = []', "model 'encoder': dims must be a table of symbols"),
        ("transformers:gpt2", 'dims = { seq = "0:1", len = "0:2" }',
         "dims is for a model file .* or an .onnx file, not transformers:gpt2"),
    ],
)
def test_a_bad_dims_table_is_a_manifest_error_saying_what_to_write(source, dims, message):
    with pytest.raises(ManifestError, match=message):
        parse(DIMS_SUITE.format(source=source, dims=dims))


def test_dims_without_a_shape_axis_is_refused():
    with pytest.raises(ManifestError, match="dims says where the symbols of a shape axis are"):
        parse('[[models]]\nname = "e"\nsource = "m.py:build"\ndims = { seq = "0:1" }\n')
