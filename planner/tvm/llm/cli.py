"""``python -m planner llm``: an LLM deployment's memory, function by function.

Builds a TVM-native decoder (:mod:`planner.tvm.llm.decoders`) at each context window and prefill
chunk asked for, plans every function under the strategies, checks each build against
transformers step by step and prints the memory report: parameters, KV cache (its pages'
formula beside what the cache allocated), each function's temporary memory and the total.
"""

from __future__ import annotations

import argparse
import json
import sys

from planner.cli import CommandLineError, register_strategy_names, register_subcommand
from planner.tvm.strategies import registry

DEFAULT_STRATEGIES = ("best-fit", "best-fit+rewrites")


def _sizes(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 512,2048, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive sizes, got {text!r}")
    return values


def configure(parser: argparse.ArgumentParser) -> None:
    from planner.tvm.cli import _param

    parser.add_argument(
        "--model", default=None, metavar="PATH.py:FACTORY",
        help="a model file's function returning an LLMDeployment (docs/llm.md), called with "
        "the --param values and, where it takes them, context_window and prefill_chunk; "
        "default: the built-in decoder of --family and the sizes below",
    )
    parser.add_argument("--param", action="append", type=_param, default=[],
                        metavar="KEY=VALUE", help="a parameter of --model's function")
    parser.add_argument("--family", default="llama", help="llama or qwen2 (default llama)")
    for name, default, meaning in (
        ("layers", 2, "decoder layers"), ("hidden", 256, "hidden size"),
        ("heads", 8, "attention heads"), ("kv-heads", 2, "key and value heads"),
        ("intermediate", 512, "MLP width"), ("vocab", 4096, "vocabulary"),
        ("page-size", 16, "tokens per KV cache page"),
        ("max-batch", 2, "sequences the cache holds at once"),
    ):
        parser.add_argument(f"--{name}", type=int, default=default,
                            help=f"{meaning} (default {default})")
    parser.add_argument("--context", type=_sizes, default=[512], metavar="N[,N...]",
                        help="context windows, tokens the cache holds (default 512)")
    parser.add_argument("--prefill-chunk", type=_sizes, default=[64], metavar="N[,N...]",
                        help="prefill chunks, tokens one prefill takes (default 64)")
    parser.add_argument("--dtype", default="float32", help="float32 or float16")
    parser.add_argument("--strategy", action="append", default=None,
                        help="a strategy; repeat for several (default: "
                        + ", ".join(DEFAULT_STRATEGIES) + "; tvm-stock always runs)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per function")
    parser.add_argument("--no-memory", action="store_true", help="do not measure memory")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")


def handle(args: argparse.Namespace) -> int:
    from planner.tvm.torch_libraries import prepare_torch_libraries

    prepare_torch_libraries()
    from planner.tvm.build.kernels import KernelLibraries
    from planner.tvm.llm.decoders import LLMError
    from planner.tvm.llm.deployment import compile_deployment, summary
    from planner.tvm.measure import memory

    strategies = args.strategy or list(DEFAULT_STRATEGIES)
    if min(args.prefill_chunk) > max(args.context):
        raise CommandLineError(
            f"every prefill chunk is larger than the context window the cache holds "
            f"({min(args.prefill_chunk)} > {max(args.context)}): no point to plan"
        )
    reports = []
    # One measuring process, and kernels built once, for every point: the cache's kernels
    # and a function's at another context window are the same.
    libraries = KernelLibraries()
    with memory.MeasuringProcess() as measurer:
        if not args.no_memory:
            measurer.start()
        for context in args.context:
            for chunk in args.prefill_chunk:
                if chunk > context:
                    if not args.json:
                        sys.stdout.write(f"context {context}, prefill chunk {chunk}: skipped, "
                                         "a chunk larger than the context is never held\n")
                    continue
                try:
                    deployment = _deployment(args, context, chunk)
                    report = compile_deployment(
                        deployment, strategies, repeat=args.repeat,
                        measure=not args.no_memory, libraries=libraries, measurer=measurer,
                    )
                except (LLMError, ValueError) as exc:
                    raise CommandLineError(str(exc)) from None
                reports.append(report)
                _print(report, context, chunk, args.json, summary)
    if args.json:
        json.dump([r.to_json() for r in reports], sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    return 0 if all(r.ok for r in reports) else 1


def _print(report, context: int, chunk: int, as_json: bool, summary) -> None:
    """One point's memory report and each build that failed, unless JSON is asked for."""
    if as_json:
        return
    sys.stdout.write(f"context {context}, prefill chunk {chunk}:\n")
    sys.stdout.write(summary(report) + "\n")
    for strategy, by_function in report.functions.items():
        for function, r in by_function.items():
            if r.error:
                sys.stdout.write(f"  {strategy} {function}: FAILED: {r.error}\n")


def _deployment(args: argparse.Namespace, context: int, chunk: int):
    from planner.tvm.llm.decoders import (
        DecoderConfig,
        LLMError,
        decoder_deployment,
        load_deployment,
    )

    if args.model is None:
        return decoder_deployment(DecoderConfig(
            family=args.family, layers=args.layers, hidden=args.hidden, heads=args.heads,
            kv_heads=args.kv_heads, intermediate=args.intermediate, vocab=args.vocab,
            page_size=args.page_size, context_window=context, prefill_chunk=chunk,
            max_batch=args.max_batch, dtype=args.dtype,
        ))
    path, sep, factory = args.model.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise LLMError(f"--model must be PATH.py:FACTORY, not {args.model!r}")
    return load_deployment(
        path, factory, dict(args.param),
        defaults={"context_window": context, "prefill_chunk": chunk},
    )


register_subcommand(
    "llm", configure, handle,
    help="plan, check and measure a TVM LLM deployment (prefill, decode, KV cache)",
)
register_strategy_names(
    "llm", lambda: ((name, strategy.summary) for name, strategy in registry().items())
)
