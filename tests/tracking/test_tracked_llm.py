"""A repository's LLM deployment, tracked per commit through the sandbox like any model.

The example repository's decoder (``relax.frontend.nn`` with TVM's paged KV cache) is
tracked at two context windows, beside a Llama-style decoder whose weights come from
transformers: the import runs the model files (and transformers) in the sandbox and hands
over each point's module, weights and the framework's logits; the compile, which imports
nothing of the repository, plans, builds, checks and measures every function. Runs execute
in process (the embedded default); every compile still goes through the sandbox.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from django.urls import reverse

from dashboard import actions, gitrepo
from dashboard.models import Alert, Model, Result, Run
from tests.helpers import record_head

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tracked-repository"

LLAMA = '''from planner.tvm.llm.decoders import DecoderConfig, decoder_deployment


def build(context_window=128, prefill_chunk=32):
    return decoder_deployment(DecoderConfig(
        layers=1, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=256,
        context_window=context_window, prefill_chunk=prefill_chunk,
    ))
'''

FUNCTIONS = {"prefill", "decode", "batch_prefill", "batch_decode"}


def _example_entry() -> str:
    """The example manifest's commented decoder entry, uncommented, at a test's size."""
    text = (EXAMPLE / "peakwatch.toml").read_text()
    block = text[text.index('# name = "decoder"') - len("# [[models]]\n"):]
    entry = "\n".join(line.removeprefix("# ") for line in block.strip().splitlines())
    entry = re.sub(r"context_window = \[[0-9, ]+\]", "context_window = [128, 256]", entry)
    return entry + '\nparams = { layers = 1, hidden = 64, heads = 4, vocab = 256 }\n'


def test_an_llm_deployment_is_tracked_per_commit_with_every_function_measured(
    empty_repo, client, django_capture_on_commit_callbacks
):
    (empty_repo.path / "models").mkdir()
    shutil.copy(EXAMPLE / "models" / "decoder.py", empty_repo.path / "models" / "decoder.py")
    empty_repo.write("models/llama.py", LLAMA)
    empty_repo.write("peakwatch.toml", (
        '[suite]\nstrategies = ["tvm-stock", "best-fit+rewrites"]\nboards = ["cpu"]\n\n'
        + _example_entry()
        + '\n[[models]]\nname = "llama"\nsource = "models/llama.py:build"\n'
    ))
    empty_repo.commit("Track the example decoder and a Llama-style one")
    commit = record_head(empty_repo.path, "llm")

    with django_capture_on_commit_callbacks(execute=True):
        run = actions.start_run(commit)  # eager: it runs here and now

    run.refresh_from_db()
    results = list(Result.objects.filter(run=run).select_related("model", "strategy"))
    assert len(results) == 6, [(r.model.name, r.strategy.name, r.shape_label) for r in results]
    for result in results:
        assert result.status == Result.Status.OK, result.error
        assert result.outputs_match is True
    assert run.status == Run.Status.SUCCEEDED, run.error

    figures = {
        (r.model.name, r.strategy.name, r.shape_point.get("context_window")): r
        for r in results
    }
    for result in figures.values():
        llm = result.details["llm"]
        assert set(llm["functions"]) == FUNCTIONS
        # The figures of a Result are the worst function's, which the breakdown names.
        assert result.planned_bytes == llm["temporary_bytes"]
        assert llm["functions"][llm["worst_function"]]["planned_bytes"] == result.planned_bytes
        for function in llm["functions"].values():
            assert function["measured_peak_bytes"] and function["latency_ms"] > 0
        # The cache's pages, measured through the shim, are its formula to the byte.
        cache = llm["kv_cache"]
        assert cache["pages_bytes"] == cache["formula_bytes"]
        assert llm["total_bytes"] == (
            llm["params_bytes"] + cache["allocated_bytes"] + llm["temporary_bytes"]
        )
    for context in (128, 256):
        stock = figures[("decoder", "tvm-stock", context)]
        rewritten = figures[("decoder", "best-fit+rewrites", context)]
        assert rewritten.planned_bytes < stock.planned_bytes
        assert stock.details["reference_check"] == (
            "no reference: the deployment has no framework model"
        )
    # A longer context holds more pages, and plans no more temporary memory.
    short, long = (figures[("decoder", "tvm-stock", c)].details["llm"] for c in (128, 256))
    assert long["kv_cache"]["formula_bytes"] == 2 * short["kv_cache"]["formula_bytes"] - (
        short["kv_cache"]["formula_bytes"] // short["kv_cache"]["pages"]
    )
    assert long["temporary_bytes"] == short["temporary_bytes"]
    # Upper-bound planning's reservation (TVM's estimate at the largest chunk) on every
    # point, for the over-allocation table as on any shape axis.
    for context in (128, 256):
        for strategy in ("tvm-stock", "best-fit+rewrites"):
            reserved = figures[("decoder", strategy, context)].reserved_at_bound_bytes
            assert reserved == long["tvm_estimate_bytes"] > 0
    # transformers ran in the import sandbox; the compile checked TVM's build against it.
    llama = figures[("llama", "tvm-stock", None)]
    assert llama.details["reference_check"] == "matches transformers at every step (8 steps)"

    # The next commit widens the decoder: every function needs more, each alert says which
    # function grew most, and the pages show the breakdown per commit and per function.
    toml = empty_repo.read("peakwatch.toml")
    empty_repo.write("peakwatch.toml", toml.replace("hidden = 64,", "hidden = 96,"))
    empty_repo.commit("Widen the decoder")
    info = gitrepo.commit_info(empty_repo.path, "HEAD")
    wider = actions.record_commit(
        commit.repository, sha=info.sha, parent_sha=commit.sha, branch="main",
        author=info.author, message=info.message, committed_at=info.committed_at,
    )
    with django_capture_on_commit_callbacks(execute=True):
        second = actions.start_run(wider)
    second.refresh_from_db()
    assert second.status == Run.Status.SUCCEEDED, second.error

    alerts = Alert.objects.filter(commit=wider, model__name="decoder", kind="bytes")
    assert {(a.strategy.name, a.shape_label) for a in alerts} == {
        (s, f"context_window={c},prefill_chunk=32")
        for s in ("tvm-stock", "best-fit+rewrites") for c in (128, 256)
    }
    for alert in alerts:
        assert re.fullmatch(
            r"(prefill|decode|batch_prefill|batch_decode) grew most: [0-9,]+ B → [0-9,]+ B; "
            r"worst function (prefill|decode|batch_prefill|batch_decode)",
            alert.function_note,
        ), alert.function_note
    assert not Alert.objects.filter(commit=wider, model__name="llama").exists()

    decoder = Model.objects.get(name="decoder")
    page = client.get(decoder.get_absolute_url()).content.decode()
    table = page[page.index("data-llm-table"):page.index("</table>", page.index("data-llm-table"))]
    for sha in (commit.sha, wider.sha):
        assert table.count(f'data-commit="{sha}"') == 4  # 2 strategies x 2 points
    assert table.count("data-worst") == 8
    for function in FUNCTIONS:
        assert f'data-function="{function}"' in table
    # TVM's estimate beside what the worst function really held, and by how much they differ.
    assert len(re.findall(r"data-measured-over-estimate>[0-9]+\.[0-9]{2}x<", table)) == 8

    compare = client.get(reverse("compare-commits", args=["llm", commit.sha, wider.sha]))
    text = compare.content.decode()
    assert text.count("data-llm-parts") == 6  # every LLM row: 2 x 2 of the decoder, 2 of llama
    assert 'data-llm-part="function:decode"' in text and "grew most" in text
    alerts_page = client.get(reverse("alerts") + f"?repository=llm&commit={wider.sha}")
    assert alerts_page.content.decode().count("data-alert-function") == 4
