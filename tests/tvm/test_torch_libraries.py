"""A repository's file may import torchvision, timm and transformers: PyPI's torchvision,
built for a CUDA torch, is prepared for ours before the file runs, as the built-in sources
prepare it (the tracked path: tests/tracking/test_model_file_libraries.py)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("torch", "torchvision", "timm", "transformers")

USES_THE_LIBRARIES = '''import timm
import torchvision
from transformers import LlamaConfig, LlamaForCausalLM

NAMES = (torchvision.__name__, timm.__name__, LlamaForCausalLM.__name__, LlamaConfig.__name__)
'''

IMPORT_IT = '''import sys
from pathlib import Path

from planner.tvm.repo_code import import_file

print(" ".join(import_file(Path(sys.argv[1])).NAMES))
'''


def test_a_file_imports_torchvision_timm_and_transformers_in_a_fresh_process(tmp_path):
    missing = [name for name in LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (.ci/setup --test installs them)")
    model_file = tmp_path / "model.py"
    model_file.write_text(USES_THE_LIBRARIES)

    # A process of its own: this one may have imported torchvision the built-in way already.
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_IT, str(model_file)], cwd=REPO_ROOT,
        capture_output=True, text=True, timeout=300,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["torchvision", "timm", "LlamaForCausalLM", "LlamaConfig"]
