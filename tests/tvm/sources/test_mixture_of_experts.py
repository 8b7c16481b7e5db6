"""Mixtures of experts as a deployment compiles them: transformers' blocks (which loop over
the experts the router hit, a loop torch.export refuses) export in fixed shapes, plan, build
and match the original PyTorch module; the Result says what the plan assumes of routing;
a block whose routing the fixed-shape form does not reproduce is refused by name."""

from pathlib import Path

import pytest
import torch

from planner.report import StrategyReport, parse_report
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource, ModelSourceError, build_network
from planner.tvm.sources.experts import (
    _data_dependent_shapes,
    find_blocks,
    fixed_shape_experts,
)
from planner.tvm.sources.handover import ImportedError, load_imported, save_imported
from tests.tvm import torch_models

MODELS = Path(__file__).parents[1] / "torch_models.py"


def test_the_loop_over_experts_does_not_export_and_the_fixed_shape_form_does():
    model, (ids,) = torch_models.mixtral()
    seq = torch.export.Dim("seq", min=2, max=32)
    # The premise: transformers' own block is refused (were it not, this module is moot).
    with pytest.raises(Exception, match="(?i)data.dependent|guard|nonzero|unbacked"):
        torch.export.export(model, (ids,))

    (block, *_) = find_blocks(model)
    with torch.no_grad(), fixed_shape_experts(model, (ids,)) as assumed:
        exported = torch.export.export(model, (ids,), dynamic_shapes=({1: seq},))
        longer = torch.randint(0, 64, (1, 24))
        fixed = exported.module()(longer)

    assert "forward" not in vars(block.module)  # the block is transformers' own again
    with torch.no_grad():
        assert torch.allclose(fixed, model(longer), atol=1e-5)
    [assumption] = assumed
    assert "2 blocks (of MixtralSparseMoeBlock; 4 experts, top-2)" in assumption


def test_mixtral_plans_builds_and_matches_pytorch_with_the_routing_assumption_said():
    reports = compile_model(
        ModelSource(f"{MODELS}:mixtral", {}), [STOCK, "best-fit+rewrites"], repeat=0,
        memory_configs=("naive",),
    )

    stock, rewrites = reports
    for report in reports:
        assert report.outputs_match is True, (report.strategy, report.error)
        # Checked against transformers' own block, loop and all, not the converted one.
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-4
        [assumption] = report.assumptions
        assert assumption.startswith("mixture of experts in fixed shapes, dense form: 2 blocks")
        assert parse_report(report.to_json()).assumptions == report.assumptions
    assert rewrites.planned_bytes < stock.planned_bytes
    # Measured too: the router's top-k is a runtime function the measuring process loads
    # beside TVM's runtime (it failed with "Cannot find function tvm.contrib.sort.topk").
    assert rewrites.measured["naive"]["inference_peak_bytes"] == rewrites.planned_bytes


def test_deepseek_v3s_grouped_router_and_shared_expert_match_pytorch():
    [report] = compile_model(
        ModelSource(f"{MODELS}:deepseek_v3_moe", {}), ["best-fit"], repeat=0, memory_configs=(),
    )

    assert report.outputs_match is True, report.error
    assert report.reference_max_abs_diff < 1e-4
    assert "1 block (of DeepseekV3MoE; 8 experts, top-2)" in report.assumptions[0]


def test_a_block_routed_by_a_sigmoid_is_known_by_what_it_computes():
    [report] = compile_model(
        ModelSource(f"{MODELS}:sigmoid_routed", {}), ["best-fit"], repeat=0, memory_configs=(),
    )

    assert report.outputs_match is True, report.error
    assert report.reference_max_abs_diff < 1e-5
    assert "1 block (of _SigmoidRouted; 4 experts, top-2)" in report.assumptions[0]


@pytest.mark.parametrize("factory", ["tanh_routed", "mixed_in_turn"])
def test_a_router_of_any_kind_is_the_blocks_own_up_to_its_dispatch(factory):
    # Neither a softmax nor a sigmoid top-k, nor a router named gate: the weights come from
    # the block's own code, run up to where it first reads routing data.
    [report] = compile_model(
        ModelSource(f"{MODELS}:{factory}", {}), ["best-fit"], repeat=0, memory_configs=(),
    )

    assert report.outputs_match is True, report.error
    assert report.reference_max_abs_diff < 1e-5
    assert "1 block (of _" in report.assumptions[0]


def test_a_block_that_is_not_a_weighting_of_its_experts_is_refused_naming_it():
    with pytest.raises(ModelSourceError) as refused:
        build_network(ModelSource(f"{MODELS}:on_doubled", {}))

    message = str(refused.value)
    said = "the mixture of experts _OnDoubled at the top of the model has no fixed-shape form"
    assert said in message, message
    assert "differs from the block by" in message
    assert "never replaced" in message  # what a user who writes it in fixed shapes gets


def test_a_block_written_in_fixed_shapes_is_never_replaced():
    model, inputs = torch_models.dense_by_hand()
    with torch.no_grad(), fixed_shape_experts(model, inputs) as assumed:
        assert "forward" not in vars(model)  # its own forward, not the fixed-shape form
    assert assumed == []

    [report] = compile_model(
        ModelSource(f"{MODELS}:dense_by_hand", {}), ["best-fit"], repeat=0, memory_configs=(),
    )
    assert report.outputs_match is True, report.error
    assert report.reference_max_abs_diff < 1e-5  # the 0.5 the standard form would miss
    assert report.assumptions == []


def test_the_assumption_crosses_the_sandbox_and_a_forged_one_is_refused(tmp_path):
    network = build_network(ModelSource(f"{MODELS}:mixtral", {"seq": 4}))
    save_imported(network.bind_weights(), tmp_path)
    assert load_imported(tmp_path, name="m").network.assumptions == network.assumptions

    meta = tmp_path / "network.json"
    meta.write_text(meta.read_text().replace('"assumptions": [', '"assumptions": [' + "1, "))
    with pytest.raises(ImportedError, match="assumptions is not a short list of texts"):
        load_imported(tmp_path, name="m")


def test_a_report_with_assumptions_that_are_not_texts_is_refused():
    data = StrategyReport(model="m", strategy="none", assumptions=["fine"]).to_json()
    data["assumptions"] = [{"not": "text"}]
    with pytest.raises(ValueError, match="assumptions is not a list of texts"):
        parse_report(data)


def test_a_block_that_exports_only_with_sizes_read_from_the_data_is_still_converted():
    # OLMoE's block exports as it is (where's sizes become unbacked symbols), which TVM's
    # importer refuses: exporting is not enough to be left alone, fixed shapes are.
    model, inputs = torch_models.index_added()
    torch.export.export(model, inputs)  # the premise: export takes it

    with torch.no_grad(), fixed_shape_experts(model, inputs) as assumed:
        assert "forward" in vars(model)
    assert assumed and "_IndexAdded" in assumed[0]


def _second_input(inputs):
    torch.manual_seed(1)
    (first,) = inputs
    return (torch.randint(0, 64, first.shape) if not first.is_floating_point()
            else torch.randn(first.shape),)


@pytest.mark.parametrize("factory, block", [
    # GPT-OSS: no ModuleList, a router class of its own, its experts indexed out of stacked
    # tensors in a loop over the experts hit (planned and built in the sweep's fast subset).
    ("gpt_oss", "GptOssMLP"),
    # The router counts each expert's tokens itself (.tolist()): the block around it is
    # the one whose output the experts make.
    ("granitemoe", "GraniteMoeMoE"),
    # Tokens sorted by expert, cut by counts, the top-k count read again to un-sort.
    ("sorted_stacked", "_SortedStacked"),
])
def test_a_routed_block_exports_in_fixed_shapes_and_computes_as_before(factory, block):
    model, inputs = getattr(torch_models, factory)()
    # The premise: as written, export refuses it or takes it only with sizes read from the
    # data, which TVM's importer refuses.
    try:
        program = torch.export.export(model, inputs)
    except Exception as exc:  # noqa: BLE001 - torch's own error types vary by where it stops
        assert "data" in str(exc).lower() or "u0" in str(exc), exc
    else:
        assert _data_dependent_shapes(program)
    with torch.no_grad(), fixed_shape_experts(model, inputs) as assumed:
        exported = torch.export.export(model, inputs)
    assert f"(of {block}; 4 experts, top-2)" in assumed[0]

    other = _second_input(inputs)  # routed otherwise: the routing is not baked in
    with torch.no_grad():
        got, want = exported.module()(*other), model(*other)
    assert torch.allclose(got, want, atol=1e-5), float((got - want).abs().max())
    assert not any(node.target is torch.ops.aten.nonzero.default
                   for node in exported.graph.nodes)


def test_a_block_whose_experts_depend_on_their_load_is_refused_naming_it():
    # Every token on every expert changes each expert's load, so no fixed-shape form is it.
    with pytest.raises(ModelSourceError) as refused:
        build_network(ModelSource(f"{MODELS}:by_capacity", {}))

    message = str(refused.value)
    assert "the mixture of experts _ByCapacity at the top of the model" in message, message
    assert "differs from the block by" in message


def test_the_grouped_form_holds_what_a_grouped_gemm_deployment_holds():
    # Four experts 8 -> 512 -> 8, 16 tokens, top-2: the experts' rows are the memory. A
    # grouped-GEMM deployment, counted by hand at its widest point (the first expert layer,
    # its ReLU in place): the 32 rows' 512-wide activations, the 32 sorted rows it reads,
    # the rows' sort order and expert numbers (int64), and the top-2 weights kept for the
    # sum.
    tokens, top_k, width, inner = 16, 2, 8, 512
    rows = tokens * top_k
    by_hand = 4 * rows * inner + 4 * rows * width + 2 * 8 * rows + 4 * tokens * top_k

    source = f"{MODELS}:wide_experts"
    [grouped] = compile_model(ModelSource(source, {}, moe="grouped"), ["best-fit+rewrites"],
                              repeat=0, memory_configs=())
    [dense] = compile_model(ModelSource(source, {}, moe="dense"), ["best-fit+rewrites"],
                            repeat=0, memory_configs=())

    for report in (grouped, dense):
        assert report.outputs_match is True, report.error
        assert report.reference_check == "PyTorch"
        assert report.reference_max_abs_diff < 1e-5
    assert grouped.intermediate_bytes == by_hand == 67_200
    assert "grouped form" in grouped.assumptions[0]
    assert f"tokens x top-{top_k} rows per buffer" in grouped.assumptions[0]
    # Dense: every expert's 16 rows, two experts' 512-wide activations live at once here.
    assert "dense form" in dense.assumptions[0]
    assert dense.intermediate_bytes >= 2 * 4 * tokens * inner


@pytest.mark.parametrize("factory", ["mixtral", "deepseek_v3_moe"])
def test_transformers_blocks_plan_grouped_and_match_pytorch(factory):
    # Mixtral's forward replaced, DeepSeek-V3's moe method (its shared expert added by its
    # own code): each row through its own expert's weights, one grouped matmul per layer.
    [report] = compile_model(ModelSource(f"{MODELS}:{factory}", {}, moe="grouped"),
                             ["best-fit"], repeat=0, memory_configs=())

    assert report.outputs_match is True, report.error
    assert report.reference_max_abs_diff < 1e-4
    assert "grouped form" in report.assumptions[0]


def test_the_grouped_form_of_experts_held_in_the_blocks_own_code_is_refused_naming_dense():
    with pytest.raises(ModelSourceError) as refused:
        build_network(ModelSource(f"{MODELS}:gpt_oss", {}, moe="grouped"))
    message = str(refused.value)
    assert "GptOssMLP" in message and 'moe = "dense"' in message, message


def test_an_unknown_form_is_refused():
    with pytest.raises(ModelSourceError, match="unknown form of mixture of experts 'sparse'"):
        build_network(ModelSource(f"{MODELS}:mixtral", {}, moe="sparse"))


def test_a_job_computes_the_form_the_manifest_picked():
    # The worker's job file carries the form: the sandboxed import builds it so.
    from planner.job_spec import JobSpec
    from planner.tvm.job import run_compile

    job = JobSpec.from_json({
        "model": "wide", "source": "torch_models.py:wide_experts", "strategies": ["best-fit"],
        "repeat": 0, "memory_configs": [], "base_dir": str(MODELS.parent), "moe": "grouped",
    })
    [report] = run_compile(job)

    assert report.outputs_match is True, report.error
    assert "grouped form" in report.assumptions[0]
