"""Models with symbolic dimensions are planned for their upper bounds."""

import pytest
import tvm

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.plan.extract import ExtractionError, upper_bound
from planner.tvm.sources import ModelSource

pytestmark = pytest.mark.slow


def test_a_dynamic_model_is_planned_at_its_bound_like_the_static_one():
    params = {"channels": 4, "resolution": 24, "depth": 2}
    dynamic = {r.strategy: r for r in compile_model(
        ModelSource("zoo:small_cnn", {**params, "dynamic": True}), [STOCK, "best-fit"],
        repeat=1, memory_configs=())}
    static = {r.strategy: r for r in compile_model(
        ModelSource("zoo:small_cnn", params), [STOCK, "best-fit"], repeat=1,
        memory_configs=(), lift_temporaries=False)}

    for strategy in (STOCK, "best-fit"):
        assert dynamic[strategy].outputs_match is True
        assert dynamic[strategy].shape_bounds == {"h": 24, "w": 24}
        assert dynamic[strategy].intermediate_bytes == static[strategy].intermediate_bytes


def test_it_bounds_shape_arithmetic_and_names_a_missing_bound():
    h = tvm.tirx.Var("h", "int64")
    conv_out = tvm.tirx.floordiv(h + 2 - 3, 2) + 1

    assert upper_bound(conv_out, {"h": 32}) == 16
    with pytest.raises(ExtractionError, match="symbolic dimension h has no upper bound"):
        upper_bound(conv_out, {})


def test_kernel_temporaries_of_a_dynamic_model_are_planned_at_their_bounds():
    params = {"channels": 4, "resolution": 24, "depth": 2}
    strategies = [STOCK, "best-fit+rewrites"]
    dynamic = {r.strategy: r for r in compile_model(
        ModelSource("zoo:small_cnn", {**params, "dynamic": True}), strategies, repeat=1,
        memory_configs=())}
    static = {r.strategy: r for r in compile_model(
        ModelSource("zoo:small_cnn", params), strategies, repeat=1, memory_configs=())}

    # TVM's workspace pool is counted from the built kernels, a symbolic kernel's requests
    # sized at each call's bounds: the same pool as the static build's. Lifting places the
    # temporaries in the arena, each call allocating them in its own symbols.
    assert (dynamic[STOCK].kernel_workspace_source, static[STOCK].kernel_workspace_source) == (
        "counted", "counted"
    )
    assert dynamic[STOCK].kernel_workspace_bytes == static[STOCK].kernel_workspace_bytes > 0
    unified = dynamic["best-fit+rewrites"]
    assert unified.outputs_match is True, unified.error
    assert unified.kernel_workspace_bytes == 0
    assert unified.intermediate_bytes == static["best-fit+rewrites"].intermediate_bytes
    assert unified.intermediate_bytes > dynamic[STOCK].intermediate_bytes
