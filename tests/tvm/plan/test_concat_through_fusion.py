"""Concatenations fused with their consumers: producers write into their slices, and the
fused kernel reads them there instead of copying."""

from pathlib import Path

import pytest

from planner.tvm.build.target import make_target
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.plan import lowering
from planner.tvm.plan.extract import bindings_of
from planner.tvm.plan.kernel_accesses import kernel_nests
from planner.tvm.plan.rewrites import concat_slots, find_rewrites, rewrite_kernels
from planner.tvm.plan.variants import prepare_variant
from planner.tvm.sources import ModelSource, build_network

pytestmark = pytest.mark.slow

MODELS = Path(__file__).parents[1] / "rewrite_models.py"
DENSE = ModelSource(f"{MODELS}:dense_blocks", {"image": 32})


@pytest.fixture(scope="module")
def dense():
    network = build_network(DENSE)
    lowered = lowering.lower_to_allocations(network.mod, make_target("llvm"))
    variant = prepare_variant(lowered, network.entry, {}, True)
    return variant, find_rewrites(variant.module, variant.by_binding)


def _concat_calls(module, function):
    calls = []
    for binding in bindings_of(module[function]):
        op = getattr(binding.value, "op", None)
        if op is not None and hasattr(op, "name_hint") and op.name_hint in {
                g.name_hint for g in module.functions}:
            kernel = module[op]
            if hasattr(kernel, "params") and concat_slots(kernel) is not None:
                calls.append(op.name_hint)
    return calls


def test_every_feature_of_a_block_sits_once_in_one_block_buffer(dense):
    variant, rewrites = dense
    tensors = variant.by_binding.by_name()

    # torchvision concatenates all earlier features again in every layer: 3 + 3 layers
    # and one concatenation closing each block.
    assert rewrites.concat_copies_removed == 8 and rewrites.concat_copies_left == 0
    for _, output, inputs in rewrites.concats:
        root, start = rewrites.find(output)
        at = start
        for name in inputs:
            # In argument order, back to back, at the same place in every concatenation.
            assert rewrites.find(name) == (root, at)
            at += tensors[name].size
    # Each concatenation would have copied its whole output.
    assert rewrites.concat_bytes_saved == sum(tensors[out].size for _, out, _ in rewrites.concats)


def test_the_fused_kernels_lose_their_copy_and_read_the_slices(dense):
    variant, rewrites = dense
    function = variant.by_binding.function

    rewritten = rewrite_kernels(variant.module, function, rewrites)

    assert _concat_calls(variant.module, function)
    assert _concat_calls(rewritten, function) == []
    for name in {g.name_hint for g in rewritten.functions if g.name_hint.endswith("_sliced")}:
        nests = kernel_nests(rewritten[name])
        assert nests and not any(n.block.name_hint.startswith("T_concat") for n in nests)


def test_a_densenet_without_concatenation_copies_computes_the_stock_outputs_in_less_memory():
    reports = {r.strategy: r for r in compile_model(
        DENSE, [STOCK, "best-fit", "best-fit+rewrites"], repeat=0, memory_configs=("pooled",),
    )}

    rewritten, plain = reports["best-fit+rewrites"], reports["best-fit"]
    assert rewritten.outputs_match is True, rewritten.error
    assert rewritten.rewrites["concat_copies_removed"] == 8
    assert rewritten.rewrites["concat_copies_left"] == 0
    assert rewritten.measured_peak_bytes < plain.measured_peak_bytes
