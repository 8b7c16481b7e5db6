"""TVM's stock build, the reference every strategy is checked against, is itself checked
against the framework the model came from; a NaN never reads as a match or as 0."""

from pathlib import Path

import numpy as np
import pytest

from planner.tvm.build import execute
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "rewrite_models.py"


def test_a_nan_on_both_sides_is_a_nan_difference_and_no_match():
    nan = np.array([np.nan, 1.0], dtype=np.float32)

    match, worst = execute.compare_outputs([nan], [nan.copy()], rtol=1e-5, atol=1e-6)

    assert match is False
    assert np.isnan(worst)
    assert execute.describe_diff(worst) == "NaN"


def test_a_model_whose_tvm_build_returns_nan_fails_every_strategy_saying_so():
    # The traced graph adds a NaN that PyTorch's eager run does not (Falcon-7B's multi-query
    # attention did this for real until negative indices were converted).
    reports = compile_model(
        ModelSource(f"{MODELS}:nan_in_build", {}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error == "check failed: TVM's build of this model returns NaN", report.error
        assert report.outputs_match is not True
        assert report.max_abs_diff is None


@pytest.mark.slow
def test_falcon_with_multi_query_attention_matches_pytorch():
    # It picks its key and value heads with fused_qkv[..., [-2], :] and [..., [-1], :]:
    # negative indices TVM's importer handed to take as they were (NaN in every logit in one
    # process, 0.885 off in another).
    reports = compile_model(
        ModelSource(f"{MODELS}:falcon_multi_query", {}), [STOCK, "best-fit+rewrites"],
        repeat=0, memory_configs=(),
    )

    for report in reports:
        assert report.outputs_match is True, (report.strategy, report.error)
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-4


def test_negative_indices_pick_the_rows_torch_picks():
    (report,) = compile_model(
        ModelSource(f"{MODELS}:negative_indices", {}), [STOCK], repeat=0, memory_configs=(),
    )

    assert report.outputs_match is True, report.error
    assert report.reference_max_abs_diff == 0.0


def test_a_negative_select_reads_the_element_torch_reads():
    # x[..., -1] read the element before each row (the first from before the tensor):
    # Mamba2's chunked scan 0.0275 off PyTorch, Falcon-H1's planned build NaN at times.
    reports = compile_model(
        ModelSource(f"{MODELS}:last_along", {}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.outputs_match is True, report.error
        assert report.reference_max_abs_diff == 0.0


@pytest.mark.slow
def test_a_small_decoder_records_how_far_tvm_is_from_pytorch():
    reports = compile_model(
        ModelSource(f"{MODELS}:llama", {"seq": 8}), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.ok, report.error
        assert report.reference_check == "PyTorch"
        assert 0 <= report.reference_max_abs_diff < 1e-4


def test_bfloat16_outputs_compare_in_a_wider_type_to_one_rounding_step():
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    want = np.array([1.0, 2.0, -3.0], dtype=bf16)
    one_step = np.array([1.0078125, 2.0, -3.0], dtype=bf16)  # the next bfloat16 above 1
    off = np.array([1.1, 2.0, -3.0], dtype=bf16)

    assert execute.compare_outputs([want], [one_step], rtol=1e-3, atol=1e-4)[0] is True
    match, worst = execute.compare_outputs([want], [off], rtol=1e-3, atol=1e-4)
    assert match is False and worst == pytest.approx(0.1015625)  # 1.1 is 1.1015625 there


def test_a_bfloat16_model_is_checked_against_pytorch():
    # numpy has no bfloat16: PyTorch's outputs were refused ("unsupported ScalarType"), and
    # such a model was never checked at all.
    (report,) = compile_model(
        ModelSource(f"{MODELS}:bfloat16_block", {}), [STOCK], repeat=0, memory_configs=(),
    )

    assert report.reference_check == "PyTorch", report.reference_check
    assert report.reference_max_abs_diff is not None and report.outputs_match is True


def test_a_bfloat16_model_that_disagrees_with_pytorch_fails_saying_by_how_much():
    (report,) = compile_model(
        ModelSource(f"{MODELS}:bfloat16_block", {"scale": 1.5}), [STOCK], repeat=0,
        memory_configs=(),
    )

    assert (report.error or "").startswith(
        "check failed: TVM's build of this model differs from PyTorch by"
    ), report.error
    # With the outputs' own scale, to tell rounding in large values from a wrong operator.
    assert "; its outputs reach " in report.error
