"""A model's shape axis in the manifest: the points it is measured at, checked up front."""

import pytest

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
