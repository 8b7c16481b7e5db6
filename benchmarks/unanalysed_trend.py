"""How long a model's trend query takes on tables never analysed, with JIT on and off.

    python benchmarks/unanalysed_trend.py --commits 1000      # 1,000 x 20 x 8 = 160k results

Loads a history like benchmarks/dashboard_load.py into a database of its own
(``peakwatch_bench_unanalysed``, always fresh) with autovacuum off and no ANALYZE, then runs
the query behind the trend page's "latest" table (``Result.objects.for_model(m)
.latest_per_series()``) for every model, in a session with ``jit = on`` (PostgreSQL's
default) and with ``jit = off`` (what dashboard/settings.py sets), and prints the median and
the JIT time EXPLAIN ANALYZE reports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import dashboard_load  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--database", default="peakwatch_bench_unanalysed")
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    load_args = dashboard_load.parse_args(
        ["--commits", str(args.commits), "--database", args.database, "--server", args.server]
    )
    dashboard_load.ensure_database(args.server, args.database, fresh=True)
    dashboard_load.setup_django(f"{args.server}/{args.database}")
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'dashboard_%%'"
        )
        for (table,) in cursor.fetchall():
            cursor.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = off)')
        # The loader writes the columns it knows; text columns added since get ''.
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_name LIKE 'dashboard_%%' AND is_nullable = 'NO'"
            " AND column_default IS NULL AND data_type IN ('text', 'character varying')"
        )
        for table, column in cursor.fetchall():
            cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET DEFAULT \'\'')
    began = time.perf_counter()
    dashboard_load.load_history(load_args)
    print(f"loaded {args.commits * 20 * 8:,} results in {time.perf_counter() - began:.0f} s,"
          " never analysed", flush=True)

    from dashboard.models import Model, Result

    models = list(Model.objects.order_by("id"))
    figures = {}
    for jit in ("on", "off"):
        with connection.cursor() as cursor:
            cursor.execute(f"SET jit = {jit}")
        timings, jit_ms = [], []
        for _ in range(args.repeat):
            for model in models:
                query = Result.objects.for_model(model).latest_per_series()
                sql, params = query.query.sql_with_params()
                with connection.cursor() as cursor:
                    began = time.perf_counter()
                    cursor.execute(sql, params)
                    cursor.fetchall()
                    timings.append((time.perf_counter() - began) * 1000)
                    cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
                    plan = cursor.fetchone()[0]
                    plan = json.loads(plan) if isinstance(plan, str) else plan
                    jit_ms.append(plan[0].get("JIT", {}).get("Timing", {}).get("Total", 0.0))
        figures[jit] = (statistics.median(timings), max(timings), statistics.median(jit_ms))
        print(f"jit = {jit}: query median {figures[jit][0]:.1f} ms, max {figures[jit][1]:.1f}"
              f" ms, JIT time (EXPLAIN ANALYZE, median) {figures[jit][2]:.1f} ms"
              f" over {len(timings)} queries", flush=True)
    connection.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
