"""Choosing the order of independent operators for the lowest peak (planner/order.py)."""

from __future__ import annotations

import itertools
import random

import pytest

from planner.order import Op, OpGraph, OrderError, choose_order, peak_of


def two_branches() -> OpGraph:
    """Two branches that each make a 100-byte tensor and shrink it to 1 byte, then a join.

    Program order starts both branches before finishing either: both 100-byte tensors are
    live while ``a2`` runs (100 + 100 + 1 = 201). Finishing one branch first needs 102.
    """
    return OpGraph(
        (
            Op("a1", creates=("A1",)),
            Op("b1", creates=("B1",)),
            Op("a2", creates=("A2",), reads=("A1",)),
            Op("b2", creates=("B2",), reads=("B1",)),
            Op("join", creates=("out",), reads=("A2", "B2")),
        ),
        {"A1": 100, "B1": 100, "A2": 1, "B2": 1, "out": 1},
        persistent=frozenset({"out"}),
    )


def random_graph(n: int, p: float, seed: int) -> OpGraph:
    rng = random.Random(seed)
    ops, sizes = [], {}
    for i in range(n):
        preds = [j for j in range(i) if rng.random() < p]
        ops.append(Op(f"op{i}", creates=(f"t{i}",), reads=tuple(f"t{j}" for j in preds)))
        sizes[f"t{i}"] = rng.choice([1, 3, 8, 20, 50])
    return OpGraph(tuple(ops), sizes)


def all_orders(graph: OpGraph):
    creator = {t: op.name for op in graph.ops for t in op.creates}
    needs = {op.name: {creator[t] for t in op.reads if t in creator} | set(op.after)
             for op in graph.ops}
    for order in itertools.permutations(op.name for op in graph.ops):
        seen: set[str] = set()
        valid = True
        for name in order:
            if not needs[name] <= seen:
                valid = False
                break
            seen.add(name)
        if valid:
            yield order


def test_it_finishes_one_branch_before_starting_the_next():
    graph = two_branches()

    result = choose_order(graph)

    assert result.program_peak == 201
    assert result.peak == 102
    assert result.saved_bytes == 99
    assert result.order == ("a1", "a2", "b1", "b2", "join")
    assert result.exact
    assert peak_of(graph, result.order) == 102


@pytest.mark.parametrize("seed", range(12))
def test_it_finds_the_lowest_peak_of_any_order_on_small_graphs(seed):
    graph = random_graph(7, 0.3, seed)
    best = min(peak_of(graph, order) for order in all_orders(graph))

    result = choose_order(graph)

    assert result.exact
    assert result.peak == best
    assert peak_of(graph, result.order) == result.peak


@pytest.mark.parametrize("seed", range(8))
def test_it_never_returns_an_order_worse_than_program_order(seed):
    # A search cut short (one state, a beam of one) must still never make things worse.
    graph = random_graph(40, 0.1, seed)

    result = choose_order(graph, max_states=1, beam_width=1)

    assert result.peak <= result.program_peak == peak_of(graph)
    assert peak_of(graph, result.order) == result.peak
    if result.kept_program_order:
        assert result.order == tuple(op.name for op in graph.ops)
        assert "within 1 states" in result.note


def test_it_keeps_program_order_when_no_order_is_better():
    chain = OpGraph(
        tuple(Op(f"op{i}", creates=(f"t{i}",), reads=(f"t{i - 1}",) if i else ())
              for i in range(5)),
        {f"t{i}": 10 * (i + 1) for i in range(5)},
    )

    result = choose_order(chain)

    assert result.kept_program_order
    assert result.order == ("op0", "op1", "op2", "op3", "op4")
    assert result.note == "no order has a lower peak than program order"


def test_it_counts_inputs_and_outputs_of_an_operator_as_live_together():
    graph = OpGraph(
        (Op("a", creates=("x",)), Op("b", creates=("y",), reads=("x",)),
         Op("c", creates=("z",), reads=("y",))),
        {"x": 5, "y": 7, "z": 11},
        persistent=frozenset({"z"}),
    )

    # b holds x and y (12); c holds y and z (18), after which z stays.
    assert peak_of(graph) == 18


def test_it_honours_ordering_constraints_that_are_not_reads():
    graph = two_branches()
    # b1 overwrites something a2 still reads: b1 must wait for a2.
    ops = list(graph.ops)
    ops[1] = Op("b1", creates=("B1",), after=("a1",))
    constrained = OpGraph(
        (ops[0], Op("a2", creates=("A2",), reads=("A1",)),
         Op("b1", creates=("B1",), after=("a2",)), ops[3], ops[4]),
        graph.sizes, graph.persistent,
    )

    result = choose_order(constrained)

    assert result.order.index("a2") < result.order.index("b1")


def test_it_searches_each_stretch_between_cut_operators_on_its_own():
    # Six two-branch diamonds in a row: each joins before the next starts, so every
    # stretch fits a small budget although all their orders together would not.
    ops, sizes = [], {}
    previous: tuple[str, ...] = ()
    for k in range(6):
        ops += [
            Op(f"a1_{k}", creates=(f"A1_{k}",), reads=previous),
            Op(f"b1_{k}", creates=(f"B1_{k}",), reads=previous),
            Op(f"a2_{k}", creates=(f"A2_{k}",), reads=(f"A1_{k}",)),
            Op(f"b2_{k}", creates=(f"B2_{k}",), reads=(f"B1_{k}",)),
            Op(f"join_{k}", creates=(f"J_{k}",), reads=(f"A2_{k}", f"B2_{k}")),
        ]
        sizes.update({f"A1_{k}": 100, f"B1_{k}": 100, f"A2_{k}": 1, f"B2_{k}": 1,
                      f"J_{k}": 1})
        previous = (f"J_{k}",)
    graph = OpGraph(tuple(ops), sizes)

    result = choose_order(graph, max_states=20)

    assert result.exact
    assert result.states > 20  # more than one budget, spent stretch by stretch
    assert (result.program_peak, result.peak) == (201, 102)


def test_it_rejects_a_program_order_that_reads_before_writing():
    graph = OpGraph(
        (Op("b", creates=("y",), reads=("x",)), Op("a", creates=("x",))), {"x": 1, "y": 1}
    )

    with pytest.raises(OrderError, match="program order must be a valid order"):
        choose_order(graph)


def test_it_rejects_an_order_that_breaks_a_dependency():
    with pytest.raises(OrderError):
        peak_of(two_branches(), ["a2", "a1", "b1", "b2", "join"])


def test_a_report_carries_the_bounds_of_both_orders_through_json():
    import json

    from planner.report import StrategyReport

    report = StrategyReport(
        model="m", strategy="best-fit+rewrites+reorder", lower_bound_bytes=4096,
        rewritten_lower_bound_bytes=3072, program_order_lower_bound_bytes=4096,
        chosen_order_lower_bound_bytes=2048, order={"kept": "chosen order", "exact": True},
    )

    again = StrategyReport.from_json(json.loads(json.dumps(report.to_json())))

    assert again == report
    assert StrategyReport.from_json({"model": "m", "strategy": "s"}).order == {}
