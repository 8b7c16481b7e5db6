"""``pip install .`` gives a ``peakwatch`` command that works from any folder, without the
checkout: the planner's command line, the management commands, the pages and their
front end, with its data in the user's data folder."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# Session-scoped: xdist may run another file's tests between two of this file's, and a
# module-scoped fixture built again met the first build's leftovers in build/ ("File
# exists: ...dist-info", CI of 035a898).
@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """A virtual environment holding Peakwatch as a package (its requirements from the
    system's site-packages, as pip would install them), and an empty folder outside the
    checkout to run it from."""
    if not (ROOT / "frontend" / "dist" / "peakwatch" / "trend.js").is_file():
        pytest.fail("frontend/dist is missing: run bash .ci/setup first")
    home = tmp_path_factory.mktemp("installed")
    venv = home / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv],
        check=True,
    )
    # No build isolation: the system's setuptools builds it, with nothing downloaded.
    proc = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps",
         "--no-build-isolation", "--disable-pip-version-check", str(ROOT)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    env = {
        key: value for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL",
                       "PEAKWATCH_DATA_DIR", "CELERY_BROKER_URL")
    }
    env["XDG_DATA_HOME"] = str(home / "data")
    return venv / "bin" / "peakwatch", elsewhere, env, home / "data" / "peakwatch"


def peakwatch(installed, *args, check=True):
    command, folder, env, _ = installed
    proc = subprocess.run(
        [command, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_the_command_runs_the_installed_package_not_the_checkout(installed):
    out = peakwatch(installed, "shell", "-c", "import dashboard, planner; print(dashboard.__file__,"
                    " planner.__file__)").stdout
    assert str(ROOT) not in out
    assert "site-packages" in out


def test_the_planner_command_line_plans_a_problem_file(installed):
    _, folder, _, _ = installed
    (folder / "problem.csv").write_text("id,lower,upper,size\na,0,2,10\nb,1,3,10\nc,2,4,10\n")
    assert "greedy-by-size" in peakwatch(installed, "planner", "strategies").stdout
    out = peakwatch(installed, "planner", "solve", "problem.csv", "--strategy", "greedy-by-size")
    assert '"height": 20' in out.stdout
    bad = peakwatch(installed, "planner", "solve", "missing.csv", "-s", "none", check=False)
    assert bad.returncode != 0 and "missing.csv" in bad.stderr
    assert "peakwatch planner" in peakwatch(installed, "planner", "--help").stdout


def test_its_data_goes_to_the_users_data_folder(installed):
    _, folder, _, data = installed
    peakwatch(installed, "migrate", "-v", "0")
    peakwatch(installed, "track", "models", "/srv/models.git", "--github", "acme/models")
    assert (data / "peakwatch.sqlite3").is_file()
    assert not list(folder.glob("**/*.sqlite3"))


def test_it_serves_pages_and_the_front_end(installed):
    command, folder, env, _ = installed
    peakwatch(installed, "migrate", "-v", "0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [command, "runserver", "--noreload", f"127.0.0.1:{port}"], cwd=folder, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                home = urllib.request.urlopen(base + "/", timeout=5).read().decode()
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(server.stderr.read())
                time.sleep(0.5)
        else:
            pytest.fail("the installed dashboard never answered")
        assert "Peakwatch" in home
        script = urllib.request.urlopen(base + "/static/peakwatch/trend.js", timeout=5)
        assert script.status == 200 and len(script.read()) > 1000
    finally:
        server.terminate()
        server.wait(timeout=30)
