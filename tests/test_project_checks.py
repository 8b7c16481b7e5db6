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


def import_circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, directly or through others (the
    strongly connected components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(module: str) -> None:
        # Recursion is as deep as the longest import chain: a few dozen modules.
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(imports.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return circles


def test_import_circles_are_found_through_other_modules():
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}

    assert import_circles(imports) == [["a", "b", "c"]]


def test_no_module_imports_itself_through_others():
    # Every import statement counts, one inside a function too: a circle there is still
    # two modules that cannot be understood, moved or tested apart.
    import grimp

    graph = grimp.build_graph("planner", "workers", "dashboard", cache_dir=None)
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}

    assert import_circles(imports) == []
