"""Plan diffs pair tensors by what they are, not by their allocation names: plans of real
compiles (small networks, TVM's CPU pipeline) with a layer inserted, a layer added at the
end, and plan.json files from before plans said what each tensor is."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboard import actions
from planner import plan_diff
from planner.plan_diff import diff_plans, operator_kind
from tests.regression.history import bytes_only, record_run

STRATEGIES = ["greedy-by-size", "best-fit+rewrites"]


def _compile(folder, source, network=None) -> dict[str, dict]:
    """Each strategy's plan.json of one compile, parsed."""
    from planner.tvm.compile import compile_model

    reports = compile_model(
        source, STRATEGIES, repeat=1, memory_configs=(), artifacts_dir=folder, network=network
    )
    assert all(r.ok for r in reports), [r.error for r in reports]
    return {r.strategy: json.loads(open(r.artifacts["plan.json"]).read()) for r in reports}


def _conv_stack(front_layer: bool = False, *, resolution: int = 16, strides=(1, 1, 2)):
    """Three convolutions and a 1x1 head; ``front_layer`` puts one more convolution (3 to 3
    channels, the same output shape as its input) before them, so every later allocation
    is renumbered: ``alloc`` names the new layer's result, ``alloc1`` what ``alloc`` was."""
    from tvm.relax.frontend import nn

    from planner.tvm.network import export_nn
    from planner.tvm.zoo.cnn import _ConvReLU

    class Stack(nn.Module):
        def __init__(self):
            layers = [_ConvReLU(3, 3)] if front_layer else []
            layers += [
                _ConvReLU(3, 8, stride=strides[0]), _ConvReLU(8, 8, stride=strides[1]),
                _ConvReLU(8, 16, stride=strides[2]),
            ]
            self.layers = nn.ModuleList(layers)
            self.head = nn.Conv2D(16, 10, 1)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    return export_nn("stack", Stack(), (1, 3, resolution, resolution)).bind_weights(0)


@pytest.fixture(scope="module")
def inserted(tmp_path_factory):
    """Plans of the conv stack without and with a layer in front, per strategy."""
    from planner.tvm.sources import ModelSource

    folder = tmp_path_factory.mktemp("inserted")
    source = ModelSource("stack.py:stack")
    return {
        "before": _compile(folder / "before", source, _conv_stack(False)),
        "after": _compile(folder / "after", source, _conv_stack(True)),
    }


@pytest.fixture(scope="module")
def sharper(tmp_path_factory):
    """Plans of a conv stack whose layers halve the resolution, at 16x16 and at 32x32: each
    layer at 32x32 has the shape the layer before it had at 16x16."""
    from planner.tvm.sources import ModelSource

    folder = tmp_path_factory.mktemp("sharper")
    return {
        resolution: _compile(
            folder / str(resolution), ModelSource("stack.py:stack"),
            _conv_stack(resolution=resolution, strides=(1, 2, 2)),
        )
        for resolution in (16, 32)
    }


@pytest.fixture(scope="module")
def deeper(tmp_path_factory):
    """Plans of zoo:small_cnn at depth 2 and depth 3, per strategy."""
    from planner.tvm.sources import ModelSource

    folder = tmp_path_factory.mktemp("deeper")
    params = {"channels": 4, "resolution": 16}
    return {
        depth: _compile(
            folder / str(depth), ModelSource("zoo:small_cnn", {**params, "depth": depth})
        )
        for depth in (2, 3)
    }


def _same_thing(change) -> bool:
    """Both sides of a pair are one role and one kind of operator."""
    before, after = change.producers
    return operator_kind(before) == operator_kind(after) == change.kind.split(".")[0]


def _what(plan: dict) -> dict[str, tuple]:
    """Each tensor's role, producer kind (a temporary's kernel and buffer), shape, dtype."""
    return {
        t["id"]: (t["role"], operator_kind(t["producer"]), t["id"].partition(".")[2],
                  t["shape"], t["dtype"])
        for t in plan["tensors"] + plan["outputs"]
    }


def test_plan_files_say_what_each_tensor_is(deeper):
    plan = deeper[3]["best-fit+rewrites"]

    roles = {t["role"] for t in plan["tensors"]}
    assert roles == {"intermediate", "temporary"}
    assert [o["role"] for o in plan["outputs"]] == ["output"]
    for tensor in plan["tensors"] + plan["outputs"]:
        assert isinstance(tensor["binding_index"], int)
        # Every tensor names its producer: a kernel's real output too, where its lifted
        # temporaries are passed after it.
        assert tensor["producer"].startswith("fused_conv2d"), tensor
    for temporary in (t for t in plan["tensors"] if t["role"] == "temporary"):
        assert temporary["id"].startswith(temporary["producer"] + ".")


def test_a_layer_inserted_in_front_is_new_and_every_other_tensor_stays_paired(inserted):
    diff = diff_plans(inserted["before"]["greedy-by-size"], inserted["after"]["greedy-by-size"])

    # Paired by name, alloc (8 channels) met alloc (the new 3-channel layer): "resized".
    assert diff["resized"] == 0
    assert [(c.status, c.id, c.kind, c.calls) for c in diff["changes"]] == [
        ("added", "alloc", "fused_conv2d_add_relu", (None, 1)),
    ]
    # The three older intermediates and the output, paired under their new names; their
    # lifetimes only moved later by the new layer's steps.
    assert diff["pairs"] == [
        ["alloc", "alloc1"], ["alloc1", "alloc2"], ["alloc2", "alloc3"], ["alloc3", "alloc4"],
    ]
    assert diff["unchanged"] == 4 and diff["removed"] == 0
    assert diff["changed_ids"] == {"base": [], "head": ["alloc"]}
    assert diff["matching"] == {"fallback": False, "notes": []}


def test_the_inserted_layers_lifted_temporaries_are_new_with_it(inserted):
    before, after = (inserted[side]["best-fit+rewrites"] for side in ("before", "after"))

    diff = diff_plans(before, after)

    added = [c for c in diff["changes"] if c.status == "added"]
    assert {c.role for c in added} == {"intermediate", "temporary"}
    assert all(c.producer == "fused_conv2d_add_relu" and c.calls == (None, 1) for c in added)
    assert len(added) == 1 + sum(
        t["producer"] == "fused_conv2d_add_relu" and t["role"] == "temporary"
        for t in after["tensors"]
    )
    assert diff["removed"] == 0
    # Everything else is paired with what it was, though kernels were renumbered
    # (fused_conv2d_add_relu is now fused_conv2d1_add1_relu1) along with allocations.
    what_before, what_after = _what(before), _what(after)
    assert len(diff["pairs"]) == len(what_before)
    assert all(what_before[a] == what_after[b] for a, b in diff["pairs"])
    assert ["fused_conv2d_add_relu.pad_temp", "fused_conv2d1_add1_relu1.pad_temp"] in diff["pairs"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unrelated_tensors_are_never_paired(deeper, strategy):
    diff = diff_plans(deeper[2][strategy], deeper[3][strategy])

    for change in diff["changes"]:
        if change.status == "changed":
            assert change.before["role"] == change.after["role"]
            assert _same_thing(change), change
    what_before, what_after = _what(deeper[2][strategy]), _what(deeper[3][strategy])
    assert all(what_before[a][:3] == what_after[b][:3] for a, b in diff["pairs"])
    # The third layer's result is new; the head's output is the same output, smaller.
    [new_layer] = [c for c in diff["changes"] if c.status == "added" and c.role == "intermediate"]
    assert (new_layer.producer, new_layer.calls) == ("fused_conv2d2_add2_relu2", (None, 3))
    [output] = [c for c in diff["changes"] if c.role == "output"]
    assert output.status == "changed" and output.fields["shape"] == [[1, 10, 8, 8], [1, 10, 4, 4]]
    assert output.producers == ("fused_conv2d2_add2", "fused_conv2d3_add3")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_new_resolution_pairs_each_layer_with_itself_not_with_the_one_now_its_shape(
    sharper, strategy
):
    before, after = sharper[16][strategy], sharper[32][strategy]
    # At 32x32 the second layer's result has the shape the first one's had at 16x16.
    first_then = next(t for t in before["tensors"] if t["id"] == "alloc")
    second_now = next(t for t in after["tensors"] if t["id"] == "alloc1")
    assert first_then["shape"] == second_now["shape"]

    diff = diff_plans(before, after)

    layers = [pair for pair in diff["pairs"] if "." not in pair[0]]
    assert layers == [["alloc", "alloc"], ["alloc1", "alloc1"], ["alloc2", "alloc2"],
                      ["alloc3", "alloc3"]]
    assert diff["matching"] == {"fallback": False, "notes": []}


def test_the_head_kernels_temporaries_are_gone_when_they_move_onto_the_stack(deeper):
    # At depth 3 the head's temporaries are under 1 KB: TVM keeps them on the stack.
    diff = diff_plans(deeper[2]["best-fit+rewrites"], deeper[3]["best-fit+rewrites"])

    gone = [c for c in diff["changes"] if c.status == "removed"]
    assert gone and all(c.role == "temporary" and c.producer == "fused_conv2d2_add2"
                        for c in gone)
    assert {c.base_id for c in gone} <= {t["id"] for t in deeper[2]["best-fit+rewrites"]["tensors"]}


def _as_written_before(plan: dict, *, producers: bool = True) -> dict:
    """``plan`` as plan.json was written before roles and graph positions (and, without
    ``producers``, before its tensors named one)."""
    drop = {"role", "binding_index"} | (set() if producers else {"producer"})
    return {
        **plan,
        "tensors": [{k: v for k, v in t.items() if k not in drop} for t in plan["tensors"]],
        "outputs": [{k: v for k, v in o.items() if k not in drop | {"producer"}}
                    for o in plan["outputs"]],
    }


def test_older_plan_files_are_paired_in_listed_order_and_the_diff_says_so(inserted):
    before = _as_written_before(inserted["before"]["best-fit+rewrites"])
    after = inserted["after"]["best-fit+rewrites"]

    diff = diff_plans(before, after)
    fresh = diff_plans(inserted["before"]["best-fit+rewrites"], after)

    # Listed order is graph order, names tell temporaries apart: the same pairs.
    assert [(c.status, c.base_id, c.head_id) for c in diff["changes"]] == [
        (c.status, c.base_id, c.head_id) for c in fresh["changes"]
    ]
    assert diff["matching"]["fallback"] is True
    notes = " ".join(diff["matching"]["notes"])
    assert "base plan.json was written before plans recorded each tensor's role" in notes
    # Its output names no producer: paired only where everything else agrees.
    assert ("1 tensor of the base plan names no producer: outputs were paired only where "
            "shape, dtype and place in the graph all agree") in notes


def test_tensors_without_producers_are_paired_only_where_shape_and_place_agree(deeper):
    before = _as_written_before(deeper[2]["greedy-by-size"], producers=False)
    after = _as_written_before(deeper[3]["greedy-by-size"], producers=False)

    diff = diff_plans(before, after)

    # The output changed shape: with no producer to go by, it is not guessed at.
    outputs = [c for c in diff["changes"] if c.role == "output"]
    assert sorted(c.status for c in outputs) == ["added", "removed"]
    assert all(c.status != "changed" or c.fields.keys() <= {"offset"} for c in diff["changes"])
    assert "tensors of the head plan name no producer" in " ".join(diff["matching"]["notes"])


def test_graphs_too_far_apart_to_align_at_least_cost_are_aligned_roughly_and_say_so(
    sharper, monkeypatch
):
    monkeypatch.setattr(plan_diff, "MAX_ALIGNED_CELLS", 1)

    diff = diff_plans(sharper[16]["greedy-by-size"], sharper[32]["greedy-by-size"])

    # Roughly, the longest stretch alike is kept: layers paired with the next one down.
    assert ["alloc", "alloc1"] in diff["pairs"]
    assert diff["matching"]["fallback"] is True
    assert "too many tensors to align at the least cost" in diff["matching"]["notes"][0]


# --- the page ------------------------------------------------------------------------------


@pytest.fixture
def plan_diff_page(db, deeper, tmp_path):
    """Two recorded results with small_cnn's plans at depth 2 and 3, best-fit+rewrites."""
    repository = actions.track_repository("tracked", "/nonexistent")
    figures = []
    for depth in (2, 3):
        path = tmp_path / f"{depth}.json"
        path.write_text(json.dumps(deeper[depth]["best-fit+rewrites"]))
        figures.append({("small-cnn", "best-fit+rewrites"): bytes_only(
            50_000 * depth, artifacts={"plan.json": str(path)})})
    base = record_run(repository, 0, figures[0])
    head = record_run(repository, 1, figures[1], parent=base.commit.sha)
    return base.results.get(), head.results.get()


@pytest.mark.django_db
def test_the_plan_diff_page_names_producers_and_says_new_and_gone(client, plan_diff_page):
    base, head = plan_diff_page

    html = client.get(reverse("plan-diff", args=[base.pk, head.pk])).content.decode()

    # The third layer's result: new, with its producer and its place among its calls.
    assert 'data-tensor="alloc2" class="added" data-producer="fused_conv2d2_add2_relu2"' in html
    assert ('<code>fused_conv2d2_add2_relu2</code> <span class="muted small">3rd call</span>'
            '<span class="sub"><code>alloc2</code></span>') in html
    assert '<span class="chip added">new</span>' in html
    # The head's last convolution result went onto the stack (512 B; TVM keeps a constant
    # size below 1 KiB there), so the base's is gone.
    assert ('data-tensor="fused_conv2d2_add2.conv2d_nchw_intermediate" class="removed" '
            'data-base-tensor="fused_conv2d2_add2.conv2d_nchw_intermediate" '
            'data-producer="fused_conv2d2_add2"') in html
    assert '<span class="chip removed">gone</span>' in html
    # The output is the same output under new names: alloc2 then, alloc3 now.
    assert 'data-tensor="alloc3" class="changed" data-base-tensor="alloc2"' in html
    assert "output <code>alloc2</code> → <code>alloc3</code>" in html
    assert 'kernel temporary <code>pad_temp</code>' in html
    assert 'data-matching="graph"' in html
    data = json.loads(html.split('id="plan-diff-data" type="application/json">')[1]
                      .split("</script>")[0])
    assert "fused_conv2d2_add2.pad_temp" in data["changed"]["base"]
    assert "alloc2" in data["changed"]["head"] and "alloc2" not in data["changed"]["base"]


@pytest.mark.django_db
def test_the_plan_diff_page_says_when_pairing_fell_back(client, plan_diff_page):
    base, head = plan_diff_page
    artifact = base.artifact_named("plan.json")
    with artifact.file.open("rb") as handle:
        older = _as_written_before(json.load(handle))
    with artifact.file.open("wb") as handle:
        handle.write(json.dumps(older).encode())

    html = client.get(reverse("plan-diff", args=[base.pk, head.pk])).content.decode()

    assert 'data-matching="fallback"' in html
    assert "The base plan.json was written before plans recorded each tensor" in html
