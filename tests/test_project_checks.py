"""What drifts silently unless a test looks: migrations, lint, the planner's independence."""

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.django_db
def test_migrations_match_the_models():
    try:
        call_command("makemigrations", "--check", "--dry-run", verbosity=0)
    except SystemExit as exc:
        pytest.fail(f"models changed without a migration (makemigrations --check: {exc})")


def test_ruff_finds_nothing():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_planner_never_imports_django_or_celery():
    code = (
        "import sys, planner.tvm.compile, planner.cli, planner.strategies;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'celery', 'dashboard',"
        " 'workers')]; print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_imports_go_one_way():
    # The contracts live in pyproject.toml ([tool.importlinter]): planner core <- TVM wing
    # <- workers -> dashboard, and the dashboard never reaches the workers or TVM.
    lint_imports = Path(sys.executable).with_name("lint-imports")
    command = [str(lint_imports)] if lint_imports.exists() else ["lint-imports"]
    proc = subprocess.run([*command, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
