"""The framework's outputs handed over by the import sandbox: matched to the draw they were
computed on, and refused, with the reason, where they are not shaped as TVM's build's."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from planner.tvm.build.target import make_target
from planner.tvm.compile import STOCK, check_draws, compile_model, imported_network
from planner.tvm.network import Framework
from planner.tvm.sources import ModelSource
from planner.tvm.sources.handover import (
    NETWORK_FILE,
    REFERENCE_FILE,
    ImportedError,
    load_imported,
    run_reference,
    save_imported,
)

SOURCE = ModelSource("zoo:small_cnn", {"channels": 2, "resolution": 8, "depth": 1})


@pytest.fixture(scope="module")
def network():
    return imported_network(SOURCE, make_target("llvm"), base_dir=None)


def handed_over(network, folder, framework, seed=0):
    """``network`` through the folder, with ``framework`` run on the draws of ``seed``."""
    reference = run_reference(framework, check_draws(network, seed))
    save_imported(network, folder, reference=reference)
    return load_imported(folder, name="small-cnn").network


def stock_report(network):
    return compile_model(SOURCE, [STOCK], network=network, repeat=0, memory_configs=())[0]


def test_outputs_of_the_wrong_shape_are_refused_with_the_reason(network, tmp_path):
    wrong = Framework("PyTorch", lambda draw: [np.zeros((1, 3), dtype="float32")])

    report = stock_report(handed_over(network, tmp_path, wrong))

    assert report.reference_check.startswith(
        "refused: PyTorch (run in the import sandbox) returns output 0 as float32[1, 3] "
        "where TVM's build returns float32["
    ), report.reference_check
    assert "not shaped as TVM's build's" in report.error
    assert report.outputs_match is not True


def test_outputs_of_other_draws_leave_the_build_not_checked(network, tmp_path):
    elsewhere = Framework("PyTorch", lambda draw: [np.zeros((1, 3), dtype="float32")])

    report = stock_report(handed_over(network, tmp_path, elsewhere, seed=7))

    assert report.ok, report.error
    assert report.reference_check.startswith("not checked: PyTorch (run in the import sandbox)")
    assert "no outputs were handed over for the draw" in report.reference_check


def test_a_framework_that_failed_in_the_import_says_so(network, tmp_path):
    def fail(draw):
        raise RuntimeError("out of memory")

    loaded = handed_over(network, tmp_path, Framework("PyTorch", fail))

    assert loaded.framework.run is None
    assert loaded.framework.missing == (
        "PyTorch failed: RuntimeError: out of memory (run in the import sandbox)"
    )


def test_a_folder_without_outputs_keeps_the_build_not_checked(network, tmp_path):
    save_imported(network, tmp_path)

    report = stock_report(load_imported(tmp_path, name="small-cnn").network)

    assert report.reference_check == "not checked: the model was not exported from a framework here"


def test_a_member_that_names_no_draw_is_refused(network, tmp_path):
    save_imported(replace(network, framework=None), tmp_path)
    meta = json.loads((tmp_path / NETWORK_FILE).read_text())
    meta["reference"] = {"framework": "PyTorch"}
    (tmp_path / NETWORK_FILE).write_text(json.dumps(meta))
    np.savez(tmp_path / REFERENCE_FILE, logits=np.zeros(3, dtype="float32"))

    with pytest.raises(ImportedError, match="'logits' is not a draw's output"):
        load_imported(tmp_path, name="small-cnn")


@pytest.mark.parametrize("written_by", ["this TVM", "an older TVM"])
def test_the_handed_over_module_loads_whichever_tvm_wrote_it(network, tmp_path, written_by):
    import tvm
    import tvm_ffi

    from planner.tvm.sources.handover import MODULE_FILE

    save_imported(network, tmp_path)
    path = tmp_path / MODULE_FILE
    graph = json.loads(path.read_text())
    assert graph["metadata"]["tvm_version"] == tvm.__version__
    if written_by == "an older TVM":
        # Loaded through tvm.ir.load_json, which upgrades what older releases wrote.
        graph["metadata"]["tvm_version"] = "0.26.0"
        path.write_text(json.dumps(graph))

    loaded = load_imported(tmp_path, name="small-cnn").network

    assert tvm_ffi.structural_equal(loaded.mod, network.mod)


def test_bfloat16_outputs_travel_as_float32_and_come_back_as_bfloat16(network, tmp_path):
    import ml_dtypes

    value = np.array([[1.0078125, -2.5, 3.0]], dtype=ml_dtypes.bfloat16)
    draws = check_draws(network, 0)
    save_imported(network, tmp_path,
                  reference=run_reference(Framework("PyTorch", lambda draw: [value]), draws))

    framework = load_imported(tmp_path, name="small-cnn").network.framework
    (back,) = framework.run(list(draws[0]))
    assert back.dtype == ml_dtypes.bfloat16
    assert np.array_equal(back.astype(np.float32), value.astype(np.float32))

    # What names the type is the sandbox's word too: only known narrow floats, only for
    # float32 members that are there.
    meta = json.loads((tmp_path / NETWORK_FILE).read_text())
    for bad in ({"x.0": "object"}, {"nowhere.9": "bfloat16"}, ["bfloat16"]):
        meta["reference"]["dtypes"] = bad
        (tmp_path / NETWORK_FILE).write_text(json.dumps(meta))
        with pytest.raises(ImportedError, match="dtypes|bfloat16"):
            load_imported(tmp_path, name="small-cnn")
