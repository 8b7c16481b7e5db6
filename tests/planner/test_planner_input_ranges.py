"""Values beyond 64 bits and malformed files: exit 2 with the file, line and column."""

import json
from pathlib import Path

import pytest

from planner.problem import Buffer, Problem, ProblemError, read_csv, read_json
from planner.strategies import solve, strategy_names
from tests.planner.conftest import run_cli as run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("b,0,2,18446744073709551616", "p.csv:3: column 4 (size): size 18446744073709551616"),
        ("b,0,9223372036854775808,1", "p.csv:3: column 3 (upper): upper 9223372036854775808"),
        ("b,-9223372036854775809,2,1", "p.csv:3: column 2 (lower)"),
        ("b,0,2," + "9" * 5000, "p.csv:3: column 4 (size): size 99999"),
        # Leading zeros are no digits of the value: this one is read, and out of range.
        ("b,0,2,000" + "9" * 20, "p.csv:3: column 4 (size): size " + "9" * 20 + " is out"),
    ],
)
@pytest.mark.parametrize("strategy", ["optimal", "greedy-by-size"])
def test_a_value_beyond_64_bits_exits_2_naming_line_and_column(tmp_path, row, where, strategy):
    path = tmp_path / "p.csv"
    path.write_text(f"id,lower,upper,size\na,0,2,4\n{row}\n")

    result = run("solve", path, "-s", strategy)

    assert result.returncode == 2
    assert where in result.stderr
    assert "Traceback" not in result.stderr


def test_optimal_plans_sizes_too_large_for_its_exact_search():
    # Each size fits 64 bits, their sum does not fit int64: the search is skipped, the
    # best heuristic plan is returned.
    big = 1 << 63
    problem = Problem((Buffer("a", 0, 2, big), Buffer("b", 1, 3, big), Buffer("c", 2, 4, 3)))

    solution = solve(problem, "optimal", time_limit=2)

    assert solution.height == 2 * big
    assert solution.proven_optimal is True  # it meets the max-live bound


@pytest.mark.parametrize(
    ("document", "at"),
    [
        (
            '{"buffers": [\n {"id": "a", "lower": 0, "upper": 2, "size": 4},\n'
            ' {"id": "b", "lower": 0, "upper": 2,\n  "size": 18446744073709551616}]}',
            "18446744073709551616",
        ),
        ('{"buffers": [\n {"id": "a", "lower": 0, "upper": 2, "size": 4.5}]}', "4.5"),
        ('{"buffers": [\n {"id": "a", "lower": 3, "upper": 2, "size": 4}]}', "2, "),
        (
            '{"buffers": [\n {"id": "a", "lower": 0, "upper": 2, "size": 4, "colour": 1}]}',
            '"colour"',
        ),
        ('[\n {"id": "a", "lower": 0, "upper": 2, "size": -1}]', "-1"),
    ],
)
def test_json_errors_name_line_and_column_of_the_bad_value(tmp_path, document, at):
    path = tmp_path / "p.json"
    path.write_text(document)
    position = document.index(at)
    line = document.count("\n", 0, position) + 1
    column = position - (document.rfind("\n", 0, position) + 1) + 1
    where = f"p.json:{line}: column {column}:"

    with pytest.raises(ProblemError) as raised:
        read_json(path)

    assert where in str(raised.value)
    result = run("solve", path, "-s", "optimal")
    assert result.returncode == 2
    assert where in result.stderr


def test_truncated_json_names_line_and_column(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"buffers": [\n {"id": "a", "lower": 0, "upper": 2, "size": 4}')

    with pytest.raises(ProblemError, match=r"p\.json:2: column \d+: invalid JSON"):
        read_json(path)


def test_a_file_that_is_not_utf8_names_line_and_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes(b"id,lower,upper,size\na,0,\xff2,4\n")

    with pytest.raises(ProblemError, match=r"p\.csv:2: column 5: not UTF-8"):
        read_csv(path)


def test_values_at_the_64_bit_limits_are_accepted(tmp_path):
    path = tmp_path / "p.csv"
    top = (1 << 63) - 1
    path.write_text(f"id,lower,upper,size\na,{-top - 1},{top},{(1 << 64) - 1}\n")

    result = run("solve", path, "-s", "greedy-by-size")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["height"] == (1 << 64) - 1


@pytest.mark.parametrize(
    ("row", "where"),
    [
        # int() takes these; other tools reading the same CSV would not.
        ("b,0,1_000,4", "p.csv:3: column 3 (upper): upper must be an integer, got '1_000'"),
        ("b,0,\u0661\u0660,4", "p.csv:3: column 3 (upper): upper must be an integer"),
        # Left open, the quote used to swallow the rest of the file as one cell.
        ('b,0,2,"4', "p.csv:3: column 1: unexpected end of data"),
    ],
)
def test_a_cell_that_is_not_a_plain_decimal_csv_value_names_line_and_column(tmp_path, row, where):
    path = tmp_path / "p.csv"
    path.write_text(f"id,lower,upper,size\na,0,2,4\n{row}\n", encoding="utf-8")

    with pytest.raises(ProblemError) as raised:
        read_csv(path)

    assert where in str(raised.value)


def nested_json(depth):
    # The buffer list opens at column 13 of line 2, so level ``depth`` opens at a known place.
    return '{"name": "[[ \\" [[",\n "buffers": ' + "[" * depth + "]" * depth + "}"


def test_json_nested_too_deep_for_the_decoder_names_line_and_column(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(nested_json(100_000))

    with pytest.raises(ProblemError) as raised:
        read_json(path)

    # Level 101 (the object is level 1) is the 100th bracket of the list.
    assert "p.json:2: column 112: invalid JSON: nested more than 100 levels deep" in str(
        raised.value
    )


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_exits_2_on_json_nested_too_deep(tmp_path, strategy):
    path = tmp_path / "p.json"
    path.write_text(nested_json(100_000))

    result = run("solve", path, "-s", strategy)

    assert result.returncode == 2
    assert "p.json:2: column 112:" in result.stderr
    assert "Traceback" not in result.stderr
