"""Count the device bytes CUDA builds hold during one inference, next to what they planned.

    python benchmarks/cuda_memory.py                 # ResNet-18 at 224x224, GPT-2 at 2 lengths
    python benchmarks/cuda_memory.py --quick         # a tiny zoo CNN only
    python benchmarks/cuda_memory.py --arch sm_90    # kernels for another architecture
    python benchmarks/cuda_memory.py --memory-cfg pooled

Each model is compiled for CUDA under tvm-stock, best-fit and best-fit+rewrites
(``compile_model``, which also checks each build's outputs against tvm-stock's on the GPU),
then each build runs once in a measuring process that counts its ``cudaMalloc`` calls
(:mod:`planner.tvm.measure.cuda_memory`). Under TVM's naive allocator (the default) each storage
is one ``cudaMalloc`` of exactly its bytes, so the measured peak compares with the planned
bytes to the byte; ``pooled`` rounds storages up to pages and keeps them, as a deployment
does. Columns: planned bytes, the measured peak, what the storages and the kernel workspace
took of it, the peak over planned, and the peak over tvm-stock's measured peak.

On a host without a CUDA device it says so and exits 0; it exits 1 if a build failed or a
measurement did not add up (allocations past the counter, frees it never saw).

Measured on an NVIDIA H100 80GB HBM3 (sm_90, driver 580.159.04), one run of
``python benchmarks/cuda_memory.py --repeat 1`` (no allocation past the counter, no unknown
free; no kernel workspace in any of these builds). The GPT-2 rows' bytes stand, but their
outputs were compared NaN-equal then. Checked against PyTorch, TVM's CUDA build of this GPT-2
returns NaN, with or without a memory planner, so every GPT-2 build now fails with that
reason (docs/boards.md, "CUDA boards"; figures in docs/benchmarks.md):

    model     point    strategy             planned B     peak B  peak/plan  peak/stock
    resnet18  224x224  tvm-stock            7,432,096  7,225,344      0.972       1.000
    resnet18  224x224  best-fit             6,426,528  6,426,528      1.000       0.889
    resnet18  224x224  best-fit+rewrites    4,018,080  4,018,080      1.000       0.556
    gpt2 2L   seq 128  tvm-stock            1,983,616  1,966,080      0.991       1.000
    gpt2 2L   seq 128  best-fit             1,720,320  1,720,320      1.000       0.875
    gpt2 2L   seq 128  best-fit+rewrites    1,458,176  1,458,176      1.000       0.742
    gpt2 2L   seq 512  tvm-stock           12,325,376 12,058,624      0.978       1.000
    gpt2 2L   seq 512  best-fit            11,798,528 11,798,528      1.000       0.978
    gpt2 2L   seq 512  best-fit+rewrites    8,650,752  8,650,752      1.000       0.717

A Peakwatch plan is one arena held through the call plus the outputs, so its measured peak
is its planned bytes to the byte; tvm-stock's storages (whose sum is its planned bytes, and
what its storages took, to the byte) are freed as they die under ``naive``, so its peak sits
a little below that sum.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/planner.py would
# shadow the planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner import npz_files  # noqa: E402
from planner.tvm.build import cuda  # noqa: E402
from planner.tvm.compile import STOCK, compile_model  # noqa: E402
from planner.tvm.measure import cuda_memory  # noqa: E402
from planner.tvm.sources import ModelSource  # noqa: E402

STRATEGIES = [STOCK, "best-fit", "best-fit+rewrites"]


def _gpt2(seq: int) -> ModelSource:
    return ModelSource(
        "transformers:gpt2", {"seq": seq, "layers": 2, "hidden": 256, "heads": 4, "vocab": 1024}
    )


#: (model, point, source)
CASES = [
    ("resnet18", "224x224", ModelSource("torchvision:resnet18", {"image": 224})),
    ("gpt2 (2 layers)", "seq 128", _gpt2(128)),
    ("gpt2 (2 layers)", "seq 512", _gpt2(512)),
]
QUICK = [
    (
        "small_cnn",
        "16x16",
        ModelSource("zoo:small_cnn", {"channels": 4, "resolution": 16, "depth": 2}),
    ),
]


def _int(value) -> str:
    return "-" if value is None else f"{value:,}"


def _ratio(value, base) -> str:
    return "-" if value is None or not base else f"{value / base:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default=None, help="sm_XY (default: device 0's)")
    parser.add_argument("--quick", action="store_true", help="only a tiny zoo CNN")
    parser.add_argument("--memory-cfg", choices=cuda_memory.MEMORY_CONFIGS, default="naive")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="every figure, after each model")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    found = cuda.probe()
    if not found["ok"]:
        print(f"no CUDA device is present: {found.get('error', 'CUDA does not initialise')}")
        return 0
    arch = args.arch or found["arch"]
    target = json.dumps({"kind": "cuda", "arch": arch})
    print(
        f"device 0: {found['arch']}, {found.get('total_memory', 0):,} B; kernels for {arch}; "
        f"memory_cfg {args.memory_cfg}\n"
    )

    header = (
        "model",
        "point",
        "strategy",
        "planned B",
        "measured peak B",
        "storage B",
        "workspace B",
        "peak/planned",
        "peak/stock",
    )
    rows, failures, saved = [header], [], []
    with tempfile.TemporaryDirectory(prefix="peakwatch-cuda-bench-") as tmp:
        for index, (model, point, source) in enumerate(QUICK if args.quick else CASES):
            started = time.perf_counter()
            try:
                reports = compile_model(
                    source,
                    STRATEGIES,
                    target=target,
                    memory_configs=[],
                    artifacts_dir=Path(tmp) / str(index),
                    repeat=args.repeat,
                )
            except Exception as exc:  # a model that does not build is a finding, not a crash
                failures.append((model, point, "(all)", f"{type(exc).__name__}: {exc}"))
                continue
            measured = {
                r.strategy: _measure(r, args.memory_cfg, failures, model, point) for r in reports
            }
            stock_peak = (measured.get(STOCK) or {}).get("peak_bytes")
            for report in reports:
                figures = measured[report.strategy] or {}
                saved.append({"point": point, **report.to_json(), "cuda": figures})
                peak = figures.get("peak_bytes")
                rows.append(
                    (
                        model,
                        point,
                        report.strategy,
                        _int(report.planned_bytes),
                        _int(peak),
                        _int(figures.get("storage_bytes")),
                        _int(figures.get("workspace_bytes")),
                        _ratio(peak, report.planned_bytes),
                        _ratio(peak, stock_peak),
                    )
                )
            print(f"{model} {point}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            if args.json:
                args.json.write_text(json.dumps(saved, indent=1, default=str))

    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(str(c).ljust(width) for c, width in zip(row, widths, strict=True)))
    if failures:
        print("\nFailures:")
        for model, point, strategy, error in failures:
            print(f"- {model} {point} / {strategy}: {error}")
    return 1 if failures else 0


def _measure(report, memory_cfg: str, failures: list, model: str, point: str) -> dict | None:
    if not report.ok:
        failures.append((model, point, report.strategy, report.error))
        return None
    try:
        inputs = npz_files.positional(npz_files.load_arrays(report.inputs_file))
        figures = cuda_memory.measure(
            Path(report.artifacts["model.so"]),
            inputs,
            entry=report.entry,
            memory_cfg=memory_cfg,
            arch=json.loads(report.target)["arch"],
        )
    except (cuda_memory.MeasurementError, npz_files.UnsafeArrays, OSError) as exc:
        failures.append((model, point, report.strategy, f"measuring: {exc}"))
        return None
    if figures["untracked_allocations"] or figures["unknown_frees"]:
        failures.append(
            (
                model,
                point,
                report.strategy,
                f"{figures['untracked_allocations']} allocations past the counter, "
                f"{figures['unknown_frees']} frees it never saw",
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
