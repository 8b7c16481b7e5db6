"""The ``tvm-token-reuse`` strategy: TVM Relax's whole-buffer token reuse."""

from planner.problem import Buffer, Problem
from planner.strategies import solve
from planner.strategies.tvm_token_reuse import assign_tokens


def plan(*buffers):
    return solve(Problem(buffers), "tvm-token-reuse")


def test_it_reuses_a_freed_buffer_of_the_same_size():
    solution = plan(Buffer("a", 0, 2, 4), Buffer("b", 2, 4, 4))

    assert solution.offsets == {"a": 0, "b": 0}
    assert solution.height == 4


def test_it_never_reuses_a_buffer_that_is_still_live():
    solution = plan(Buffer("a", 0, 3, 4), Buffer("b", 2, 4, 4))

    assert solution.offsets == {"a": 0, "b": 4}


def test_it_grows_a_smaller_free_token():
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 2, 4, 8)))

    token_of, sizes, _ = assign_tokens(problem)

    assert token_of == [0, 0]
    assert sizes == [8]
    assert solve(problem, "tvm-token-reuse").height == 8


def test_it_takes_the_smallest_free_token_that_is_big_enough():
    solution = plan(
        Buffer("small", 0, 2, 4),
        Buffer("big", 0, 2, 8),
        Buffer("huge", 0, 2, 32),
        Buffer("next", 2, 4, 5),
    )

    assert solution.offsets["next"] == solution.offsets["big"]
    assert solution.height == 44


def test_it_ignores_free_tokens_more_than_16_times_too_big():
    solution = plan(Buffer("a", 0, 2, 100), Buffer("b", 2, 4, 5))

    assert solution.offsets == {"a": 0, "b": 100}


def test_it_ignores_free_tokens_more_than_16_times_too_small():
    solution = plan(Buffer("a", 0, 2, 4), Buffer("b", 2, 4, 100))

    assert solution.offsets == {"a": 0, "b": 4}


def test_its_height_is_the_sum_of_the_tokens_even_when_offsets_could_share(example_problem):
    # b1 and b2 could share with b4 in an offset plan, but tokens are whole buffers
    # laid end to end: three tokens of 4 bytes here.
    assert solve(example_problem, "tvm-token-reuse").height == 12
    problem = Problem((Buffer("a", 0, 2, 4), Buffer("b", 0, 4, 2), Buffer("c", 2, 4, 4)))
    assert solve(problem, "tvm-token-reuse").height == 6


def test_it_aligns_tokens_and_keeps_fixed_buffers():
    solution = plan(
        Buffer("f", 0, 4, 3, offset=0), Buffer("a", 0, 2, 4, alignment=8), Buffer("b", 2, 4, 4)
    )

    assert solution.offsets == {"f": 0, "a": 8, "b": 8}
