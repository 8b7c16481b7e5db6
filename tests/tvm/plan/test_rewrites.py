"""In-place and concat elision on real lowered models."""

import pytest

from planner.problem import lower_bound
from planner.tvm.build.target import make_target
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.plan import lowering
from planner.tvm.plan.extract import Extraction, Tensor, extract
from planner.tvm.plan.kernel_temps import lift_kernel_temporaries
from planner.tvm.plan.peak import peak_breakdown
from planner.tvm.plan.rewrites import find_rewrites, inline_pool_padding, inplace_safe
from planner.tvm.sources import ModelSource, build_network

pytestmark = pytest.mark.slow

DENSENET = ModelSource("zoo:densenet", {"resolution": 32, "classes": 10})


@pytest.fixture(scope="module")
def densenet():
    network = build_network(DENSENET)
    target = make_target("llvm")
    lowered = lowering.lower_to_allocations(network.mod, target)
    lifted, _ = lift_kernel_temporaries(lowered, network.entry)
    return network, lifted


def _kernel(mod, name):
    return mod[next(gv for gv in mod.functions if gv.name_hint == name)]


def test_it_allows_elementwise_kernels_and_refuses_windowed_ones(densenet):
    _, mod = densenet
    bn_relu = next(gv.name_hint for gv in mod.functions
                   if gv.name_hint.startswith("fused_multiply") and "relu" in gv.name_hint)
    elementwise = _kernel(mod, bn_relu)
    params = list(elementwise.params)
    assert inplace_safe(elementwise, params[0], params[3])

    conv = _kernel(mod, "fused_conv2d_multiply_add_relu")
    by_name = {p.name: p for p in conv.params}
    # The convolution reads a window of pad_temp: writing its result there is unsafe.
    assert not inplace_safe(conv, by_name["pad_temp"], by_name["conv2d_nchw_intermediate"])
    assert inplace_safe(conv, by_name["conv2d_nchw_intermediate"],
                        by_name["T_multiply_intermediate"])


def test_concat_inputs_land_in_their_slices_of_the_output(densenet):
    network, mod = densenet
    extraction = extract(mod, network.entry)

    rewrites = find_rewrites(mod, extraction)

    assert rewrites.concats and rewrites.dropped
    tensors = extraction.by_name()
    for _, output, inputs in rewrites.concats:
        out_root, out_rel = rewrites.find(output)
        slices = []
        for name in inputs:
            root, rel = rewrites.find(name)
            assert root == out_root
            slices.append((rel, rel + tensors[name].size))
        # Inputs follow one another inside the output, in argument order, without overlap.
        assert slices[0][0] >= out_rel and slices[-1][1] <= out_rel + tensors[output].size
        assert all(a[1] <= b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert lower_bound(rewrites.problem(extraction)) < lower_bound(extraction.problem())


def test_rewritten_plans_compute_the_same_outputs_with_less_memory():
    reports = {r.strategy: r for r in compile_model(
        DENSENET, [STOCK, "best-fit", "best-fit+rewrites"], repeat=0,
        # The measured peak is the pooled allocator's; the naive one would run every build
        # again in a fresh process.
        memory_configs=("pooled",),
    )}

    rewritten, plain, stock = (reports[s] for s in ("best-fit+rewrites", "best-fit", STOCK))
    assert rewritten.outputs_match is True and rewritten.max_abs_diff == 0.0
    assert rewritten.rewrites["dropped_calls"] > 0
    # The arena now also holds the kernels' temporaries, and still needs less than the
    # plain plan plus the workspace TVM's pool keeps for them.
    assert rewritten.kernel_workspace_bytes == 0
    assert rewritten.planned_bytes < plain.planned_bytes
    assert rewritten.measured_peak_bytes < plain.measured_peak_bytes < stock.measured_peak_bytes


def test_pooling_reads_its_input_directly_instead_of_a_padded_copy():
    network = build_network(ModelSource("zoo:resnet18", {"resolution": 32, "width": 0.25}))
    lowered = lowering.lower_to_allocations(network.mod, make_target("llvm"))

    inlined, kernels = inline_pool_padding(lowered)

    assert kernels == ["max_pool2d"]
    _, before = lift_kernel_temporaries(lowered, network.entry)
    _, after = lift_kernel_temporaries(inlined, network.entry)
    names = [{(t.kernel, t.name) for t in temps.lifted} for temps in (before, after)]
    assert names[0] - names[1] == {("max_pool2d", "pad_temp")}
    assert after.lifted  # the convolutions keep theirs


def test_a_chain_of_elementwise_results_shares_one_buffer(densenet):
    network, mod = densenet
    extraction = extract(mod, network.entry)

    rewrites = find_rewrites(mod, extraction)

    stem = "fused_conv2d_multiply_add_relu"
    chain = [f"{stem}.conv2d_nchw_intermediate", f"{stem}.T_multiply_intermediate",
             f"{stem}.T_add_intermediate"]
    roots = {rewrites.find(name) for name in chain}
    assert len(roots) == 1


def test_the_peak_instant_is_that_of_the_plan_as_applied():
    # ResNet's residual additions run in place: their outputs share their inputs' bytes.
    [rewritten] = compile_model(
        ModelSource("zoo:resnet18", {"resolution": 32, "width": 0.25}), ["best-fit+rewrites"],
        repeat=0, memory_configs=(),
    )

    assert rewritten.rewrites["inplace"]
    peak = rewritten.peak
    # No instant of a plan can hold more than its arena; summing merged tensors did.
    assert 0 < peak["bytes"] <= rewritten.intermediate_bytes
    assert sum(t["size"] for t in peak["tensors"]) == peak["bytes"] or peak["more"]
    temporaries = [t for t in peak["tensors"] if "." in t["id"]]
    assert all(t["producer"].endswith("(temporary)") for t in temporaries)


def test_merged_tensors_count_once_at_the_peak_and_are_listed_once():
    tensors = [
        Tensor("conv", 0, (64,), "float32", 256, lower=0, upper=2, producer="conv2d"),
        # Written in place over conv's bytes while conv is still live at step 1.
        Tensor("add", 1, (64,), "float32", 256, lower=1, upper=3, producer="add"),
        Tensor("other", 2, (32,), "float32", 128, lower=1, upper=3, producer="relu"),
    ]
    offsets = {"conv": 0, "add": 0, "other": 256}

    peak = peak_breakdown(Extraction("forward", tensors), offsets)

    assert peak["bytes"] == 384 and peak["time"] == 1
    merged = next(t for t in peak["tensors"] if "merged" in t)
    assert merged["merged"] == ["conv", "add"] and merged["producer"] == "conv2d → add"
    assert merged["size"] == 256 and len(peak["tensors"]) == 2
    # Without offsets (TVM's plan unread) each tensor counts on its own.
    assert peak_breakdown(Extraction("forward", tensors), {})["bytes"] == 640
