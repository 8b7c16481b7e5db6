"""The built-in zoo: real architectures that compile, plan and run correctly at small sizes."""

from __future__ import annotations

import pytest

from planner.tvm.sources import ModelSource, ModelSourceError, build_network
from planner.tvm.zoo import ZOO
from tests.tvm.conftest import compile_small

# Small enough for one compile each on a shared two-core machine, with every structural
# feature of the full network still present.
SMALL = {
    "resnet18": {"resolution": 32, "width": 0.25, "classes": 10},
    "mobilenet_v2": {"resolution": 32, "width": 0.25, "classes": 10},
    "densenet": {"resolution": 16, "growth": 4, "blocks": [2, 2], "classes": 10},
    "unet": {"resolution": 16, "width": 0.0625, "depth": 2},
    "bert_tiny": {"seq": 16},
    "mlp": {"features": 64, "hidden": [32, 16]},
}


def parameter_count(network) -> int:
    count = 0
    for shape in network.input_shapes[1:]:
        size = 1
        for dim in shape:
            size *= dim
        count += size
    return count


def test_it_registers_every_architecture_in_the_zoo():
    assert set(SMALL) <= set(ZOO)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_it_compiles_a_small_zoo_model_under_every_strategy(name):
    reports = compile_small(ModelSource(f"zoo:{name}", SMALL[name]))

    for strategy, report in reports.items():
        assert report.error is None, f"{strategy}: {report.error}"
        assert report.outputs_match is True, strategy
    assert reports["none"].planned_bytes >= reports["greedy-by-size"].planned_bytes


@pytest.mark.slow
def test_it_lowers_the_densenet_with_concatenations():
    from planner.tvm.build.target import make_target
    from planner.tvm.plan import lowering

    network = build_network(ModelSource("zoo:densenet", SMALL["densenet"]))
    lowered = lowering.lower_to_allocations(network.mod, make_target("llvm"))

    kernels = [gv.name_hint for gv in lowered.functions]
    assert sum("concatenate" in kernel for kernel in kernels) >= 2, kernels


@pytest.mark.parametrize(
    ("name", "params", "count"),
    [
        # Parameter counts of the published networks (torchvision for the CNNs); batch
        # norms count their scale and shift, as torchvision counts weight and bias.
        ("resnet18", {"resolution": 224, "width": 1.0}, 11_689_512),
        ("mobilenet_v2", {"resolution": 224, "width": 1.0}, 3_504_872),
        ("densenet", {"resolution": 224, "growth": 32, "blocks": [6, 12, 24, 16]}, 7_978_856),
        ("bert_tiny", {"seq": 128}, 396_544),
    ],
)
def test_it_builds_the_real_architectures_at_full_size(name, params, count):
    network = build_network(ModelSource(f"zoo:{name}", params))

    assert parameter_count(network) == count


def test_it_keeps_the_unet_output_at_the_input_resolution():
    network = build_network(ModelSource("zoo:unet", {"resolution": 32, "depth": 3}))
    output = network.mod["forward"].ret_ty

    assert [int(d) for d in output.shape.values] == [1, 2, 32, 32]


def test_it_scales_the_batch_of_the_input():
    network = build_network(ModelSource("zoo:mobilenet_v2", {"batch": 4, "resolution": 32}))

    assert network.input_shapes[0] == (4, 3, 32, 32)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("resnet18", {"resolution": 30}),
        ("unet", {"resolution": 20, "depth": 4}),
        ("mobilenet_v2", {"width": 0}),
        ("bert_tiny", {"hidden": 100, "heads": 3}),
        ("densenet", {"blocks": []}),
    ],
)
def test_it_rejects_parameters_the_architecture_cannot_take(name, params):
    with pytest.raises(ModelSourceError, match=f"bad parameters for zoo:{name}"):
        build_network(ModelSource(f"zoo:{name}", params))
