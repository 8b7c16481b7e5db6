"""Load the dashboard with a long history and measure how fast its pages answer.

    python benchmarks/dashboard_load.py --commits 2000            # 2,000 x 20 x 8 = 320k results
    python benchmarks/dashboard_load.py --commits 10000 --fresh   # the full 1.6M
    python benchmarks/dashboard_load.py --database peakwatch_bench_full --commits 10000 \
        --skip-load --redis redis://127.0.0.1:6379/14             # measure an existing one

1. Creates a PostgreSQL database of its own (``peakwatch_bench`` by default, on the server of
   ``--server``; never the one tests or the demo use), migrates it, and fills it with one
   repository of ``--commits`` commits x ``--models`` models x ``--strategies`` strategies on
   one board, with a run per commit and a few open alerts, through ``COPY`` (an existing
   history of the same size is reused unless ``--fresh``; ``--skip-load`` only measures).
2. Starts the real server (gunicorn, ``DJANGO_DEBUG=0``) against that database on loopback.
3. Requests the overview, a model's trend page, its trend API and commit comparisons a
   bounded number of times from ``--concurrency`` threads, after a warm-up, and prints
   p50/p95 latency per page. With ``--cold`` (needs ``--redis``) each request is preceded by
   a FLUSHDB of the server's Redis database, so no page is served from the cache: what the
   precomputed series summaries give on their own.

Targets (p95, 10 concurrent clients, cache cleared before each request): trend page and
API < 150 ms, overview < 250 ms, compare < 300 ms. Without ``--cold`` the first request for
each model's trend is also reported apart ("trend API, first").
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS_MS = {"overview": 250, "trend page": 150, "trend API": 150, "compare": 300}
STRATEGY_NAMES = [
    "tvm-stock", "none", "tvm-token-reuse", "greedy-by-size", "greedy-by-conflicts",
    "hill-climb", "best-fit", "best-fit+rewrites",
]
STRATEGY_FACTORS = [1.0, 1.7, 1.2, 0.9, 0.92, 0.86, 0.88, 0.8]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--strategies", type=int, default=8, choices=range(1, 9))
    parser.add_argument("--database", default="peakwatch_bench")
    parser.add_argument(
        "--server", default="postgres://postgres@127.0.0.1:5432",
        help="PostgreSQL server URL, without the database name",
    )
    parser.add_argument("--fresh", action="store_true", help="drop and reload the history")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per page")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument(
        "--cold", action="store_true",
        help="clear the server's cache (FLUSHDB of --redis) before every request",
    )
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--port", type=int, default=0, help="0: any free loopback port")
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument(
        "--skip-load", action="store_true",
        help="measure an existing database as it is: never create, load or VACUUM it",
    )
    parser.add_argument(
        "--redis", default=os.environ.get("REDIS_URL", ""),
        help="Redis URL for the server's shared cache (default: $REDIS_URL; empty: each"
        " worker caches in its own memory)",
    )
    return parser.parse_args(argv)


# --- the history ---------------------------------------------------------------------------


def ensure_database(server: str, name: str, fresh: bool) -> bool:
    """Create the database if needed; True when it is empty (new or dropped)."""
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and fresh:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            exists = None
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    return not exists


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only-secret-key-" + "x" * 40)
    import django

    django.setup()


def history_size(cursor) -> int:
    cursor.execute("SELECT count(*) FROM dashboard_result")
    return cursor.fetchone()[0]


class Copy:
    """Tab-separated rows buffered in memory, sent with ``COPY ... FROM STDIN``."""

    def __init__(self, cursor, table: str, columns: list[str], after: tuple[Copy, ...] = ()):
        self.cursor, self.table, self.columns = cursor, table, columns
        # Tables these rows point at: flushed first, so foreign keys hold.
        self.after = after
        self.buffer = io.StringIO()
        self.rows = 0

    def row(self, *values) -> None:
        self.buffer.write("\t".join(_copy_text(v) for v in values))
        self.buffer.write("\n")
        self.rows += 1
        if self.rows % 50_000 == 0:
            self.flush()

    def flush(self) -> None:
        for other in self.after:
            other.flush()
        data = self.buffer.getvalue()
        if not data:
            return
        columns = ", ".join(self.columns)
        with self.cursor.copy(f"COPY {self.table} ({columns}) FROM STDIN") as copy:
            copy.write(data)
        self.buffer = io.StringIO()


def _copy_text(value) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def load_history(args) -> None:
    """One repository's history, bulk-loaded: commits, runs, results, then a few alerts."""
    from django.db import connection

    from dashboard.models import Board, Model, Repository, Strategy, default_toolchain

    rng = random.Random(20261101)
    repository = Repository.objects.create(name="bench", clone_url="/nonexistent/bench.git")
    board = Board.objects.create(name="cpu")
    toolchain = default_toolchain()
    strategies = [Strategy.objects.create(name=n) for n in STRATEGY_NAMES[: args.strategies]]
    models = [
        Model.objects.create(repository=repository, name=f"model-{i:02d}", source="zoo:bench")
        for i in range(args.models)
    ]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    base_bytes = [rng.randint(200_000, 60_000_000) for _ in models]
    base_latency = [rng.uniform(0.3, 40.0) for _ in models]
    cursor = connection.cursor()
    raw = cursor.cursor  # the psycopg cursor, for COPY
    commit_ids = range(1, args.commits + 1)
    commits = Copy(raw, "dashboard_commit", [
        "id", "repository_id", "sha", "parent_sha", "branch", "author", "message",
        "committed_at",
    ])
    runs = Copy(raw, "dashboard_run", [
        "id", "repository_id", "commit_id", "status", "trigger", "progress_done",
        "progress_total", "created_at", "started_at", "finished_at", "error", "log",
        "approved_by",
    ], after=(commits,))
    results = Copy(raw, "dashboard_result", [
        "id", "run_id", "commit_id", "model_id", "strategy_id", "board_id", "toolchain_id",
        "status", "planned_bytes", "intermediate_bytes", "output_bytes", "measured_peak_bytes",
        "lower_bound_bytes", "latency_median_ms", "latency_p90_ms", "latency_samples_ms",
        "outputs_match", "max_abs_diff", "compile_seconds", "proven_optimal", "tvm_version",
        "target", "environment", "details", "error", "created_at", "cache_key",
    ], after=(commits, runs))
    per_run = len(models) * len(strategies)
    growths = []  # (commit id, model index, strategy index, before, after)
    result_id = 0
    parent = ""
    for commit_id in commit_ids:
        sha = f"{rng.getrandbits(160):040x}"
        when = start + timedelta(minutes=37 * commit_id)
        commits.row(
            commit_id, repository.pk, sha, parent, "main", f"Dev {commit_id % 17}",
            f"Change {commit_id}: tweak the lowering of op {commit_id % 97}\n\nDetails.",
            when,
        )
        parent = sha
        runs.row(
            commit_id, repository.pk, commit_id, "succeeded", "bench", per_run, per_run,
            when, when, when + timedelta(minutes=20), "", "", "",
        )
        for m, model in enumerate(models):
            # Planned bytes are exact: most commits leave a model alone, a few change it.
            if rng.random() < 0.03:
                before = base_bytes[m]
                base_bytes[m] = max(100_000, int(before * rng.uniform(0.9, 1.12)))
                if base_bytes[m] > before:
                    growths.append((commit_id, m, before, base_bytes[m]))
            for s, strategy in enumerate(strategies):
                result_id += 1
                planned = int(base_bytes[m] * STRATEGY_FACTORS[s])
                latency = base_latency[m] * (1 + 0.04 * s) * rng.uniform(0.97, 1.05)
                samples = [round(latency * rng.uniform(0.98, 1.02), 4) for _ in range(3)]
                results.row(
                    result_id, commit_id, commit_id, model.pk, strategy.pk, board.pk, toolchain,
                    "ok",
                    planned, planned - 4096, 4096, int(planned * 1.07) + 65_536,
                    int(base_bytes[m] * 0.78), round(latency, 4), round(latency * 1.1, 4),
                    samples, True, 0.0, 1.5, None, "0.27.0.post1", "llvm",
                    {"machine": "x86_64"},
                    {"measured": {"pooled": {"inference_peak_bytes": planned}}},
                    "", when, "",
                )
        if commit_id % 500 == 0:
            print(f"  generated {commit_id} commits", file=sys.stderr, flush=True)
    for copy in (commits, runs, results):
        copy.flush()
    for table in ("dashboard_commit", "dashboard_run", "dashboard_result"):
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )
    growths = [g for g in growths if g[0] > 1]
    _open_alerts(cursor, repository.pk, board.pk, toolchain, models, strategies, growths[-40:])


def _open_alerts(cursor, repository_id, board_id, toolchain_id, models, strategies,
                 growths) -> None:
    """The last bytes growths as open alerts, as detection would have raised them."""
    per_commit = len(models) * len(strategies)
    now = datetime.now(UTC)
    for commit_id, m, before, after in growths:
        s = 0
        result_id = (commit_id - 1) * per_commit + m * len(strategies) + s + 1
        baseline_id = result_id - per_commit
        cursor.execute(
            "INSERT INTO dashboard_alert (repository_id, commit_id, run_id, result_id,"
            " baseline_id, model_id, strategy_id, board_id, toolchain_id, kind,"
            " baseline_value, value, state, created_at, updated_at) VALUES"
            " (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'bytes', %s, %s, 'new', %s, %s)",
            [repository_id, commit_id, commit_id, result_id, baseline_id, models[m].pk,
             strategies[s].pk, board_id, toolchain_id, before, after, now, now],
        )


# --- the server and the load ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(url: str, port: int, workers: int, redis: str = "") -> subprocess.Popen:
    env = {
        **os.environ,
        "REDIS_URL": redis,
        # A cache version of this run's own: the cold requests are cold even in a Redis that
        # an earlier run filled.
        "PEAKWATCH_CACHE_VERSION": str(int(time.time())),
        "DATABASE_URL": url,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "benchmark-only-secret-key-" + "x" * 40,
        # Served over plain HTTP on loopback: no HTTPS redirect.
        "PEAKWATCH_TLS": "0",
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "PEAKWATCH_LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "dashboard.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/", timeout=5).read()
            return server
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("the server did not start within 60 s")


def measure(urls: list[str], requests: int, concurrency: int, before=None) -> list[float]:
    """Seconds per request: ``requests`` GETs spread over ``concurrency`` threads, each
    after calling ``before`` (untimed) when given."""
    timings: list[float] = []
    lock = threading.Lock()
    counter = iter(range(requests))

    def worker():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            url = urls[i % len(urls)]
            if before is not None:
                before()
            began = time.perf_counter()
            with urllib.request.urlopen(url, timeout=30) as response:
                response.read()
                assert response.status == 200, (url, response.status)
            elapsed = time.perf_counter() - began
            with lock:
                timings.append(elapsed)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return timings


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main(argv=None) -> int:
    args = parse_args(argv)
    url = f"{args.server}/{args.database}"
    if args.skip_load and (args.fresh or args.load_only):
        raise SystemExit("--skip-load measures an existing history: no --fresh or --load-only")
    empty = False if args.skip_load else ensure_database(args.server, args.database, args.fresh)
    setup_django(url)
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    expected = args.commits * args.models * args.strategies
    with connection.cursor() as cursor:
        loaded = history_size(cursor)
    if args.skip_load and loaded != expected:
        raise SystemExit(f"{args.database} holds {loaded:,} results, not {expected:,}")
    if not empty and loaded != expected:
        raise SystemExit(
            f"{args.database} holds {loaded:,} results, not {expected:,}: rerun with --fresh"
        )
    if empty or loaded == 0:
        began = time.perf_counter()
        load_history(args)
        loaded_in = time.perf_counter() - began
        began = time.perf_counter()
        connection.ensure_connection()
        old_autocommit = connection.get_autocommit()
        connection.set_autocommit(True)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        connection.set_autocommit(old_autocommit)
        analysed_in = time.perf_counter() - began
        began = time.perf_counter()
        # What recording each result would have stored, for the whole history at once.
        from dashboard import actions

        series = actions.summarise_all_series()
        print(
            f"loaded {expected:,} results in {loaded_in:.0f} s,"
            f" VACUUM ANALYZE {analysed_in:.0f} s,"
            f" {series} series summarised in {time.perf_counter() - began:.0f} s",
            flush=True,
        )
    if args.load_only:
        return 0
    from dashboard.models import Commit, Model

    model_ids = list(Model.objects.order_by("id").values_list("id", "name"))
    # Neighbouring commits spread over the history, as an alert's "compare" link opens.
    shas = list(Commit.objects.order_by("committed_at", "id").values_list("sha", flat=True))
    step = max(1, len(shas) // 20)
    pairs = [(shas[i - 1], shas[i]) for i in range(step, len(shas), step)][:20]
    connection.close()
    if args.cold and not args.redis:
        raise SystemExit("--cold clears the server's cache in Redis: give --redis")
    before = None
    if args.cold:
        import redis

        client = redis.Redis.from_url(args.redis)
        before = client.flushdb

    port = args.port or free_port()
    server = start_server(url, port, args.workers, args.redis)
    base = f"http://127.0.0.1:{port}"
    pages = {
        "overview": [f"{base}/"],
        "trend page": [f"{base}/repos/bench/models/{name}/" for _, name in model_ids],
        "trend API": [f"{base}/api/models/{pk}/trend/" for pk, _ in model_ids],
        "compare": [f"{base}/repos/bench/compare/{a[:12]}...{b[:12]}/" for a, b in pairs],
    }
    rows = []
    try:
        # Cold: the first request for each model computes its payload (then cached as JSON
        # bytes, in Redis with --redis so every worker shares it, keyed by the model's
        # results and alerts).
        first = measure(pages["trend API"], len(pages["trend API"]), 1)
        rows.append(("trend API, first", first, sum(first), 0))
        for name, urls in pages.items():
            # Warm-up: connections, and (unless --cold) every page cached in every worker.
            measure(urls, 3 * args.workers * len(urls), args.concurrency, before)
            began = time.perf_counter()
            timings = measure(urls, args.requests, args.concurrency, before)
            wall = time.perf_counter() - began
            with urllib.request.urlopen(urls[0], timeout=30) as response:
                size = len(response.read())
            rows.append((name, timings, wall, size))
        rows.append(rows.pop(0))
    finally:
        server.terminate()
        server.wait(timeout=30)

    print(
        f"\n{args.commits:,} commits x {args.models} models x {args.strategies} strategies"
        f" = {expected:,} results; {args.requests} requests per page,"
        f" {args.concurrency} concurrent, gunicorn {args.workers} workers,"
        f" {'cache cleared before each request' if args.cold else 'cache kept'}\n"
    )
    print("| page | p50 ms | p95 ms | max ms | req/s | response | target p95 | met |")
    print("|---|---|---|---|---|---|---|---|")
    for name, timings, wall, size in rows:
        p50, p95 = percentile(timings, 0.5) * 1000, percentile(timings, 0.95) * 1000
        target = TARGETS_MS.get(name)
        if target is None:
            print(f"| {name} | {p50:.0f} | {p95:.0f} | {max(timings) * 1000:.0f} | | | | |")
            continue
        print(
            f"| {name} | {p50:.0f} | {p95:.0f} | {max(timings) * 1000:.0f}"
            f" | {len(timings) / wall:.1f} | {size / 1024:.0f} KiB | < {target}"
            f" | {'yes' if p95 < target else 'no'} |"
        )
    mean = statistics.mean(t for _, timings, _, _ in rows for t in timings) * 1000
    print(f"\nmean over all pages: {mean:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
