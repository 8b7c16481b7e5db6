"""The latency alert's significance test gives SciPy's p-values without importing SciPy's
statistics (a second of every worker's and web process's start)."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import mannwhitneyu

from dashboard.detection import mann_whitney_greater

ROOT = Path(__file__).resolve().parents[2]


def _cases():
    rng = random.Random(7)
    for _ in range(600):
        n1, n2 = rng.randint(1, 14), rng.randint(1, 14)
        # Few decimals make ties, many make none: both of SciPy's methods are reached.
        pool = [round(rng.gauss(1.0, 0.2), rng.choice([1, 2, 6])) for _ in range(n1 + n2)]
        x, y = pool[:n1], pool[n1:]
        if rng.random() < 0.3:
            x = [value + 0.3 for value in x]
        yield x, y
    yield [1.0, 1.0], [1.0, 1.0, 1.0]  # every value the same
    yield [2.0] * 10, [1.0] * 10
    yield [5.0], [1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0]


def test_it_gives_scipys_p_value_exact_and_approximate_with_and_without_ties():
    for x, y in _cases():
        want = float(mannwhitneyu(x, y, alternative="greater").pvalue)
        got = mann_whitney_greater(x, y)
        if math.isnan(want):
            assert math.isnan(got), (x, y)
        else:
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (x, y)


def test_detection_imports_no_scipy():
    code = (
        "import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'dashboard.settings')\n"
        "import django; django.setup()\n"
        "from dashboard.detection import latency_test\n"
        "print(latency_test([2.0] * 10, [1.0] * 10, min_increase=0.05, alpha=0.01)[0],\n"
        "      'scipy.stats' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False"]
