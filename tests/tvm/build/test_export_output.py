"""Exporting a build writes nothing to a user's terminal but what matters."""

import os

from planner.tvm.build import quiet_io
from planner.tvm.compile import compile_model
from planner.tvm.sources import ModelSource


def test_exporting_builds_prints_no_scope_saving_warnings(tmp_path, capfd):
    reports = compile_model(
        ModelSource("zoo:mlp"), ["tvm-stock", "best-fit"], repeat=0, memory_configs=(),
        artifacts_dir=tmp_path,
    )

    assert all("model.so" in report.artifacts for report in reports)
    # TVM 0.27 writes one such line per memory scope whenever it saves an executable.
    assert "Scope Saving" not in capfd.readouterr().err


def test_measuring_prints_no_scope_loading_warnings(capfd):
    reports = compile_model(ModelSource("zoo:mlp"), ["tvm-stock", "best-fit"], repeat=0)

    assert all(report.measured_peak_bytes for report in reports)
    # ... and one "Scope Loaded" line per scope whenever it loads one, as measuring does.
    assert "Scope Loaded" not in capfd.readouterr().err


def test_other_native_stderr_output_is_passed_on(capfd):
    with quiet_io.quiet_executable_io():
        os.write(2, b"[07:08:07] /src/runtime/vm/executable.cc:276: Warning: Scope Saving:\n")
        os.write(2, b"[07:08:07] /src/runtime/vm/executable.cc:340: Warning: Scope Loaded:\n")
        os.write(2, b"a real warning\n")

    assert capfd.readouterr().err == "a real warning\n"
