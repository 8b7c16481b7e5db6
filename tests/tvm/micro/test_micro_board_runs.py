"""Planned models exported as C, built for a Cortex-M board and run on QEMU."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from planner.tvm.micro import build as builder
from planner.tvm.micro import emulator
from planner.tvm.micro.boards import get_board
from planner.tvm.micro.export import export_c, write_project
from planner.tvm.micro.plan import example_inputs, plan_models
from planner.tvm.micro.run import MicroResult, _build_and_run, reference_outputs, run_micro
from planner.tvm.plan import lowering
from planner.tvm.plan.apply import apply_plan
from planner.tvm.sources import ModelSource, build_network
from tests.tvm.micro.models import TINY_CNN, TINY_INT8

STRATEGIES = ["tvm-stock", "none", "greedy-by-size", "best-fit+rewrites"]


@pytest.fixture(scope="module")
def tiny_cnn_results(toolchain, tmp_path_factory):
    results = run_micro(
        ModelSource(*TINY_CNN), STRATEGIES, board="stm32f746",
        work_dir=tmp_path_factory.mktemp("micro"),
    )
    return {r.strategy: r for r in results}


def test_every_strategy_runs_on_the_board_with_the_stock_builds_outputs(tiny_cnn_results):
    for strategy in STRATEGIES:
        result = tiny_cnn_results[strategy]
        assert result.error is None, (strategy, result.error)
        assert result.outputs_match is True, strategy
        assert result.host_outputs_match is True, strategy


def test_the_figures_come_from_the_built_image_and_the_run(tiny_cnn_results):
    for result in tiny_cnn_results.values():
        assert result.instructions > 10_000
        assert result.stack_bytes > 0
        assert result.flash_bytes > result.weights_bytes
        # The static RAM holds the arena and the workspace region, and RAM adds the stack.
        assert result.static_ram_bytes >= result.arena_bytes + result.workspace_bytes
        assert result.ram_bytes == result.static_ram_bytes + result.stack_bytes
        assert result.workspace_used_bytes <= result.workspace_bytes
        assert result.over_capacity is False


def test_lifting_temporaries_moves_the_workspace_into_the_arena(tiny_cnn_results):
    plain, lifted = tiny_cnn_results["greedy-by-size"], tiny_cnn_results["best-fit+rewrites"]
    assert lifted.lifted_temporaries and not plain.lifted_temporaries
    assert lifted.workspace_bytes < plain.workspace_bytes
    assert lifted.arena_bytes > plain.arena_bytes


def test_int8_outputs_match_bit_for_bit_on_a_cortex_m4(toolchain, tmp_path):
    results = run_micro(
        ModelSource(*TINY_INT8), ["tvm-token-reuse", "best-fit+rewrites"],
        board="mps2-an386", work_dir=tmp_path,
    )
    for result in results:
        assert result.error is None, result.error
        assert result.outputs_match is True
        assert result.max_abs_diff == 0.0
        assert result.machine == "mps2-an386"


def test_instruction_counts_repeat_exactly(toolchain, tmp_path):
    board = get_board("stm32f746")
    project = export_c(ModelSource(*TINY_CNN), "greedy-by-size", tmp_path, board=board)
    elf = builder.build_for_board(tmp_path, board)
    image = builder.read_image(elf)
    counts = {
        emulator.run_on_emulator(
            elf, board, tmp_path, (tmp_path / "input.bin").read_bytes(),
            begin_address=image.begin_address, end_address=image.end_address,
        ).instructions
        for _ in range(2)
    }
    assert len(counts) == 1 and counts.pop() > 0
    assert not image.uses_heap
    assert project.kernel_calls == 3


def test_a_wrong_plan_is_caught_on_the_board_and_on_the_host(toolchain, tmp_path):
    # Given every tensor at offset 0, a block's output overwrites its skip connection.
    board = get_board("stm32f746")
    network = build_network(
        ModelSource("zoo:residual_cnn", {"channels": 4, "resolution": 8, "blocks": 1})
    )
    planned = plan_models(network, ["greedy-by-size"], board.tvm_target())["greedy-by-size"]
    lowered = lowering.lower_to_allocations(network.mod, board.tvm_target())
    zeros = {t.name: 0 for t in planned.extraction.tensors}
    planned.module = apply_plan(lowered, planned.extraction, zeros, planned.arena_bytes)
    inputs = example_inputs(network)
    project = write_project(planned, tmp_path, inputs, board)
    result = MicroResult(model="m", strategy="zeros", board=board.name, machine=board.machine)

    _build_and_run(project, board, inputs, reference_outputs(network, inputs), result, 120)

    assert result.outputs_match is False
    assert result.host_outputs_match is False
    assert "the plan is at fault" in result.error


def test_a_model_too_big_for_the_board_is_flagged(toolchain, tmp_path):
    small_board = get_board("stm32f746").with_capacity(sram_bytes=4 * 1024)
    (result,) = run_micro(ModelSource(*TINY_CNN), ["greedy-by-size"], board=small_board)
    assert result.over_capacity is True
    assert result.ram_bytes > 4 * 1024
    # Too big is a finding about the board, not a broken build.
    assert result.error is None and result.outputs_match is True


def test_the_export_is_self_contained(toolchain, tmp_path):
    project = export_c(ModelSource(*TINY_INT8), "none", tmp_path)
    kernels = (tmp_path / "kernels.c").read_text()
    model = (tmp_path / "model.c").read_text()
    assert '#include "tvm/' not in kernels
    assert f"#define PEAKWATCH_ARENA_BYTES {project.arena_bytes}" in (
        tmp_path / "model.h"
    ).read_text()
    assert "uint8_t peakwatch_arena[" in model and "malloc" not in model
    assert "const uint8_t peakwatch_weight_1[" in (tmp_path / "weights.c").read_text()
    assert project.input.dtype == "int8" and project.outputs[0].shape == [1, 10]
    # The Makefile builds the same image without Peakwatch.
    if shutil.which("make"):
        import subprocess

        proc = subprocess.run(["make", "model_host"], cwd=tmp_path, capture_output=True)
        assert proc.returncode == 0, proc.stderr
    assert np.fromfile(tmp_path / "input.bin", dtype=np.int8).size == 3 * 8 * 8


def test_a_machine_without_the_tools_reports_the_board_offline(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name: None if name == "qemu-system-arm" else real_which(name)
    )
    missing = builder.micro_toolchain_missing()
    assert missing and "qemu-system-arm" in missing
    (result,) = run_micro(ModelSource(*TINY_CNN), ["none"])
    assert result.error.startswith("offline: ") and result.outputs_match is None
