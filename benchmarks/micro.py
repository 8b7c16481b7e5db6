"""The int8 VGG-style CNN on an emulated STM32F746-class board, under each strategy.

    python benchmarks/micro.py [--resolution 32] [--board stm32f746] [--keep DIR]

Each strategy's export is built with arm-none-eabi-gcc for a Cortex-M7 (single-precision
FPU, as on the STM32F746) and run on QEMU's mps2-an500 machine by
``planner.tvm.micro.run_micro``; its outputs are compared bit for bit with TVM's stock
build on this host. RAM = .data + .bss (arena, the workspace region that serves the
kernels' remaining TVMBackendAllocWorkspace requests, input and output buffers) + the
measured stack high-water mark; flash = code + constants + weights. Instructions are those
QEMU executed for one inference: a count, not a time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a script this folder comes first on sys.path, where planner.py would shadow the
# planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.tvm.micro import get_board, micro_toolchain_missing, run_micro  # noqa: E402
from planner.tvm.sources import ModelSource  # noqa: E402

STRATEGIES = [
    "tvm-stock", "none", "tvm-token-reuse", "greedy-by-size", "best-fit", "optimal",
    "best-fit+rewrites", "optimal+rewrites",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--board", default="stm32f746")
    parser.add_argument("--keep", type=Path, default=None, help="keep the exports here")
    args = parser.parse_args(argv)
    missing = micro_toolchain_missing()
    if missing:
        print(f"offline: {missing}")
        return 1
    board = get_board(args.board)
    source = ModelSource("zoo:int8_vgg", {"resolution": args.resolution})
    started = time.perf_counter()
    results = {r.strategy: r for r in run_micro(source, STRATEGIES, board=board,
                                                work_dir=args.keep)}
    seconds = time.perf_counter() - started

    print(f"int8_vgg (resolution {args.resolution}, weights "
          f"{results['none'].weights_bytes:,} B) on {board.name} ({board.cpu}, "
          f"{board.sram_bytes // 1024} KB SRAM, {board.flash_bytes // 1024} KB flash; "
          f"QEMU {board.machine}), {seconds:.0f} s\n")
    print("| strategy | RAM | vs none | vs tvm-stock | arena | workspace | stack | flash "
          "| instructions | outputs match | fits |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    none, stock = results["none"], results["tvm-stock"]
    for name in STRATEGIES:
        r = results[name]
        if r.ram_bytes is None:
            print(f"| {name} | failed: {r.error} |")
            continue
        fits = {True: "no", False: "yes", None: "-"}[r.over_capacity]
        print(
            f"| {name} | {r.ram_bytes:,} | {_change(r.ram_bytes, none.ram_bytes)} "
            f"| {_change(r.ram_bytes, stock.ram_bytes)} | {r.arena_bytes:,} "
            f"| {r.workspace_bytes:,} | {r.stack_bytes:,} | {r.flash_bytes:,} "
            f"| {r.instructions:,} | {r.outputs_match} (host: {r.host_outputs_match}) "
            f"| {fits} |"
        )
    failed = [r for r in results.values() if r.error]
    for r in failed:
        print(f"{r.strategy}: {r.error}")
    return 1 if failed else 0


def _change(value: int | None, base: int | None) -> str:
    if value is None or not base:
        return "-"
    return f"{(value - base) / base:+.1%}"


if __name__ == "__main__":
    sys.exit(main())
