"""The fast subset of benchmarks/model_sweep.py (issue 59): ten transformers architectures,
one per failure class this part fixed, built by the sweep's own model file (tiny, random
weights, from the architecture's configuration class), each through tvm-stock and
best-fit+rewrites and checked against PyTorch. The whole sweep and its table are in
docs/benchmarks.md."""

import importlib.util
from pathlib import Path

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[3] / "benchmarks" / "model_sweep_models.py"

#: (architecture, the class of failure it stood for, what its Result must say it assumed)
SUBSET = [
    ("bamba", "a data-dependent guard in transformers' mask helper", "data-dependent branch"),
    ("gemma3", "x[mask] = value with a boolean mask, refused by TVM's importer", ""),
    ("llama4_text", "integer promotion and a fill of -inf TVM cannot legalize", ""),
    ("falcon_mamba", "a buffer registered as an nn.Parameter", ""),
    ("phimoe", "an MoE routed by a sparse mixer; a rotary table sized by .item()",
     "mixture of experts in fixed shapes"),
    ("olmoe", "an MoE block that exports only with sizes read from the data",
     "mixture of experts in fixed shapes"),
    ("gpt_oss", "an MoE with stacked expert weights and a router class of its own",
     "mixture of experts in fixed shapes"),
    ("granitemoe", "an MoE whose router reads the routing itself (.tolist())",
     "mixture of experts in fixed shapes"),
    ("aria_text", "an MoE sorted by expert and cut by counts, its top-k read again",
     "mixture of experts in fixed shapes"),
    ("mamba2", "x[..., -1] (a negative select) counted from the end", ""),
]


@pytest.fixture(scope="module")
def transformers_available():
    if importlib.util.find_spec("transformers") is None:
        pytest.fail("transformers is not installed: bash .ci/setup --test installs it")


@pytest.mark.parametrize(("arch", "why", "assumed"), SUBSET, ids=[row[0] for row in SUBSET])
def test_the_architecture_plans_and_matches_pytorch(transformers_available, arch, why, assumed):
    reports = compile_model(
        ModelSource(f"{MODELS}:model", {"family": "causal-lm", "arch": arch}),
        [STOCK, "best-fit+rewrites"], repeat=0, memory_configs=(),
    )

    for report in reports:
        assert report.error is None, f"{arch} ({why}): {report.error}"
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        if assumed:
            assert any(assumed in line for line in report.assumptions), report.assumptions
    stock, planned = reports
    assert planned.planned_bytes <= stock.planned_bytes
