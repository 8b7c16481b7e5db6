"""Values beyond 64 bits and malformed files: exit 2 with the file, line and column."""

import json
from pathlib import Path

import pytest

from planner.problem import Buffer, Problem, ProblemError, read_csv, read_json
from planner.strategies import solve
from tests.planner.conftest import run_cli as run

ROOT = Path(__file__).resolve().parents[2]




@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("b,0,2,18446744073709551616", "p.csv:3: column 4 (size): size 18446744073709551616"),
        ("b,0,9223372036854775808,1", "p.csv:3: column 3 (upper): upper 9223372036854775808"),
        ("b,-9223372036854775809,2,1", "p.csv:3: column 2 (lower)"),
        ("b,0,2," + "9" * 5000, "p.csv:3: column 4 (size): size must be an integer"),
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
