"""An LLM deployment's memory by context window and prefill chunk: parameters, KV cache,
each function's temporary memory under each strategy, measured, and TVM's own estimate.

    python benchmarks/llm_memory.py [--family llama|qwen2] [--context 512,2048,8192]
                                    [--chunk 64,256,1024] [--no-memory]

The decoder is the issue's: 2 layers, hidden 256, 8 heads, 2 KV heads, MLP 512, vocabulary
4096, pages of 16 tokens, 2 sequences at most (:mod:`planner.tvm.llm.decoders`), with the
weights of a transformers model of the same configuration; every build of every point is
checked against transformers (a prefill of a whole chunk, 3 decode steps, two sequences
prefilled and decoded together). A prefill chunk larger than the context window cannot be
held by the cache and is skipped. Kernels are shared between points of the same chunk: the
context window is a run-time argument of the cache alone. The figures in docs/benchmarks.md
("LLM deployments") come from this script.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STRATEGIES = ("best-fit", "best-fit+rewrites")


def _sizes(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _kb(value) -> str:
    return f"{value / 1024:,.1f}" if value is not None else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="llama")
    parser.add_argument("--context", type=_sizes, default=[512, 2048, 8192])
    parser.add_argument("--chunk", type=_sizes, default=[64, 256, 1024])
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from planner.tvm.torch_libraries import prepare_torch_libraries

    prepare_torch_libraries()
    from planner.tvm.build.kernels import KernelLibraries
    from planner.tvm.llm.decoders import DecoderConfig, decoder_deployment
    from planner.tvm.llm.deployment import compile_deployment
    from planner.tvm.measure.memory import MeasuringProcess

    rows, functions_rows, failures = [], [], []
    shown: set[int] = set()
    started = time.perf_counter()
    with MeasuringProcess() as measurer:
        for chunk in args.chunk:
            libraries = KernelLibraries()
            for context in args.context:
                if chunk > context:
                    rows.append(f"| {context} | {chunk} | (a chunk larger than the context "
                                 "window: not held by the cache) |" + " |" * 9)
                    continue
                config = DecoderConfig(family=args.family, context_window=context,
                                       prefill_chunk=chunk)
                t0 = time.perf_counter()
                report = compile_deployment(
                    decoder_deployment(config), STRATEGIES, repeat=args.repeat,
                    measure=not args.no_memory, libraries=libraries, measurer=measurer,
                )
                seconds = time.perf_counter() - t0
                for strategy, by_function in report.functions.items():
                    for function, r in by_function.items():
                        if r.error:
                            failures.append(f"{context}/{chunk} {strategy} {function}: {r.error}")
                cache = report.kv_cache
                stock = report.temporary_bytes("tvm-stock")
                rewritten = report.temporary_bytes("best-fit+rewrites")
                worst, _ = report.worst_function("tvm-stock")
                measured_stock = report.functions["tvm-stock"][worst].measured.get(
                    "naive", {}).get("inference_peak_bytes")
                estimate = report.tvm_estimate_bytes
                stock_check = report.functions["tvm-stock"]["prefill"]
                rows.append(
                    f"| {context} | {chunk} | {_kb(report.params_bytes)} | "
                    f"{_kb(cache.get('allocated_bytes'))} | {_kb(cache['formula_bytes'])} | "
                    f"{'=' if cache.get('pages_bytes') == cache['formula_bytes'] else '!='} | "
                    f"{_kb(stock)} | {_kb(rewritten)} | {rewritten / stock:.2f} | "
                    f"{_kb(estimate)} | {_kb(measured_stock)} | "
                    f"{stock_check.reference_max_abs_diff:.1e} | {seconds:.0f} |"
                )
                if chunk not in shown:
                    # Functions do not see the context window: one table per chunk.
                    shown.add(chunk)
                    for function in report.functions["tvm-stock"]:
                        cells = []
                        for strategy in report.functions:
                            r = report.functions[strategy][function]
                            peak = r.measured.get("naive", {}).get("inference_peak_bytes")
                            latency = r.latency_ms["median"] if r.latency_ms else float("nan")
                            cells.append(f"{_kb(r.planned_bytes)} / {_kb(peak)} / {latency:.2f}")
                        functions_rows.append(f"| {chunk} | {function} | "
                                              + " | ".join(cells) + " |")
                print(f"context {context}, chunk {chunk}: {seconds:.0f} s", file=sys.stderr)

    print("| context | chunk | params KiB | KV cache KiB (allocated) | pages KiB (formula) | "
          "pages measured | stock temp KiB | +rewrites temp KiB | ratio | TVM estimate KiB | "
          "stock measured KiB | max diff vs transformers | seconds |")
    print("|" + "---|" * 13)
    print("\n".join(rows))
    print()
    print("| chunk | function | " + " | ".join(
        f"{s} planned / measured KiB / ms" for s in ("tvm-stock", *STRATEGIES)) + " |")
    print("|" + "---|" * (2 + 1 + len(STRATEGIES)))
    print("\n".join(functions_rows))
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    for failure in failures:
        print(f"FAILED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
