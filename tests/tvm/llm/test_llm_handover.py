"""What a repository's process hands over of an LLM deployment is checked before use.

The import phase (planner.tvm.job) writes a folder per point; the compile phase reads it
back with :func:`planner.tvm.llm.handover.load`, which refuses whatever the deployment
would not have written, by name, and replays the framework's logits only for the tokens
they were computed on. (A whole tracked run: tests/tracking/test_tracked_llm.py.)
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("tvm")

from planner.job_spec import JobSpec  # noqa: E402
from planner.shapes import parse_shapes  # noqa: E402
from planner.tvm import job  # noqa: E402
from planner.tvm.llm import handover as llm_imported
from planner.tvm.llm.deployment import reference_runs, scenario_tokens  # noqa: E402
from planner.tvm.sources.handover import ImportedError  # noqa: E402

MODEL = '''from planner.tvm.llm.decoders import DecoderConfig, decoder_deployment


def build(context_window=64, prefill_chunk=16):
    return decoder_deployment(DecoderConfig(
        layers=1, hidden=32, heads=2, kv_heads=1, intermediate=64, vocab=128,
        context_window=context_window, prefill_chunk=prefill_chunk,
    ))
'''

POINT = {"context_window": 64, "prefill_chunk": 16}


@pytest.fixture(scope="module")
def handed(tmp_path_factory):
    """The import phase's folder for a transformers-backed decoder at one point."""
    root = tmp_path_factory.mktemp("repo")
    (root / "models").mkdir()
    (root / "models" / "llama.py").write_text(MODEL)
    out = tmp_path_factory.mktemp("handed") / "network"
    spec = JobSpec(
        model="llama", source="models/llama.py:build", strategies=("tvm-stock",),
        phase="import", out=str(out), base_dir=str(root),
        shapes=parse_shapes({k: [v] for k, v in POINT.items()}).to_json(),
    )
    assert job.run(spec) == []
    return out


@pytest.fixture
def folder(handed, tmp_path):
    copy = tmp_path / "network"
    shutil.copytree(handed, copy)
    return copy


def test_the_handed_over_deployment_replays_the_frameworks_logits(folder):
    assert llm_imported.index(folder) == ([POINT], {})
    deployment = llm_imported.load(folder, 0, POINT, name="llama")
    assert deployment.config.context_window == 64 and deployment.reference.name == "transformers"
    prompt, steps = reference_runs(scenario_tokens(deployment.config, 0))[0]
    logits = deployment.reference.run(prompt, steps)
    assert len(logits) == len(steps) + 1 and logits[0].shape == (128,)
    # Other tokens were never run through the framework: nothing is made up for them.
    with pytest.raises(RuntimeError, match="other tokens"):
        deployment.reference.run(prompt[:-1], steps)


def _meta(folder):
    return json.loads((folder / "0" / llm_imported.META_FILE).read_text())


def _write_meta(folder, meta):
    (folder / "0" / llm_imported.META_FILE).write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m["config"].update(context_window=128), "context_window 128, not the point"),
        (lambda m: m["config"].update(page_size=32), "page_size must be 16"),
        (lambda m: m["config"].update(layers="2"), "layers must be a positive integer"),
        (lambda m: m["config"].update(backdoor=1), "does not have a decoder's fields"),
        (lambda m: m.update(functions=["prefill", "decode", "create_paged_kv_cache", "evil"]),
         "functions are not those of its module"),
        (lambda m: m["reference"]["runs"][0].update(prompt=[10**6]), "is not token ids"),
        (lambda m: m["reference"]["runs"][0].update(outputs=99), "has no logits"),
    ],
)
def test_a_forged_description_is_refused_by_name(folder, change, message):
    meta = _meta(folder)
    change(meta)
    _write_meta(folder, meta)
    with pytest.raises(ImportedError, match=message):
        llm_imported.load(folder, 0, POINT, name="llama")


def test_weights_that_are_not_the_modules_are_refused(folder):
    path = folder / "0" / llm_imported.PARAMS_FILE
    arrays = dict(np.load(path))
    arrays["arr_0"] = np.zeros((3, 3), dtype="float32")
    np.savez(path, **arrays)
    with pytest.raises(ImportedError, match="weight 0 does not match"):
        llm_imported.load(folder, 0, POINT, name="llama")


def test_a_module_that_calls_out_of_the_cache_is_refused(folder):
    path = folder / "0" / llm_imported.MODULE_FILE
    text = path.read_text().replace(
        "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
        "vm.builtin.attention_kv_cache_export_page_group",
    )
    path.write_text(text)
    with pytest.raises(ImportedError, match="export_page_group"):
        llm_imported.load(folder, 0, POINT, name="llama")


def test_a_single_function_compile_of_a_deployment_says_which_command_plans_it(tmp_path):
    from planner.tvm.sources import ModelSource, build_network
    from planner.tvm.sources.python_file import DeploymentReturned

    (tmp_path / "llama.py").write_text(MODEL)
    with pytest.raises(DeploymentReturned, match=r"plan it with `python3 -m planner llm "):
        build_network(ModelSource(f"{tmp_path / 'llama.py'}:build"))


def test_a_point_the_deployment_cannot_take_fails_alone(tmp_path):
    # A grid of context windows and prefill chunks holds a chunk larger than a context:
    # that point fails, saying why, and the others are planned and measured.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "llama.py").write_text(MODEL)
    out = tmp_path / "network"
    spec = JobSpec(
        model="llama", source="models/llama.py:build", strategies=("tvm-stock",), repeat=1,
        shapes=parse_shapes({"context_window": [16, 64], "prefill_chunk": [32]}).to_json(),
    )
    assert job.run(replace(spec, phase="import", out=str(out), base_dir=str(tmp_path))) == []
    reports = job.run(replace(spec, phase="compile", imported=str(out)))

    small, large = reports
    assert small.shape_point == {"context_window": 16, "prefill_chunk": 32}
    assert "prefill_chunk (32) is larger than the context window (16)" in small.error
    assert large.ok and large.outputs_match is True, large.error
    assert large.reference_check == "matches transformers at every step (8 steps)"
