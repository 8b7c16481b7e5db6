"""TVM's workspace pool counted from the built kernels: each kernel's requests read after
LowerTVMBuiltin and replayed through the pool's own rules give what the pool holds, to the
byte, so a plan's bytes bound what the runtime holds."""

from pathlib import Path

import pytest

from planner.report import StrategyReport
from planner.tvm.compile import STOCK, compile_model
from planner.tvm.measure.builds import say_what_the_plan_missed
from planner.tvm.plan.workspace import PAGE_BYTES, pool_bytes
from planner.tvm.sources import ModelSource

MODELS = Path(__file__).parents[1] / "torch_models.py"


@pytest.mark.parametrize(("requests", "calls", "held"), [
    # Whole pages, and a freed page serves the next kernel's smaller request.
    ({"a": [5000, -1], "b": [3000, -1]}, ["a", "b"], 2 * PAGE_BYTES),
    # Two requests live together take two pages, however small.
    ({"a": [16, 2048, -2, -1]}, ["a"], 2 * PAGE_BYTES),
    # A request larger than every free page grows the largest (freed, allocated again).
    ({"a": [4096, -1], "b": [10_000, -1]}, ["a", "b"], 3 * PAGE_BYTES),
    # The smallest free page that fits: the 4 KiB one, not the 12 KiB one.
    ({"a": [4096, 12_288, -2, -1], "b": [4000, 12_000, -2, -1]}, ["a", "b"], 4 * PAGE_BYTES),
    # Requests freed out of order still return their own pages.
    ({"a": [4096, 8192, -1, -2], "b": [8000, -1]}, ["a", "b"], 3 * PAGE_BYTES),
    # A kernel that makes none, or was not read into the requests, asks nothing.
    ({"a": []}, ["a", "zeros"], 0),
])
def test_the_pool_is_replayed_by_its_own_rules(requests, calls, held):
    assert pool_bytes(requests, calls) == held


def test_a_kernel_whose_requests_are_unknown_leaves_the_count_unknown():
    assert pool_bytes({"a": [4096, -1], "b": None}, ["a", "b"]) is None


def test_the_counted_pool_is_what_the_runtime_holds_and_the_plan_bounds_it():
    reports = compile_model(
        ModelSource(f"{MODELS}:gpt2_table", {"positions": 64, "seq": 16}),
        [STOCK, "best-fit", "best-fit+rewrites"], repeat=0, memory_configs=("naive",),
    )

    for report in reports:
        assert report.ok, (report.strategy, report.error)
        assert report.kernel_workspace_source == "counted"
        # Retained by the naive allocator after the call, less the outputs: the pool.
        assert report.kernel_workspace_bytes == report.measured["workspace_bytes"]
        held = report.measured["naive"]["inference_peak_bytes"]
        assert held <= report.planned_bytes, report.strategy
        assert not [w for w in report.warnings if "more than planned" in w]
    stock, best, rewrites = reports
    assert stock.kernel_workspace_bytes > 0
    # Our plans hold exactly what they say; TVM's own frees storages it does not reuse.
    assert best.measured["naive"]["inference_peak_bytes"] == best.planned_bytes
    # +rewrites lifts every temporary the pool would take, 1 KiB ones included (TVM keeps a
    # temporary on the stack only below 1 KiB).
    assert rewrites.kernel_workspace_bytes == 0
    assert rewrites.measured["naive"]["inference_peak_bytes"] == rewrites.planned_bytes


def test_an_empty_vector_in_a_concatenation_is_left_out_as_torch_leaves_it():
    [report] = compile_model(
        ModelSource(f"{MODELS}:empty_cache", {}), ["best-fit"], repeat=0, memory_configs=(),
    )

    assert report.outputs_match is True, report.error
    assert report.reference_check == "PyTorch"


def test_a_runtime_that_holds_more_than_the_plan_is_said_with_the_part_missed():
    def report(planned: int) -> StrategyReport:
        return StrategyReport(
            model="m", strategy="tvm-stock", planned_bytes=planned, kernel_workspace_bytes=4096,
            kernel_workspace_source="estimate",
            measured={"naive": {"inference_peak_bytes": 14_096}, "workspace_bytes": 8192},
        )

    over, within = report(10_000), report(14_096)
    say_what_the_plan_missed(over)
    say_what_the_plan_missed(within)

    assert over.warnings == [
        "the runtime held 14,096 B (naive allocator), 4,096 B more than planned: TVM's "
        "workspace pool held 8,192 B against 4,096 B estimated (a kernel's requests could not "
        "be counted from the build)"
    ]
    assert within.warnings == []


def test_a_pooled_runtime_far_above_the_plan_says_what_the_pool_added():
    # RWKV under tvm-stock: 761,856 B planned, 1,863,680 B in TVM's pooled allocator, 573,440 B
    # in the naive one (issue 59): the pool's pages and size buckets, not the program.
    def report(pooled: int) -> StrategyReport:
        return StrategyReport(
            model="m", strategy="tvm-stock", planned_bytes=761_856,
            measured={"pooled": {"inference_peak_bytes": pooled},
                      "naive": {"inference_peak_bytes": 573_440}},
        )

    far, near = report(1_863_680), report(770_048)  # near: two pages of rounding
    say_what_the_plan_missed(far)
    say_what_the_plan_missed(near)

    [said] = far.warnings
    assert said.startswith(
        "TVM's pooled allocator held 1,863,680 B, 2.4x the 761,856 B planned, where the naive "
        "allocator held 573,440 B: the pool rounds every storage up to whole 4 KB pages"
    )
    assert near.warnings == []


def test_a_symbolic_request_is_sized_at_each_call_through_the_kernels_own_bindings():
    import tvm

    n = tvm.tirx.Var("n", "int64")
    rows = tvm.tirx.Var("cse_v1", "int64")  # a value TVM bound to a name in the kernel
    request = (rows * 1000, {"cse_v1": n + 1})
    requests = {"a": [request, -1]}

    assert pool_bytes(requests, [("a", {"n": 4})]) == 2 * PAGE_BYTES  # 5,000 B: two pages
    assert pool_bytes(requests, [("a", {"n": 4}), ("a", {"n": 8})]) == 3 * PAGE_BYTES
    assert pool_bytes(requests, [("a", {})]) is None  # a call that does not bound n
