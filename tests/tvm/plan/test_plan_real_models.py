"""The TVM boundary on real Relax modules: extraction, applying plans, checking outputs."""

import numpy as np
import pytest

from planner.plan import validate_plan
from planner.problem import lower_bound
from planner.tvm.build import execute
from planner.tvm.build.target import make_target
from planner.tvm.compile import ATOL, RTOL, STOCK, compile_model
from planner.tvm.plan import lowering
from planner.tvm.plan.apply import apply_plan
from planner.tvm.plan.extract import extract
from planner.tvm.plan.kernel_temps import lift_kernel_temporaries, refine_lifetimes
from planner.tvm.plan.stock import stock_offsets
from planner.tvm.sources import ModelSource, ModelSourceError, build_network

pytestmark = pytest.mark.slow

RESIDUAL = ModelSource("zoo:residual_cnn", {"channels": 4, "resolution": 16, "blocks": 1})


@pytest.fixture(scope="module")
def lowered():
    network = build_network(RESIDUAL)
    target = make_target("llvm")
    return network, target, lowering.lower_to_allocations(network.mod, target)


def test_it_extracts_every_intermediate_with_its_lifetime(lowered):
    _, _, mod = lowered

    extraction = extract(mod)

    sizes = [t.size for t in extraction.tensors]
    assert sizes == [4 * 16 * 16 * 4] * 3 + [8 * 8 * 8 * 4]
    stem, inner, block_out, _ = extraction.tensors
    # The skip connection keeps the stem's output alive until the residual add.
    assert stem.upper > inner.lower and stem.upper > block_out.lower
    assert inner.upper <= block_out.upper
    assert [t.producer.startswith("fused_conv2d") for t in extraction.tensors] == [True] * 4
    # The network's output escapes to the caller and stays outside the arena.
    assert [t.size for t in extraction.escaping] == [10 * 8 * 8 * 4]


def test_tvm_stock_plan_reads_back_as_a_valid_offset_plan(lowered):
    _, target, mod = lowered
    extraction = extract(mod)

    offsets, arena = stock_offsets(lowering.plan_with_stock_planner(mod, target), extraction)

    validate_plan(extraction.problem(), offsets)
    assert arena >= lower_bound(extraction.problem())


def test_a_wrong_plan_is_caught_by_the_output_check(lowered):
    network, target, mod = lowered
    extraction = extract(mod)
    everything_at_zero = {t.name: 0 for t in extraction.tensors}
    arena = max(t.size for t in extraction.tensors)
    inputs = network.random_inputs()
    dev = execute.device_for(target)
    stock = execute.build(lowering.finish_lowering(mod, target, stock_planner=True), target)

    broken = apply_plan(mod, extraction, everything_at_zero, arena)
    wrong = execute.build(lowering.finish_lowering(broken, target, stock_planner=False), target)

    match, worst = execute.compare_outputs(
        execute.run_once(execute.load(stock, dev), dev, inputs),
        execute.run_once(execute.load(wrong, dev), dev, inputs),
        rtol=RTOL, atol=ATOL,
    )
    assert not match
    assert worst > 1e-3


def test_every_strategy_builds_and_matches_the_stock_outputs(tmp_path):
    reports = compile_model(
        RESIDUAL, [STOCK, "none", "greedy-by-size", "best-fit", "best-fit+rewrites"], repeat=2,
        artifacts_dir=tmp_path,
    )

    by_name = {r.strategy: r for r in reports}
    for report in reports:
        assert report.ok, report.error
        assert report.outputs_match is True
        assert report.max_abs_diff == 0.0
        assert len(report.latency_ms["samples"]) == 2
        held = report.intermediate_bytes + report.kernel_workspace_bytes
        assert held >= report.lower_bound_bytes
        assert {"plan.json", "problem.csv", "module.py", "timeline.svg"} <= set(report.artifacts)
    assert by_name["none"].planned_bytes > by_name["greedy-by-size"].planned_bytes
    # best-fit plans what TVM's planner plans, reaching the bound, and leaves kernel
    # temporaries to TVM's pool; the rewrites plan those too and hold no pool at all.
    stock, best, unified = by_name[STOCK], by_name["best-fit"], by_name["best-fit+rewrites"]
    assert best.intermediate_bytes == best.lower_bound_bytes == best.peak["bytes"]
    assert best.kernel_workspace_bytes > 0
    assert unified.kernel_workspace_bytes == 0
    assert unified.planned_bytes < best.planned_bytes <= stock.planned_bytes
    assert any(".pad_temp" in t["id"] for t in unified.peak["tensors"])
    assert "R.memory.alloc_storage" in (tmp_path / "residual_cnn" / "greedy-by-size" /
                                        "module.py").read_text()


def test_it_rejects_an_unknown_strategy_before_compiling():
    with pytest.raises(ValueError, match="unknown strategy best-guess; known: tvm-stock"):
        compile_model(RESIDUAL, ["best-guess"])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (ModelSource("zoo:resnet-9000"), "unknown zoo model 'resnet-9000'"),
        (ModelSource("hub:bert"), "unsupported model source 'hub:bert'"),
        (ModelSource("zoo:small_cnn", {"widht": 3}), "bad parameters for zoo:small_cnn"),
    ],
)
def test_it_names_what_is_wrong_with_a_model_source(source, message):
    with pytest.raises(ModelSourceError, match=message):
        build_network(source)


def test_inputs_are_reproducible_for_a_seed():
    network = build_network(RESIDUAL)
    first, second = network.random_inputs(3), network.random_inputs(3)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_measured_memory_moves_with_the_plan(tmp_path):
    reports = {
        r.strategy: r
        for r in compile_model(
            RESIDUAL, [STOCK, "none", "greedy-by-size", "best-fit+rewrites"], repeat=0)
    }
    stock, none, greedy = reports[STOCK], reports["none"], reports["greedy-by-size"]
    unified = reports["best-fit+rewrites"]

    # Same kernels, same workspace and outputs: the naive allocator's peak differs by
    # exactly the arena sizes, and the pooled peak (the default) follows.
    naive_gap = (none.measured["naive"]["inference_peak_bytes"]
                 - greedy.measured["naive"]["inference_peak_bytes"])
    assert naive_gap == none.intermediate_bytes - greedy.intermediate_bytes
    assert none.measured_peak_bytes > greedy.measured_peak_bytes >= greedy.planned_bytes
    # TVM's kernels take their temporaries from the workspace pool; once lifted into the
    # arena, the pool holds nothing.
    assert stock.measured["workspace_bytes"] == greedy.measured["workspace_bytes"] > 0
    assert unified.measured["workspace_bytes"] == 0
    assert unified.measured_peak_bytes < greedy.measured_peak_bytes
    # Weights are bound into the library: only the data is uploaded as an argument.
    network = build_network(RESIDUAL)
    assert greedy.measured["weights_bytes"] == network.random_inputs()[0].nbytes
    assert greedy.weights_bytes == sum(v.nbytes for v in network.random_inputs()[1:])


def test_kernel_temporaries_live_only_over_the_blocks_that_use_them(lowered):
    network, _, mod = lowered
    lifted, temporaries = lift_kernel_temporaries(mod, network.entry)

    refined = refine_lifetimes(extract(lifted, network.entry), temporaries).by_name()

    kernel = "fused_conv2d_add_relu"
    pad, conv, add = (refined[f"{kernel}.{n}"] for n in
                      ("pad_temp", "conv2d_nchw_intermediate", "T_add_intermediate"))
    # Padding is dead once the convolution has read it; the add's result comes later.
    assert pad.upper <= add.lower
    assert conv.lower < add.lower < conv.upper
    # Declared temporaries add up only where their blocks overlap.
    assert temporaries.lifted_bytes < sum(t.size for t in temporaries.lifted)
