"""A tracked repository built from ``examples/tracked-repository``, commit by commit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dashboard.demo import git
from tests.helpers import Repo
from tests.workers.conftest import broker, start_worker, wait_for  # noqa: F401
from workers import sandbox

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tracked-repository"

#: The pipeline change: half precision, as a deployment to a small device would choose.
#: (A layout change alone, such as NHWC convolutions, moves no activation bytes once the
#: weights are bound and their transposes folded: it used to move them only through the
#: weights' layout transforms, which a deployment never runs.)
FP16_PIPELINE = '''from tvm import relax


def passes(target):
    return [relax.transform.ToMixedPrecision(out_dtype="float16")]
'''

#: The planner change: first fit in order of size instead of stacking every buffer.
FIRST_FIT_PLANNER = '''def plan(problem):
    placed, offsets = [], {}
    for buffer in sorted(problem.buffers, key=lambda b: (-b.size, b.lower, b.id)):
        offset = 0
        for other, start in sorted(placed, key=lambda p: p[1]):
            overlaps_in_time = other.lower < buffer.upper and buffer.lower < other.upper
            if overlaps_in_time and start < offset + buffer.size and offset < start + other.size:
                offset = start + other.size
        offset = -(-offset // buffer.alignment) * buffer.alignment
        # One pass is not enough when moving up meets another buffer: check again.
        while any(
            other.lower < buffer.upper and buffer.lower < other.upper
            and start < offset + buffer.size and offset < start + other.size
            for other, start in placed
        ):
            offset = max(start + other.size for other, start in placed
                         if other.lower < buffer.upper and buffer.lower < other.upper
                         and start < offset + buffer.size and offset < start + other.size)
            offset = -(-offset // buffer.alignment) * buffer.alignment
        placed.append((buffer, offset))
        offsets[buffer.id] = offset
    return offsets
'''


#: Pasted into hostile model files (which import os and time): forks up to ``count``
#: children that sleep, and says how many it made and what stopped it.
FORK_CHILDREN = '''

def fork_children(count: int) -> tuple[int, str]:
    children, error = [], ""
    try:
        for _ in range(count):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
    except OSError as exc:
        error = exc.strerror
    return len(children), error
'''


@pytest.fixture
def example_repo(tmp_path) -> Repo:
    """The example repository as its first commit."""
    path = tmp_path / "example"
    shutil.copytree(EXAMPLE, path)
    git(path, "init", "-q", "-b", "main")
    repo = Repo(path)
    repo.commit("Track a ConvNet from PyTorch and an MLP from ONNX")
    return repo


@pytest.fixture
def full_sandbox():
    if not sandbox.mode().full:
        pytest.fail(f"the full sandbox is needed here: {sandbox.mode().reason}")


@pytest.fixture
def hostile_tree(tmp_path, request):
    """A commit's checkout with the test module's ``HOSTILE`` model file."""
    tree = tmp_path / "tree"
    (tree / "models").mkdir(parents=True)
    (tree / "models" / "hostile.py").write_text(request.module.HOSTILE)
    return tree
