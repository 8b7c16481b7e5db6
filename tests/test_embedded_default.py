"""The main command's embedded default works in a fresh clone: no server, no var/ folder."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_fresh_data_folder_is_created_and_migrated_with_sqlite(tmp_path):
    data = tmp_path / "not-yet-there"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="dashboard.settings", PEAKWATCH_DATA_DIR=str(data))

    proc = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )

    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (data / "peakwatch.sqlite3").stat().st_size > 0
