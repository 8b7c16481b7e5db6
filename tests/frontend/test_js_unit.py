"""The front end: its JavaScript unit tests pass and its build has what templates load."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"
TEMPLATES = ROOT / "dashboard" / "templates"
STATIC_TAG = re.compile(r"""{%\s*static\s+['"]([^'"]+)['"]\s*%}""")


def static_references() -> set[str]:
    return {
        reference
        for template in TEMPLATES.rglob("*.html")
        for reference in STATIC_TAG.findall(template.read_text())
    }


def test_it_passes_the_javascript_unit_tests():
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    completed = subprocess.run(
        [npm, "--prefix", str(FRONTEND), "test"],
        capture_output=True, text=True, timeout=120, check=False,
    )

    report = completed.stdout + completed.stderr
    assert completed.returncode == 0, report
    assert re.search(r"^# fail 0$", completed.stdout, re.MULTILINE), report
    assert int(re.search(r"^# pass (\d+)$", completed.stdout, re.MULTILINE).group(1)) > 0


def test_it_finds_the_templates_static_references():
    # Guards the regular expression below: the pages do load the bundle.
    assert {"peakwatch/trend.js", "peakwatch/run.js", "peakwatch/peakwatch.css"} <= (
        static_references()
    )


def test_it_has_built_every_file_the_templates_load():
    missing = sorted(ref for ref in static_references() if finders.find(ref) is None)

    assert not missing, (
        f"static files missing: {missing}; build the front end with "
        "`npm --prefix frontend ci && npm --prefix frontend run build`"
    )
    for reference in static_references():
        if reference.startswith("peakwatch/"):
            assert Path(finders.find(reference)).is_relative_to(FRONTEND / "dist")
