"""Complex arithmetic as real pairs: the rotary embeddings written with view_as_complex,
polar and view_as_real (DeepSeek-V2) import, build and match PyTorch; a complex operation
that is not converted is refused by name before the import."""

from pathlib import Path

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource, ModelSourceError, build_network

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_a_complex_rotary_embedding_matches_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:complex_rotary", {}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.outputs_match is True, (report.strategy, report.error)
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-5


def test_a_complex_operation_without_a_conversion_is_refused_by_name():
    with pytest.raises(ModelSourceError) as refused:
        build_network(ModelSource(f"{MODELS}:complex_rotary", {"reduce": True}))

    message = str(refused.value)
    assert message.startswith("import failed: torch.export exported it; sum.dim_IntList is "
                              "handed a complex tensor"), message


@pytest.mark.slow
def test_deepseek_v2_attention_builds_and_matches_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:deepseek_v2", {}), [STOCK, "best-fit+rewrites"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.outputs_match is True, (report.strategy, report.error)
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-4
