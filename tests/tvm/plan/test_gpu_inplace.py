"""In-place writes in kernels scheduled for a GPU: proven thread by thread, written through
one pointer.

The kernels are written as TVM's CUDA pipeline leaves them (dlight's thread bindings,
vectorised loops, several launches); no GPU is needed to decide anything here.
"""

import json

import pytest
import tvm
from tvm.script import tirx as T

import planner.tvm.plan.strategy as planning_strategy
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.plan.kernel_accesses import gpu_kernel, gpu_store_over_source, is_gpu_kernel
from planner.tvm.plan.rewrites import find_rewrites, share_pointer
from planner.tvm.sources import ModelSource

CUDA = json.dumps({"kind": "cuda", "arch": "sm_90"})


@T.prim_func(private=True, s_tir=True)
def _elementwise(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    T.func_attr({"tirx.noalias": True, "tirx.is_scheduled": True})
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("double"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                b[v] = a[v] * T.float32(2)


@T.prim_func(private=True, s_tir=True)
def _shifted(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    T.func_attr({"tirx.noalias": True, "tirx.is_scheduled": True})
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("shift"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                b[v] = a[T.min(v + 1, 1023)]


@T.prim_func(private=True, s_tir=True)
def _written_first(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    T.func_attr({"tirx.noalias": True, "tirx.is_scheduled": True})
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("zero"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                b[v] = T.float32(0)
            with T.sblock("add"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                b[v] = b[v] + a[v]


@T.prim_func(private=True, s_tir=True)
def _read_by_every_thread(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    T.func_attr({"tirx.noalias": True, "tirx.is_scheduled": True})
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("copy"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                b[v] = a[v]
        # Outside the thread loop: every thread of the block runs it.
        with T.sblock("first"):
            v = T.axis.spatial(8, bx)
            b[v * 128] = b[v * 128] + a[v * 128]


@T.prim_func(private=True, s_tir=True)
def _two_launches(
    a: T.Buffer((1024,), "float32"), c: T.Buffer((1024,), "float32"),
    b: T.Buffer((1024,), "float32"),
):
    T.func_attr({"tirx.noalias": True, "tirx.is_scheduled": True})
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("reverse"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                c[v] = a[1023 - v]
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("reverse_again"):
                v = T.axis.spatial(1024, bx * 128 + tx)
                b[v] = c[1023 - v]


@T.prim_func(private=True, s_tir=True)
def _lanes_swapped(a: T.Buffer((1024,), "float32"), b: T.Buffer((1024,), "float32")):
    T.func_attr({"tirx.noalias": True, "tirx.is_scheduled": True})
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for lane in T.vectorized(2):
                with T.sblock("swap"):
                    v = T.axis.spatial(1024, bx * 256 + tx * 2 + lane)
                    b[v] = a[v // 2 * 2 + 1 - v % 2]


def _proof(kernel, source=0, target=-1, delta=0):
    params = list(kernel.params)
    return gpu_store_over_source(gpu_kernel(kernel), params[source], params[target], delta)


def test_an_elementwise_gpu_kernel_may_write_its_output_over_its_input():
    assert is_gpu_kernel(_elementwise)
    assert _proof(_elementwise) == ("trace", "")


def test_it_refuses_an_output_over_bytes_another_thread_reads():
    proof, reason = _proof(_shifted)

    assert proof is None
    assert "other threads read" in reason


def test_it_refuses_a_thread_that_writes_before_it_reads():
    proof, reason = _proof(_written_first)

    assert proof is None
    assert "before it last reads" in reason


def test_a_statement_outside_a_thread_loop_counts_for_every_thread():
    proof, reason = _proof(_read_by_every_thread)

    assert proof is None
    assert "other threads read" in reason


def test_launches_run_one_after_another():
    kernel = gpu_kernel(_two_launches)

    assert len(kernel.launches) == 2
    # a is read only by the first launch, b written only by the second.
    assert _proof(_two_launches, 0, 2) == ("order", "")
    # c is written by the first launch and read by the second, by other threads.
    assert _proof(_two_launches, 1, 2)[0] is None


def test_lanes_of_a_vectorised_loop_count_as_threads():
    proof, reason = _proof(_lanes_swapped)

    assert proof is None
    assert "other threads read" in reason


def test_a_kernel_it_cannot_model_is_refused_with_what_it_met():
    @T.prim_func(private=True, s_tir=True)
    def parallel(a: T.Buffer((64,), "float32"), b: T.Buffer((64,), "float32")):
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            for i in T.parallel(64):
                with T.sblock("copy"):
                    v = T.axis.spatial(64, i)
                    b[v] = a[v]

    proof, reason = _proof(parallel)

    assert proof is None
    assert "parallel loop" in reason


def test_a_shared_pointer_kernel_reads_and_writes_through_its_input_alone():
    shared = share_pointer(_elementwise, 0, 1).with_attr("global_symbol", "double")

    module = tvm.compile(tvm.IRModule({"double": shared}), target=tvm.target.Target(CUDA))

    source = next(m for m in module.mod.imports if m.kind == "cuda").inspect_source()
    (signature,) = {line for line in source.splitlines() if "__global__" in line and "{" in line}
    # One pointer: nothing left for the compiler to assume does not alias it.
    assert "a_ptr" in signature and "b_ptr" not in signature


@pytest.mark.slow
@pytest.mark.parametrize(
    "source",
    [
        ModelSource("zoo:residual_cnn", {"channels": 4, "resolution": 16, "blocks": 1}),
        ModelSource("zoo:bert_tiny", {"seq": 8, "layers": 1, "hidden": 16, "heads": 2}),
    ],
    ids=["residual_cnn", "bert_tiny"],
)
def test_in_place_through_one_pointer_matches_the_stock_build_on_the_cpu(
    source, monkeypatch
):
    # The GPU's pointer sharing, built for the CPU where outputs can be checked here.
    shared = []

    def sharing(*args, **kwargs):
        rewrites = find_rewrites(*args, share_pointers=True, **kwargs)
        shared.append(len(rewrites.shared))
        return rewrites

    monkeypatch.setattr(planning_strategy, "find_rewrites", sharing)

    reports = {r.strategy: r for r in compile_model(
        source, [STOCK, "best-fit+rewrites"], repeat=1, memory_configs=(),
    )}

    rewritten = reports["best-fit+rewrites"]
    assert rewritten.error is None
    assert shared and shared[0] > 0
    assert rewritten.outputs_match is True
    assert rewritten.max_abs_diff == 0.0

