"""What one request of each dashboard page costs on its own, in one process: no server, no
other clients, so what is left is the page's own work and its queries.

    python benchmarks/dashboard_requests.py --database peakwatch_bench_full [--requests 30]

Reads a database ``benchmarks/dashboard_load.py`` loaded (on ``--server``), with the cache
in this process's memory, cleared before every request. Prints the median and the fastest
request per page, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="peakwatch_bench")
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args(argv)
    os.environ.update(
        DATABASE_URL=f"{args.server}/{args.database}", DJANGO_DEBUG="0", REDIS_URL="",
        DJANGO_SECRET_KEY="benchmark-only-secret-key-" + "x" * 40, PEAKWATCH_TLS="0",
        DJANGO_SETTINGS_MODULE="dashboard.settings", PEAKWATCH_LOG_LEVEL="WARNING",
    )
    import django

    django.setup()
    from django.core.cache import cache
    from django.test import Client
    from django.test.utils import override_settings

    from dashboard.models import Commit, Model

    model = Model.objects.select_related("repository").order_by("id").first()
    if model is None:
        raise SystemExit(f"{args.database} has no models: load it with dashboard_load.py")
    head, base = Commit.objects.filter(repository=model.repository).order_by(
        "-committed_at", "-id"
    )[:2]
    urls = {
        "overview": "/",
        "trend page": model.get_absolute_url(),
        "trend API": f"/api/models/{model.pk}/trend/",
        "compare": f"/repos/{model.repository.name}/compare/{base.sha[:12]}...{head.sha[:12]}/",
    }
    client = Client()
    print(f"| page | median ms | fastest ms | ({args.requests} requests, cache cleared) |")
    print("|---|---:|---:|---|")
    with override_settings(ALLOWED_HOSTS=["*"]):
        for name, url in urls.items():
            for _ in range(3):  # connections, templates and stored parts in place
                client.get(url)
            timings = []
            for _ in range(args.requests):
                cache.clear()
                began = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - began) * 1e3)
                assert response.status_code == 200, (url, response.status_code)
            print(f"| {name} | {statistics.median(timings):.1f} | {min(timings):.1f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
