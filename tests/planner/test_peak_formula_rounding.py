"""Peak formulas where sizes are rounded up to the arena's alignment (issue 33): the rounding
is part of the formula, so it holds at small points where no polynomial does."""

from __future__ import annotations

from fractions import Fraction

from planner.peak_formula import Aligned, Polynomial, SymbolicBuffer, prune, symbolic_plan

SEQ = ("seq",)


def bytes_of(coefficients) -> Aligned:
    return Aligned.of_size(Polynomial.of(SEQ, coefficients), 64)


def test_a_bool_row_of_seq_is_64_bytes_at_32_and_64_and_128_bytes_at_128():
    row = bytes_of({(1,): 1})

    assert row.text() == "64*ceil(seq/64)"
    assert [row({"seq": s}) for s in (32, 64, 128)] == [64, 64, 128]


def test_a_size_that_is_a_multiple_of_the_alignment_stays_a_polynomial():
    floats = bytes_of({(1,): 256})

    assert floats.rounded == () and floats.text() == "256*seq"


def test_the_rounded_ratio_is_written_in_lowest_terms():
    assert bytes_of({(2,): 6}).text() == "64*ceil(3*seq**2/32)"
    assert bytes_of({(1,): 4, (0,): 8}).text() == "64*ceil((seq + 2)/16)"
    assert bytes_of({(2,): Fraction(1, 2)}).text() == "64*ceil(seq**2/128)"


def test_a_sum_is_dropped_only_where_another_is_larger_over_the_whole_range():
    small = bytes_of({(1,): 256}) + bytes_of({(1,): 2}) + bytes_of({(2,): 16})
    large = bytes_of({(1,): 384}) + bytes_of({(2,): 16})
    row = bytes_of({(1,): 1})

    assert prune([small, large], {"seq": 1}) == [large]
    # 64*ceil(seq/64) and 2*seq: each is the larger somewhere above 1.
    assert len(prune([row, Aligned.exactly(Polynomial.of(SEQ, {(1,): 2}))], {"seq": 1})) == 2


def test_a_plan_of_rounded_sizes_gives_the_arena_at_every_point():
    # A bool mask (seq bytes) and a float row (4*seq bytes) live together; a third buffer
    # after them reuses the mask's place.
    mask, row = bytes_of({(1,): 1}), bytes_of({(1,): 4})
    buffers = [SymbolicBuffer("mask", 0, 2, mask), SymbolicBuffer("row", 0, 3, row),
               SymbolicBuffer("late", 2, 3, mask)]

    plan = symbolic_plan(buffers, {"mask": 0, "row": 128, "late": 0}, {"seq": 128},
                         {"seq": 8})

    assert plan.expression() == "64*ceil(seq/16) + 64*ceil(seq/64)"
    for seq in (8, 16, 32, 48, 64, 100, 128):
        offsets = plan.offsets_at({"seq": seq})
        assert offsets["row"] == mask({"seq": seq}) and offsets["row"] % 64 == 0
        assert plan.peak_at({"seq": seq}) == offsets["row"] + row({"seq": seq})


def test_a_size_that_is_a_multiple_of_the_alignment_at_every_point_stays_a_polynomial():
    # 8*h*w bytes at h = w in 8, 16, 32: a multiple of 64 wherever h is a multiple of 8.
    size = Polynomial.of(("h",), {(2,): 8})

    assert Aligned.of_size(size, 64, {"h": 8}).text() == "8*h**2"
    assert Aligned.of_size(size, 64, {"h": 2}).text() == "64*ceil(h**2/8)"
