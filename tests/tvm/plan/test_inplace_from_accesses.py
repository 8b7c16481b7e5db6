"""In-place writes are decided from the loads and stores a kernel makes, never from the
regions its blocks declare."""

from pathlib import Path

import pytest
from tvm.script import tirx as T

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.plan.kernel_accesses import store_over_source_safe
from planner.tvm.plan.rewrites import inplace_safe
from planner.tvm.sources import ModelSource, build_network

MODELS = Path(__file__).parents[1] / "rewrite_models.py"


def source(factory: str, **params) -> ModelSource:
    return ModelSource(f"{MODELS}:{factory}", params)


def test_it_refuses_a_transpose_whose_declared_reads_leave_out_its_load():
    mod = build_network(source("hidden_transpose")).mod
    transpose, double = mod["transpose"], mod["double"]

    # The block declares no read at all; its body reads a[vj, vi].
    assert not inplace_safe(transpose, *transpose.params)
    assert inplace_safe(double, *double.params)


@pytest.mark.slow
def test_a_fused_kernel_that_hides_a_read_keeps_that_result_apart():
    reports = {r.strategy: r for r in compile_model(
        source("hidden_transpose"), [STOCK, "best-fit+rewrites"], repeat=1, memory_configs=(),
    )}

    rewritten = reports["best-fit+rewrites"]
    assert rewritten.outputs_match is True, rewritten.error
    assert rewritten.max_abs_diff == 0.0
    # FuseTIR makes one kernel of the four calls, its temporaries named after the
    # kernels' outputs: b_intermediate (doubled), _1 (transposed, the read undeclared),
    # _1_2 (doubled again). Only the elementwise doubling takes over its input.
    pairs = [(src.rsplit(".", 1)[1], dst.rsplit(".", 1)[1])
             for _, src, dst in rewritten.rewrites["inplace"]]
    assert pairs == [("b_intermediate_1", "b_intermediate_1_2")]


@T.prim_func(private=True, s_tir=True)
def _halve_forward(a: T.Buffer((64,), "float32"), b: T.Buffer((32,), "float32")):
    for i in range(32):
        with T.sblock("halve"):
            vi = T.axis.remap("S", [i])
            b[vi] = a[vi * 2] + a[vi * 2 + 1]


@T.prim_func(private=True, s_tir=True)
def _halve_backward(a: T.Buffer((64,), "float32"), b: T.Buffer((32,), "float32")):
    for i in range(32):
        with T.sblock("halve"):
            vi = T.axis.remap("S", [i])
            b[31 - vi] = a[62 - vi * 2] + a[63 - vi * 2]


@T.prim_func(private=True, s_tir=True)
def _running_max(a: T.Buffer((64,), "float32"), b: T.Buffer((32,), "float32")):
    for i, k in T.grid(32, 2):
        with T.sblock("max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                b[vi] = T.float32(-3.0e38)
            b[vi] = T.max(b[vi], a[vi * 2 + vk])


def test_a_strided_result_may_start_where_its_input_starts_when_reads_run_ahead():
    a, b = _halve_forward.params
    # Element i is written after elements 2i and 2i+1 were read: never before a read of
    # the bytes it lands on.
    assert store_over_source_safe(_halve_forward, a, b, 0) == "trace"
    # Sixteen elements further up, b[0] would land on a[16] before a[16] is read.
    assert store_over_source_safe(_halve_forward, a, b, 64) is None


def test_it_refuses_the_same_reduction_run_backwards_or_initialised_first():
    a, b = _halve_backward.params
    assert store_over_source_safe(_halve_backward, a, b, 0) is None
    # The init writes b[0] over a[0] before the reduction reads a[0].
    a, b = _running_max.params
    assert store_over_source_safe(_running_max, a, b, 0) is None


@pytest.mark.slow
def test_torchvision_resnet18_computes_the_stock_outputs_with_every_rewrite():
    reports = {r.strategy: r for r in compile_model(
        ModelSource("torchvision:resnet18", {"image": 32}), [STOCK, "best-fit+rewrites"],
        repeat=1, memory_configs=(),
    )}

    rewritten = reports["best-fit+rewrites"]
    assert rewritten.outputs_match is True, rewritten.error
    assert rewritten.rewrites["inplace"]


@T.prim_func(private=True, s_tir=True)
def _requantise(a: T.Buffer((16,), "int32"), out: T.Buffer((16,), "int8")):
    acc = T.sblock_alloc_buffer((16,), "int32")
    spare = T.sblock_alloc_buffer((16,), "int32")
    for i in range(16):
        with T.sblock("accumulate"):
            vi = T.axis.remap("S", [i])
            acc[vi] = a[vi] * 3
    for i in range(16):
        with T.sblock("spare"):
            vi = T.axis.remap("S", [i])
            spare[vi] = a[vi]
    for i in range(16):
        with T.sblock("shift"):
            vi = T.axis.remap("S", [i])
            out[vi] = T.Cast("int8", ((acc[vi] >> 15) & 127) | ((acc[vi] << 1) ^ 3))


def test_a_block_of_shifts_and_bitwise_operators_touches_only_what_it_reads_and_writes():
    from planner.tvm.plan.kernel_accesses import block_touches
    from planner.tvm.plan.kernel_temps import _root_block, kernel_blocks

    accumulate, _, shift = kernel_blocks(_requantise)
    acc, spare = _root_block(_requantise).alloc_buffers

    # Before TVM 0.27's RShift and bitwise nodes were known, a block of them "touched"
    # everything, and every kernel temporary of an int8 network lived to its kernel's end.
    assert block_touches(shift, acc) and block_touches(accumulate, acc)
    assert not block_touches(shift, spare)
