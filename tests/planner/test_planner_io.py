"""Reading and writing problems: MiniMalloc CSV and JSON, including malformed files."""

import io
import json

import pytest

from planner.problem import (
    Buffer,
    Problem,
    ProblemError,
    problem_from_json,
    problem_to_json,
    read_csv,
    read_json,
    read_problem,
    write_csv,
)


def write(tmp_path, text, name="problem.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_it_reads_the_minimalloc_example(data_dir):
    problem = read_csv(data_dir / "input.12.csv")

    assert problem.name == "input.12"
    assert [b.id for b in problem.buffers] == ["b1", "b2", "b3", "b4", "b5"]
    assert problem["b4"] == Buffer("b4", 9, 21, 4)


def test_it_reads_optional_alignment_and_offset_columns_as_fixed_when_asked(tmp_path):
    path = write(tmp_path, "id,lower,upper,size,alignment,offset\na,0,2,8,4,16\nb,1,3,4,,\n")

    problem = read_csv(path, fixed_offsets=True)

    assert problem["a"] == Buffer("a", 0, 2, 8, alignment=4, offset=16)
    assert problem["b"] == Buffer("b", 1, 3, 4)


def test_an_offset_column_is_a_plans_and_left_out_by_default(tmp_path):
    # Every file the planner writes with an offset column holds a plan: read back, it is
    # the problem that plan solved.
    path = write(tmp_path, "id,lower,upper,size,alignment,offset\na,0,2,8,4,16\nb,1,3,4,,\n")
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps({"buffers": [{"id": "a", "lower": 0, "upper": 2, "size": 8,
                                                "offset": 16}]}))

    assert read_csv(path)["a"] == Buffer("a", 0, 2, 8, alignment=4)
    assert read_problem(path)["a"].offset is None
    assert read_json(as_json)["a"].offset is None
    assert read_json(as_json, fixed_offsets=True)["a"].offset == 16


def test_a_bad_offset_is_refused_even_when_left_out(tmp_path):
    path = write(tmp_path, "id,lower,upper,size,offset\na,0,2,8,x\n")

    with pytest.raises(ProblemError, match=r"column 5 \(offset\)"):
        read_csv(path)


def test_it_accepts_columns_in_any_order_and_a_byte_order_mark(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes("\ufeffsize,id,upper,lower\r\n7,x,5,1\r\n".encode())

    assert read_csv(path)["x"] == Buffer("x", 1, 5, 7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"p\.csv:1: column 1: empty file"),
        ("id,lower,upper\na,0,1\n", r"p\.csv:1: column 4: missing column\(s\) size"),
        ("id,lower,upper,size,colour\n", r"p\.csv:1: column 5: unknown column 'colour'"),
        ("id,lower,upper,size,size\n", r"p\.csv:1: column 5: duplicate column 'size'"),
        ("id,lower,upper,size\na,0,1,4\nb,0,x,4\n", r"p\.csv:3: column 3 \(upper\)"),
        ("id,lower,upper,size\na,0,1,4.5\n", r"p\.csv:2: column 4 \(size\): .*integer"),
        ("id,lower,upper,size\na,0,1\n", r"p\.csv:2: column 4: expected 4 fields, got 3"),
        (
            "id,lower,upper,size\na,5,1,4\n",
            r"p\.csv:2: column 3 \(upper\): .*lower must be < upper",
        ),
        ("id,lower,upper,size\na,0,1,-4\n", r"p\.csv:2: column 4 \(size\): .*size must be >= 0"),
        (
            "id,lower,upper,size\na,0,1,4\na,2,3,4\n",
            r"p\.csv:3: column 1 \(id\): duplicate buffer id 'a'.*line 2",
        ),
        ("id,lower,upper,size\n,0,1,4\n", r"p\.csv:2: column 1 \(id\): empty id"),
    ],
)
def test_it_reports_what_and_where_in_a_malformed_csv(tmp_path, text, message):
    path = write(tmp_path, text, name="p.csv")

    with pytest.raises(ProblemError, match=message):
        read_csv(path)


def test_it_reports_a_missing_file(tmp_path):
    with pytest.raises(ProblemError, match="cannot read"):
        read_csv(tmp_path / "nope.csv")


def test_it_reports_a_binary_file(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes(b"id,lower,upper,size\n\xff\xfe,0,1,2\n")

    with pytest.raises(ProblemError, match="not UTF-8"):
        read_csv(path)


def test_it_skips_blank_lines(tmp_path):
    path = write(tmp_path, "id,lower,upper,size\n\na,0,1,4\n\n")

    assert len(read_csv(path)) == 1


def test_it_writes_rows_with_an_offset_column(example_problem):
    handle = io.StringIO()
    offsets = {b.id: 4 * k for k, b in enumerate(example_problem.buffers)}

    write_csv(handle, example_problem, offsets)

    lines = handle.getvalue().splitlines()
    assert lines[0] == "id,lower,upper,size,offset"
    assert lines[1] == "b1,0,3,4,0"
    assert lines[5] == "b5,0,21,4,16"


def test_it_writes_no_offset_column_without_offsets(example_problem):
    handle = io.StringIO()

    write_csv(handle, example_problem)

    assert handle.getvalue().splitlines()[0] == "id,lower,upper,size"


def test_a_written_csv_reads_back_the_same(tmp_path):
    problem = Problem(
        (Buffer("a", 0, 2, 8, alignment=4, offset=16), Buffer("b", 1, 3, 4)), name="round"
    )
    path = tmp_path / "round.csv"

    write_csv(path, problem)

    assert read_csv(path, fixed_offsets=True) == problem


def test_json_round_trips():
    problem = Problem((Buffer("a", 0, 2, 8, alignment=4, offset=16), Buffer("b", 1, 3, 4)), "j")

    document = json.loads(json.dumps(problem_to_json(problem)))

    assert document["buffers"][1] == {
        "id": "b",
        "lower": 1,
        "upper": 3,
        "size": 4,
        "alignment": 1,
        "offset": None,
    }
    assert problem_from_json(document) == problem


def test_json_may_leave_out_alignment_and_offset():
    problem = problem_from_json({"buffers": [{"id": "a", "lower": 0, "upper": 1, "size": 2}]})

    assert problem["a"] == Buffer("a", 0, 1, 2)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("nope", "expected an object"),
        ({"buffers": 3}, "'buffers' must be a list"),
        ({"buffers": [], "extra": 1}, "unknown field"),
        ({"buffers": [{"id": "a", "lower": 0, "upper": 1}]}, r"buffers\[0\]: missing .*size"),
        (
            {"buffers": [{"id": "a", "lower": 0, "upper": 1, "size": "4"}]},
            r"buffers\[0\]\.size: must be an integer",
        ),
        (
            {"buffers": [{"id": "a", "lower": 0, "upper": 1, "size": 4, "colour": 1}]},
            r"buffers\[0\]: unknown field",
        ),
        (
            {
                "buffers": [
                    {"id": "a", "lower": 0, "upper": 1, "size": 4},
                    {"id": "a", "lower": 0, "upper": 1, "size": 4},
                ]
            },
            r"buffers\[1\]: duplicate buffer id 'a'",
        ),
        (
            {"buffers": [{"id": "a", "lower": 2, "upper": 1, "size": 4}]},
            r"buffers\[0\]: .*lower must be < upper",
        ),
    ],
)
def test_it_reports_what_is_wrong_in_malformed_json(document, message):
    with pytest.raises(ProblemError, match=message):
        problem_from_json(document)


def test_it_reports_invalid_json_syntax_with_line_and_column(tmp_path):
    path = write(tmp_path, '{"buffers": [\n  {"id": "a",,}\n]}', name="p.json")

    with pytest.raises(ProblemError, match=r"p\.json:2: column \d+: invalid JSON"):
        read_json(path)


def test_read_problem_picks_the_format_by_suffix(tmp_path, example_problem):
    path = tmp_path / "example.json"
    path.write_text(json.dumps(problem_to_json(example_problem)), encoding="utf-8")

    problem = read_problem(path)

    assert problem.buffers == example_problem.buffers
