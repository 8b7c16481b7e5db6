"""A rewrite never leaves a module that does not build: proven sound, or not made."""

from pathlib import Path

import pytest
import tvm
from tvm import relax

import planner.tvm.plan.strategy as planning_strategy
from planner.tvm.build.target import make_target
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.plan import lowering
from planner.tvm.plan.extract import bindings_of
from planner.tvm.plan.kernel_temps import lift_kernel_temporaries
from planner.tvm.sources import ModelSource, build_network

pytestmark = pytest.mark.slow

MODELS = Path(__file__).parents[1] / "rewrite_models.py"


def source(factory: str, **params) -> ModelSource:
    return ModelSource(f"{MODELS}:{factory}", params)


def test_lifted_temporaries_that_share_a_name_keep_their_own_shapes():
    # Concatenating two batch-normed branches of 6 and 12 channels fuses both batch norms
    # into one kernel, whose temporaries are named alike (T_subtract, T_divide, ...).
    network = build_network(source("ghostnet"))
    lowered = lowering.lower_to_allocations(network.mod, make_target("llvm"))

    lifted, _ = lift_kernel_temporaries(lowered, network.entry)

    checked = 0
    for binding in bindings_of(lifted[network.entry]):
        call = binding.value
        if not (isinstance(call, relax.Call) and isinstance(call.op, relax.GlobalVar)):
            continue
        kernel = lifted[call.op]
        names = [p.name for p in kernel.params]
        if len(set(names)) == len(names):
            continue
        checked += 1
        for arg, param in zip(call.args, kernel.params, strict=True):
            expected = [int(d) for d in param.shape]
            assert [int(d) for d in arg.ty.shape] == expected, param.name
        # Each temporary is planned under its own name, and so timed by its own blocks.
        lifted_names = [a.name for a in call.args
                        if isinstance(a, relax.Var) and a.name.startswith(call.op.name_hint)]
        assert len(set(lifted_names)) == len(lifted_names)
    assert checked


@pytest.mark.parametrize("factory", ["ghostnet", "hrnet"])
def test_ghostnet_and_hrnet_style_networks_build_and_match_under_rewrites(factory):
    reports = {r.strategy: r for r in compile_model(
        source(factory), [STOCK, "best-fit+rewrites"], repeat=1, memory_configs=(),
    )}

    rewritten = reports["best-fit+rewrites"]
    assert rewritten.error is None
    assert rewritten.outputs_match is True
    assert rewritten.rewrites["inplace"]
    assert not [s for s in rewritten.rewrites["skipped"] if s["rewrite"] == "all"]


def test_a_rewritten_module_that_does_not_build_is_built_without_rewrites(monkeypatch):
    real_rewrite, real_finish = planning_strategy.rewrite_kernels, lowering.finish_lowering

    def poisoned_rewrite(mod, function, rewrites):
        # Stands for any rewrite TVM rejects late: a kernel no build accepts.
        mod = real_rewrite(mod, function, rewrites)
        functions = dict(mod.functions)
        functions[tvm.ir.GlobalVar("peakwatch_poison")] = next(
            f for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc))
        return tvm.IRModule(functions, attrs=mod.attrs)

    def finish(mod, target, *, stock_planner):
        if any(g.name_hint == "peakwatch_poison" for g in mod.functions):
            raise ValueError("Argument 12 type mismatch")
        return real_finish(mod, target, stock_planner=stock_planner)

    monkeypatch.setattr(planning_strategy, "rewrite_kernels", poisoned_rewrite)
    monkeypatch.setattr(lowering, "finish_lowering", finish)

    reports = {r.strategy: r for r in compile_model(
        source("hrnet", image=16), [STOCK, "best-fit+rewrites"], repeat=1, memory_configs=(),
    )}

    rewritten = reports["best-fit+rewrites"]
    assert rewritten.error is None and rewritten.outputs_match is True
    (skipped,) = rewritten.rewrites["skipped"]
    assert skipped["rewrite"] == "all" and "Argument 12 type mismatch" in skipped["reason"]
    assert rewritten.rewrites["inplace"] == []
