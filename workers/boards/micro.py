"""Micro-class boards: devices without the TVM runtime, judged by what the build needs.

A microcontroller runs no Relax VM and no RPC server, so nothing is timed on it. What a
user needs to know is whether the model fits: the C-codegen build (target ``c``) is
compiled and checked here as on any board, and each strategy reports

- ``sram_bytes``: what must sit in RAM during an inference: the planned arena with the
  outputs, the kernel temporaries TVM's workspace pool would hold, and the input;
- ``code``: section sizes of the compiled kernels (the ``model.so`` built by the host's C
  compiler from the generated C: a proxy for the board's own compiler);
- ``weights_bytes``: parameters, which a board keeps in flash.

A strategy whose ``sram_bytes`` exceed the board's ``memory_capacity`` is flagged with
``over_capacity``: still a result (the plan is right, the board is too small), shown on the
run page.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from workers.boards import elf
from workers.boards.base import BoardRunner

log = logging.getLogger(__name__)


class MicroBoard(BoardRunner):
    kind = "micro"
    default_target = "c"

    def describe(self) -> dict:
        info = super().describe()
        info["memory_capacity"] = self.memory_capacity
        return info

    def measure(
        self,
        *,
        model_name: str,
        source: str,
        params: dict,
        strategies: list[str],
        artifacts_dir: Path,
        repeat: int,
    ) -> list[dict]:
        from planner.zoo import ModelSource, build_network

        reports = self.compile(
            model_name=model_name, source=source, params=params, strategies=strategies,
            artifacts_dir=artifacts_dir,
            repeat=0,  # host timings say nothing about the board
            memory_configs=(),  # nor does the host allocator
        )
        network = build_network(ModelSource(source, params))
        input_bytes, weights_bytes = _input_and_weight_bytes(network)
        for report in reports:
            report["board"] = self.footprint(report, input_bytes, weights_bytes)
            report["over_capacity"] = report["board"]["over_capacity"]
        return reports

    def footprint(self, report: dict, input_bytes: int, weights_bytes: int) -> dict:
        planned = report.get("planned_bytes")
        sram = None
        if planned is not None:
            sram = planned + (report.get("kernel_workspace_bytes") or 0) + input_bytes
        code = None
        library = (report.get("artifacts") or {}).get("model.so")
        if library:
            try:
                code = elf.section_sizes(library).to_json()
            except (OSError, elf.NotElf) as exc:
                log.warning("no code size for %s: %s", library, exc)
        capacity = self.memory_capacity
        return {
            "kind": self.kind,
            "sram_bytes": sram,
            "input_bytes": input_bytes,
            "weights_bytes": weights_bytes,
            "code": code,
            "memory_capacity": capacity,
            "over_capacity": bool(capacity and sram is not None and sram > capacity),
        }


def _input_and_weight_bytes(network) -> tuple[int, int]:
    sizes = [
        int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        for shape, dtype in zip(network.input_shapes, network.input_dtypes, strict=True)
    ]
    # The first input is the data (see planner.zoo.network.Network); the rest are weights.
    return (sizes[0] if sizes else 0), sum(sizes[1:])
