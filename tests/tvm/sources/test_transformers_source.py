"""transformers:gpt2 and transformers:bert: real decoders, planned at each sequence length."""

import pytest

from planner.shapes import parse_shapes
from planner.tvm.sources import ModelSource, ModelSourceError, build_network

SMALL = {"seq": 16, "layers": 1, "hidden": 32, "heads": 2, "vocab": 64}


@pytest.fixture(autouse=True)
def _needs_transformers():
    from planner.tvm.sources.transformers_models import TransformersError, import_transformers

    try:
        import_transformers()
    except TransformersError as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_a_dynamic_model_has_a_length_named_seq_bounded_by_the_parameter(name):
    network = build_network(ModelSource(f"transformers:{name}", {**SMALL, "dynamic": True}))

    assert network.input_names[0] == "input_ids"
    assert network.input_shapes[0] == (1, "seq")
    assert network.input_dtypes[0] == "int64"
    assert network.shape_bounds == {"seq": 16}
    assert network.shape_limits["seq"][0] == 16
    assert network.mod[network.entry].attrs["tir_var_upper_bound"]["seq"] == 16
    # Random token ids must index the embedding table, not read past it.
    assert network.input_ranges == {"input_ids": (0, 64)}
    assert network.random_inputs()[0].max() < 64


def test_a_dynamic_model_declares_its_position_table_as_the_bound_of_seq():
    from planner.shapes import ShapeError, parse_cli
    from planner.tvm.shape_axis import compile_shapes

    # Built for the axis: no seq given, so GPT-2 gets a position table of the axis's bound.
    params = {k: v for k, v in SMALL.items() if k != "seq"}
    axis = parse_shapes({"seq": [24]})
    network = build_network(ModelSource("transformers:gpt2", params), axis=axis)

    assert network.shape_bounds == {"seq": 24}
    assert network.shape_limits == {"seq": (24, "GPT2Config.n_positions")}
    # Built for 16 (seq given), the point 32 would read past the 16-row position table:
    # refused before anything is compiled.
    with pytest.raises(ShapeError, match=r"point seq=32 is past the bound seq <= 16, which "
                       r"gpt2 declares \(GPT2Config.n_positions\)"):
        compile_shapes(ModelSource("transformers:gpt2", {**SMALL, "dynamic": True}),
                       ["tvm-stock"], parse_cli(["seq=8,16,32"]))


def test_a_static_model_has_a_fixed_length_and_no_bounds():
    network = build_network(ModelSource("transformers:bert", {**SMALL, "batch": 2}))

    assert network.input_shapes[0] == (2, 16)
    assert network.shape_bounds == {}


#: One strategy of each kind the encoder below does not build: each strategy builds every
#: kernel again, on a machine with two cores. Every strategy is built on the small zoo
#: models, a tiny BERT among them (tests/tvm/zoo/test_zoo_models.py).
DECODER_STRATEGIES = [
    "tvm-stock", "tvm-token-reuse", "greedy-by-conflicts", "optimal", "optimal+rewrites",
    "best-fit+rewrites+reorder",
]


@pytest.mark.slow
def test_strategies_of_each_kind_plan_and_match_tvm_stock_at_each_length():
    from planner.shapes import parse_shapes
    from planner.tvm.shape_axis import compile_shapes

    reports = compile_shapes(
        ModelSource("transformers:gpt2", {**SMALL, "dynamic": True}),
        DECODER_STRATEGIES,
        parse_shapes({"seq": [8, 16]}),
        repeat=1,
        memory_configs=(),
    )

    assert sorted((r.strategy, r.shape_point["seq"]) for r in reports) == sorted(
        (s, seq) for s in DECODER_STRATEGIES for seq in (8, 16)
    )
    for report in reports:
        at = (report.strategy, report.shape_point)
        assert report.error is None, f"{at}: {report.error}"
        assert report.outputs_match is True, at
        assert report.intermediate_bytes > 0 and report.reserved_at_bound_bytes > 0, at
        assert report.latency_ms["median"] > 0


@pytest.mark.slow
def test_an_encoder_plans_matches_and_is_measured_at_each_length():
    from planner.shapes import parse_shapes
    from planner.tvm.shape_axis import compile_shapes

    # The measurement runs each build again in a fresh process, the same way whatever the
    # plan: one build of each kind (TVM's plan, ours, ours with rewrites) stands for the rest.
    strategies = ["tvm-stock", "best-fit", "best-fit+rewrites"]
    reports = compile_shapes(
        ModelSource("transformers:bert", {**SMALL, "dynamic": True}),
        strategies,
        parse_shapes({"seq": [8, 16]}),
        repeat=0,
        memory_configs=("pooled",),
    )

    assert sorted((r.strategy, r.shape_point["seq"]) for r in reports) == sorted(
        (s, seq) for s in strategies for seq in (8, 16)
    )
    for report in reports:
        at = (report.strategy, report.shape_point)
        assert report.error is None and report.outputs_match is True, f"{at}: {report.error}"
        assert report.intermediate_bytes > 0 and report.reserved_at_bound_bytes > 0, at
        assert report.measured_peak_bytes, at


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"hidden": 30, "heads": 4}, r"hidden \(30\) must be a multiple of heads \(4\)"),
        ({"seq": 0}, "seq must be a positive integer, not 0"),
        ({"dynamic": "yes"}, "dynamic must be true or false"),
        ({"seq": 1, "dynamic": True}, "bound of at least 2"),
        ({"depth": 3}, "bad parameters for transformers:gpt2: .*depth"),
        ({"batch": 2}, "only batch 1 exports"),
    ],
)
def test_a_bad_parameter_is_a_model_source_error(params, message):
    with pytest.raises(ModelSourceError, match=message):
        build_network(ModelSource("transformers:gpt2", params))


def test_an_unknown_architecture_is_a_model_source_error():
    with pytest.raises(ModelSourceError, match="unknown transformers model 'llama'; known: bert"):
        build_network(ModelSource("transformers:llama"))
