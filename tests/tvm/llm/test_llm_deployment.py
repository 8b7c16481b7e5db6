"""LLM deployments as TVM builds them: a decoder with a paged KV cache, every function
planned, checked against transformers step by step, and measured."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from planner.tvm.torch_libraries import prepare_torch_libraries  # noqa: E402

prepare_torch_libraries()

from planner.tvm.build.target import make_target  # noqa: E402
from planner.tvm.llm.decoders import (  # noqa: E402
    MODEL_FUNCTIONS,
    DecoderConfig,
    LLMError,
    Reference,
    decoder_deployment,
    load_deployment,
)
from planner.tvm.llm.deployment import compile_deployment, kv_cache_pages  # noqa: E402
from planner.tvm.plan import lowering  # noqa: E402
from planner.tvm.plan.kernel_temps import kernel_blocks  # noqa: E402
from planner.tvm.plan.rewrites import inline_copy_blocks  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[3] / "examples/tracked-repository/models/decoder.py"
TINY = DecoderConfig(
    layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=256,
    context_window=64, prefill_chunk=16, page_size=16, max_batch=2,
)


# Session-scoped: xdist may run another file's tests between two of this file's, which
# would build a module-scoped one again.
@pytest.fixture(scope="session")
def deployment():
    return decoder_deployment(TINY)


@pytest.fixture(scope="session")
def compiled(deployment):
    """The report, and every kernel each LLVM build compiled (TIR build by TIR build)."""
    import tvm

    built = []
    original = tvm.tirx.build

    def recording(mod, *args, **kwargs):
        built.append(list(mod.functions.items()))
        return original(mod, *args, **kwargs)

    tvm.tirx.build = recording
    try:
        report = compile_deployment(deployment, ["best-fit", "best-fit+rewrites"], repeat=1)
    finally:
        tvm.tirx.build = original
    return report, built


@pytest.fixture(scope="session")
def report(compiled):
    return compiled[0]


def test_every_function_of_every_strategy_plans_builds_and_matches_transformers(report):
    assert set(report.functions) == {"tvm-stock", "best-fit", "best-fit+rewrites"}
    for strategy, by_function in report.functions.items():
        assert list(by_function) == list(MODEL_FUNCTIONS), strategy
        for function, r in by_function.items():
            assert r.error is None, (strategy, function, r.error)
            assert r.outputs_match is True, (strategy, function)
            assert r.planned_bytes >= r.lower_bound_bytes > 0
            assert r.latency_ms["median"] > 0
    stock = report.functions["tvm-stock"]["decode"]
    # A prefill of a whole chunk, 3 decode steps, 2 sequences prefilled and decoded together.
    assert stock.reference_check == "matches transformers at every step (8 steps)"
    assert stock.reference_max_abs_diff < 1e-4


def test_each_distinct_kernel_is_compiled_once_across_functions_and_strategies(compiled):
    # Each function is planned alone, and its plan changes a few kernels (temporaries
    # lifted, noalias dropped): the kernels it leaves as they were, the KV cache's attention
    # among them, are the first library's machine code, not built again per function.
    import tvm_ffi

    report, built = compiled
    assert len(built) > 1  # later builds happened: each holds only what differs
    seen: dict[str, list] = {}
    for kernels in built:
        for gv, func in kernels:
            seen.setdefault(gv.name_hint, []).append(func)
    attention = [name for name in seen if "paged" in name or "attention" in name]
    assert attention and all(len(seen[name]) == 1 for name in attention)
    # Each function's plain and +rewrites build was a whole library of every kernel (9
    # libraries of about 42). A kernel may still be built twice where two functions change
    # it the same way and neither's library sits on the other's: here only shape
    # functions, a few integer stores each.
    twice = {n for n, funcs in seen.items() for i, f in enumerate(funcs)
             if any(tvm_ffi.structural_equal(f, g) for g in funcs[:i])}
    assert all(name.startswith("shape_func") for name in twice), twice
    assert sum(len(kernels) for kernels in built) < 3 * len(built[0])


def test_the_kv_cache_formula_is_what_the_cache_allocates_for_its_pages(report):
    cache = report.kv_cache
    pages = kv_cache_pages(TINY)
    # ceil(64 / 16) + 1 pages per layer, keys and values of 2 heads of 16 floats per token.
    assert pages["pages"] == 5
    assert cache["formula_bytes"] == 2 * 5 * 2 * 2 * 16 * 16 * 4 == cache["pages_bytes"]
    assert cache["page_tensors"] == TINY.layers
    assert cache["allocated_bytes"] == cache["pages_bytes"] + cache["working_bytes"]
    assert "warnings" not in cache


def test_the_worst_function_is_the_deployment_s_temporary_memory(report):
    for strategy in report.functions:
        worst, temporary = report.worst_function(strategy)
        assert temporary == max(r.planned_bytes for r in report.functions[strategy].values())
        assert report.total_bytes(strategy) == (
            report.params_bytes + report.kv_cache["allocated_bytes"] + temporary
        )
    assert report.temporary_bytes("best-fit+rewrites") < report.temporary_bytes("tvm-stock")
    assert report.tvm_estimate_bytes == max(
        r.intermediate_bytes for r in report.functions["tvm-stock"].values()
    )


def test_each_function_is_measured_at_its_bounds(report):
    for strategy, by_function in report.functions.items():
        for function, r in by_function.items():
            naive = r.measured["naive"]
            assert "error" not in naive, (strategy, function, naive)
            assert naive["params_bytes"] == report.params_bytes
            assert naive["kv_cache_bytes"] == report.kv_cache["allocated_bytes"]
            # The logits stay: what a call returns is held when it ends.
            assert naive["retained_bytes"] >= r.output_bytes > 0
            assert r.measured_peak_bytes >= r.output_bytes


def test_a_decode_step_holds_its_plan_and_the_cache_append_kernels_workspace(report):
    # The cache's own kernels run inside each attention call and no strategy plans them:
    # tir_kv_cache_transpose_append asks TVM's workspace pool for two 4-byte scalars
    # (``position``), a 4 KiB page each. With its kernels' temporaries in the arena,
    # +rewrites' decode step holds exactly its plan and those two pages.
    decode = report.functions["best-fit+rewrites"]["decode"]
    assert decode.kernel_workspace_bytes == 0
    assert decode.measured["naive"]["inference_peak_bytes"] == decode.planned_bytes + 2 * 4096


def test_the_split_of_a_fused_gate_and_up_projection_is_read_in_place(deployment):
    lowered = lowering.lower_to_allocations(deployment.mod, make_target("llvm"))
    inlined, kernels = inline_copy_blocks(lowered)
    split = [name for name in kernels if "split" in name]
    assert split
    for name in split:
        blocks = [b.name_hint for b in kernel_blocks(inlined[name])]
        assert not any(b.startswith("T_split_sections") for b in blocks), blocks
        before = [b.name_hint for b in kernel_blocks(lowered[name])]
        assert "T_split_sections" in before


def test_a_build_that_differs_names_the_step(deployment):
    real = deployment.reference

    def off_at_second_decode(prompt, steps):
        logits = real.run(prompt, steps)
        if len(logits) > 2:
            logits[2] = logits[2] + 1.0
        return logits

    wrong = replace(deployment, reference=Reference("transformers", off_at_second_decode))
    report = compile_deployment(wrong, [], repeat=1, measure=False)
    stock = report.functions["tvm-stock"]["decode"]
    assert stock.error == (
        "TVM's build differs from transformers: decode step 2 differs by 1"
    ), stock.error
    assert not report.ok


def test_weights_that_differ_fail_at_the_prefill(deployment):
    params = [p.copy() for p in deployment.params]
    index = deployment.param_names.index("layers.1.mlp.down_proj.weight")
    params[index] *= 3
    report = compile_deployment(replace(deployment, params=params), [], repeat=1,
                                measure=False)
    error = report.functions["tvm-stock"]["prefill"].error
    assert error.startswith("TVM's build differs from transformers: prefill differs by"), error


def test_a_qwen2_decoder_with_biased_projections_matches_too():
    config = replace(TINY, family="qwen2")
    deployment = decoder_deployment(config)
    assert "layers.0.self_attn.qkv_proj.bias" in deployment.param_names
    bias = deployment.params[deployment.param_names.index("layers.0.self_attn.qkv_proj.bias")]
    assert np.abs(bias).max() > 0  # transformers' init draws them: the check sees them
    report = compile_deployment(deployment, [], repeat=1, measure=False)
    for function, r in report.functions["tvm-stock"].items():
        assert r.error is None, (function, r.error)
    assert report.functions["tvm-stock"]["prefill"].reference_check.startswith("matches")


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(prefill_chunk=128), "prefill_chunk (128) is larger than the context window (64)"),
        (dict(heads=3), "hidden (64) must be a multiple of heads (3)"),
        (dict(page_size=8), "page_size must be 16: TVM"),
    ],
)
def test_a_wrong_configuration_is_refused_by_name(change, message):
    with pytest.raises(LLMError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replace(TINY, **change)
    with pytest.raises(LLMError, match="unknown decoder family 'gpt9'; known: llama, qwen2"):
        decoder_deployment(replace(TINY, family="gpt9"))


def test_a_model_file_s_own_decoder_plans_and_every_build_matches_tvm_s():
    deployment = load_deployment(
        EXAMPLE, "build", {"layers": 1, "hidden": 64, "vocab": 256},
        defaults={"context_window": 64, "prefill_chunk": 16, "not_taken": 1},
    )
    assert deployment.config.context_window == 64 and deployment.config.prefill_chunk == 16
    assert deployment.reference is None
    # best-fit shares tvm-stock's kernels: a second plan checked for the price of one build.
    report = compile_deployment(deployment, ["best-fit"], repeat=1, measure=False)
    for strategy, by_function in report.functions.items():
        assert list(by_function) == list(MODEL_FUNCTIONS)
        for function, r in by_function.items():
            assert r.error is None, (strategy, function, r.error)
            assert r.outputs_match is True
    stock = report.functions["tvm-stock"]["prefill"]
    assert stock.reference_check == "no reference: the deployment has no framework model"


def test_a_model_file_that_returns_something_else_is_told_what_to_return(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def build():\n    return 42\n")
    with pytest.raises(LLMError, match="wrong.py:build returned int; expected an LLMDeployment"):
        load_deployment(wrong, "build", {})
    broken = tmp_path / "broken.py"
    broken.write_text("def build(layers=1):\n    raise RuntimeError('no weights here')\n")
    with pytest.raises(LLMError, match="broken.py:build failed: RuntimeError: no weights here"):
        load_deployment(broken, "build", {})
    with pytest.raises(LLMError, match="has no function 'missing'"):
        load_deployment(broken, "missing", {})


def test_the_command_line_prints_the_memory_report():
    done = subprocess.run(
        [sys.executable, "-m", "planner", "llm", "--layers", "1", "--hidden", "64",
         "--heads", "4", "--kv-heads", "2", "--intermediate", "128", "--vocab", "256",
         "--context", "64", "--prefill-chunk", "16,128", "--repeat", "1", "--no-memory",
         "--strategy", "tvm-stock"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "KV cache" in done.stdout and "worst" in done.stdout, done.stdout
    assert "  tvm-stock: prefill " in done.stdout
    # A chunk the context cannot hold is skipped, said, and the rest is planned.
    assert "context 64, prefill chunk 128: skipped" in done.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "planner", "llm", "--context", "64", "--prefill-chunk", "128"],
        capture_output=True, text=True, timeout=600,
    )
    assert refused.returncode == 2
    assert "larger than the context window" in refused.stderr
