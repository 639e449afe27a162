#!/usr/bin/python3
"""The scale-out benchmark (issue 28, "Done when"; docs/benchmarks.md "Scale-out on Dask").

Demo-table rows (core/data/demo.h, 8 columns: 4 categorical, 4 numeric) in
CSV shards outside the repository, one rff_embedding plan (the server's
default 500 frequencies, a fixed seed), and the exact statistic computed
two ways on this machine's cores:

  in-process  the engine as the server runs a release (bench/dask_bench_engine
              engine): the rows read with the upload's reader and encoded
              (the store does both once and caches the encoded rows), then
              the kind's Run on the release threads (2). rows/s is rows /
              Run's seconds: a release on a stored dataset pays only Run.
  dask        LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
              the workers' malloc settings dpcurator.dask.WORKER_MALLOC_ENVIRON
              as the runner's --scheduler local sets them; --dask-malloc keeps
              Dask's) and dpcurator.dask_runner.compute, the runner's own path: a task
              per shard with the default reader (the upload reader,
              plan.partial_csv_file, streamed in chunks of rows) and a tree
              of merges on the cluster; again with --reader pandas; and the
              DataFrame path (dpcurator.dask.exact_partial over
              dask.dataframe.read_csv, one partition per shard).

Then where the Dask time goes: one shard on one worker split into the upload
reader's parse (a marginals plan over one column: the read plus a trivial
count) and the embedding (the rff partial minus the parse), and pandas'
parse, the module's row conversion and the embedding. Each measurement runs
--repeat times (default 2); the machine may be shared, so read the spread.

  /usr/bin/python3 bench/dask_bench.py --build build [--data /work/dask-data]
      [--sizes 1000000,10000000] [--shards 20] [--repeat 2]

It checks that the merged partial equals the in-process statistic
(relative difference <= 1e-12) before printing any speed.

Then (issue 41, --recipes mst,aim; --recipes '' skips them) each recipe on
the same shards, both ways under the same seeded noise source:

  in-process  the recipe as the server runs it on a stored dataset
              (dask_bench_engine recipe: plan::ComputeMstRelease /
              ComputeAimRelease over the rows read by the upload's reader);
              rows/s is rows / the recipe's seconds (cold adds the read).
  external    the runner's path for the job (dpcurator.dask_runner.compute:
              the exact tables of every clique the plan fixed, one pass over
              the shards, merged on the cluster), then the submission's path
              on the server (dask_bench_engine recipe-tables: plan::
              ComputeRecipeReleaseFromTables over the merged tables); rows/s
              is rows / (the Dask wall seconds + the server's recipe seconds).

The two artefacts must be the same bytes (the release is the same for the
same seed) before a speed is printed.

  /usr/bin/python3 bench/dask_bench.py --build build --sizes 1000000 --recipes mst,aim
      [--aim-rounds 0] [--skip-rff]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

SEED = 5
FREQUENCIES = 500
# core/data/demo.cc's DemoSchema() as a schema file (docs/schema.md).
DEMO_SCHEMA = json.dumps({
    "columns": [
        {"name": "region", "type": "CATEGORICAL", "categories": ["north", "south", "east", "west"]},
        {"name": "age", "type": "NUMERIC", "lower": 18, "upper": 80, "integer": True},
        {"name": "education", "type": "CATEGORICAL",
         "categories": ["primary", "secondary", "bachelor", "master", "doctorate"]},
        {"name": "income", "type": "NUMERIC", "lower": 5, "upper": 250},
        {"name": "plan", "type": "CATEGORICAL", "categories": ["basic", "plus", "premium"]},
        {"name": "tenure", "type": "NUMERIC", "lower": 0, "upper": 40},
        {"name": "usage", "type": "NUMERIC", "lower": 0, "upper": 60},
        {"name": "churn", "type": "CATEGORICAL", "categories": ["no", "yes"]},
    ],
    "label": "churn",
})


def engine_binary(build):
    return os.path.join(build, "bench", "dask_bench_engine")


def ensure_shards(build, directory, rows, shards):
    files = sorted(glob.glob(os.path.join(directory, "shard-*.csv")))
    if len(files) == shards:
        return files
    for path in files:
        os.remove(path)
    started = time.perf_counter()
    subprocess.run([engine_binary(build), "gen", directory, str(rows), str(shards)], check=True)
    print(f"  generated {rows} rows in {shards} shards under {directory} "
          f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return sorted(glob.glob(os.path.join(directory, "shard-*.csv")))


def run_engine(build, directory, statistic_path):
    out = subprocess.run(
        [engine_binary(build), "engine", directory, str(FREQUENCIES), str(SEED), statistic_path],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def plan_for(directory):
    import dpcurator

    schema = dpcurator.schema_from_json(DEMO_SCHEMA)
    request = dpcurator.request_from_text(
        f'dataset_id: "ds_bench" noise_multiplier: 1.0 '
        f"rff_embedding {{ num_frequencies: {FREQUENCIES} seed: {SEED} }}")
    return schema, dpcurator.Plan.from_request(schema, request)


def busy_seconds(task_stream):
    """Seconds the workers spent computing tasks, by task-name prefix."""
    by_prefix = {}
    for task in task_stream:
        prefix = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        prefix = str(prefix).rsplit("-", 1)[0]
        for step in task["startstops"]:
            if step["action"] == "compute":
                by_prefix[prefix] = by_prefix.get(prefix, 0.0) + step["stop"] - step["start"]
    return by_prefix


def one_shard_breakdown(schema, plan_bytes_request, path):
    """On a worker, one shard's phases, wall seconds (and the process's CPU
    seconds, all threads, for the embedding): the upload reader's parse (a
    marginals plan over one column: the read plus a trivial count) and its
    whole rff partial; pandas' parse, the module's row conversion and its
    rff partial of the frame."""
    import pandas as pd

    import dpcurator

    plan = dpcurator.Plan.from_request(schema, plan_bytes_request)
    convert_only = dpcurator.Plan.marginals(schema, [[0]])

    def timed(function):
        started, cpu = time.perf_counter(), time.process_time()
        result = function()
        return result, time.perf_counter() - started, time.process_time() - cpu

    _, upload_parse, upload_parse_cpu = timed(lambda: convert_only.partial_csv_file(path))
    partial, upload_whole, upload_whole_cpu = timed(lambda: plan.partial_csv_file(path))
    frame, pandas_parse, _ = timed(lambda: pd.read_csv(path, **dpcurator.csv_options(plan)))
    _, convert, _ = timed(lambda: convert_only.partial(frame))
    _, pandas_whole, _ = timed(lambda: plan.partial(frame))
    return {"rows": partial.num_rows,
            "upload_parse_s": upload_parse, "upload_parse_cpu_s": upload_parse_cpu,
            "upload_whole_s": upload_whole, "upload_whole_cpu_s": upload_whole_cpu,
            "upload_embed_s": max(upload_whole - upload_parse, 0.0),
            "pandas_parse_s": pandas_parse, "convert_s": convert,
            "embed_s": max(pandas_whole - convert, 0.0)}


def workers_cpu_seconds(client):
    """The CPU seconds every worker process has used so far, all threads."""
    return sum(client.run(time.process_time).values())


def timed_runner(client, plan, files, reader):
    """(merged partial, wall seconds, the workers' CPU seconds)."""
    from dpcurator import dask_runner

    dask_runner.log = lambda message: None
    cpu = workers_cpu_seconds(client)
    started = time.perf_counter()
    merged = dask_runner.compute(client, plan, files, "bench", reader=reader)
    wall = time.perf_counter() - started
    return merged, wall, workers_cpu_seconds(client) - cpu


def measure_dask(client, files, plan, schema, request):
    """The runner's path with each reader (a task per shard, a tree of
    merges on the cluster), then the DataFrame path (dpcurator.dask.
    exact_partial over dask.dataframe.read_csv) with its task stream."""
    import dask.dataframe as dd
    from distributed import get_task_stream

    import dpcurator
    import dpcurator.dask

    merged, runner_wall, runner_cpu = timed_runner(client, plan, files,
                                                   dpcurator.dask.shard_partial)
    by_pandas, pandas_wall, _ = timed_runner(client, plan, files,
                                             dpcurator.dask.shard_partial_pandas)
    frame = dd.read_csv(files, blocksize=None, **dpcurator.csv_options(plan))
    started = time.perf_counter()
    with get_task_stream(client) as stream:
        by_frame = client.compute(dpcurator.dask.exact_partial(plan, frame)).result()
    frame_wall = time.perf_counter() - started
    busy = busy_seconds(stream.data)
    if not by_pandas.num_rows == by_frame.num_rows == merged.num_rows:
        sys.exit("the readers read different numbers of rows")
    breakdown = client.submit(one_shard_breakdown, schema, request, files[0], pure=False).result()
    return merged, {"wall_s": runner_wall, "cpu_s": runner_cpu, "pandas_runner_wall_s": pandas_wall,
                    "frame_wall_s": frame_wall, "frame_busy_s": busy, "one_shard": breakdown}


def measure_recipe(client, build, directory, files, schema, kind, rounds):
    """The recipe in-process and on the external path (the module docstring);
    exits when the two artefacts differ."""
    import dpcurator
    import dpcurator.dask

    paths = {name: os.path.join(directory, f"{kind}-{name}")
             for name in ("in-process.pb", "request.pb", "tables.f64", "external.pb")}
    engine = json.loads(subprocess.run(
        [engine_binary(build), "recipe", directory, kind, str(rounds), str(SEED),
         paths["in-process.pb"], paths["request.pb"]],
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    with open(paths["request.pb"], "rb") as f:
        request = f.read()
    # The job's plan: the request as an external dataset's plan stores it.
    plan = dpcurator.Plan.from_request(schema, request)
    merged, dask_wall, dask_cpu = timed_runner(client, plan, files, dpcurator.dask.shard_partial)
    if merged.values.size != engine["table_cells"]:
        sys.exit(f"{kind}: the module's tables have {merged.values.size} cells, the server's "
                 f"plan {engine['table_cells']}")
    merged.values.astype("<f8").tofile(paths["tables.f64"])
    server = json.loads(subprocess.run(
        [engine_binary(build), "recipe-tables", kind, str(rounds), str(SEED),
         paths["tables.f64"], paths["external.pb"]],
        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    with open(paths["in-process.pb"], "rb") as a, open(paths["external.pb"], "rb") as b:
        in_process, external = a.read(), b.read()
    if not in_process or in_process != external:
        sys.exit(f"{kind}: the external release differs from the in-process one "
                 f"({len(external)} and {len(in_process)} bytes)")
    return {"engine": engine, "dask_wall_s": dask_wall, "dask_cpu_s": dask_cpu,
            "server_s": server["run_s"], "server_cpu_s": server["run_cpu_s"],
            "rows_merged": merged.num_rows, "artefact_bytes": len(external),
            "equal": True}


def print_recipes(recipes):
    if not recipes:
        return
    load = os.getloadavg()
    print(f"\nmst and aim (issue 41), demo table, epsilon 1, seeded noise; load average "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end\n")
    print(f"{'kind':>4} {'rows':>10} {'try':>3} {'tables':>6} {'cells':>7} {'in-process':>11} "
          f"{'(cold)':>9} {'external':>10} {'ratio':>6} {'Dask s':>7} {'server s':>8} "
          f"{'recipe s':>8} {'same':>5}")
    for r in recipes:
        engine = r["engine"]
        warm = r["rows"] / engine["run_s"]
        cold = r["rows"] / (engine["read_s"] + engine["run_s"])
        external = r["rows"] / (r["dask_wall_s"] + r["server_s"])
        print(f"{r['kind']:>4} {r['rows']:>10} {r['attempt']:>3} {engine['tables']:>6} "
              f"{engine['table_cells']:>7} {warm:>11,.0f} {cold:>9,.0f} {external:>10,.0f} "
              f"{100 * external / warm:>5.0f}% {r['dask_wall_s']:>7.2f} {r['server_s']:>8.2f} "
              f"{engine['run_s']:>8.2f} {'yes' if r['equal'] else 'NO':>5}")
    print("\nrows/s. in-process = rows / the recipe's seconds on the stored rows (cold adds "
          "the upload reader's read); external = rows / (the runner's Dask compute of every "
          "table the plan fixed + the server's recipe over the submitted tables); Dask s, "
          "server s: those two; recipe s: the in-process recipe; same: the two artefacts "
          "are the same bytes.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="the CMake build directory")
    parser.add_argument("--data", default="/work/dask-data",
                        help="where the shards go (outside the repository)")
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dask-malloc", action="store_true",
                        help="leave the workers' malloc settings at Dask's (MALLOC_TRIM_THRESHOLD_"
                        "=65536) instead of dpcurator.dask.WORKER_MALLOC_ENVIRON, as the runner's "
                        "--scheduler local sets them")
    parser.add_argument("--recipes", default="mst,aim",
                        help="issue 41: the recipes to run both ways ('' for none)")
    parser.add_argument("--aim-rounds", type=int, default=0,
                        help="aim's rounds (0: the server's default, 16 a column)")
    parser.add_argument("--skip-rff", action="store_true",
                        help="only the recipes (not the rff_embedding rows)")
    parser.add_argument("--module-dir",
                        help="where the dpcurator package is (default: BUILD/python)")
    args = parser.parse_args()
    module_dir = os.path.abspath(args.module_dir or os.path.join(args.build, "python"))
    sys.path.insert(0, module_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join([module_dir, os.environ.get("PYTHONPATH", "")])
    from distributed import Client, LocalCluster

    import dpcurator  # noqa: F401  (fail early when the module is not built)
    import dpcurator.dask

    if not args.dask_malloc:
        dpcurator.dask.use_worker_malloc_environ()

    results = []
    recipes = []
    kinds = [kind for kind in args.recipes.split(",") if kind]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for rows in [int(size) for size in args.sizes.split(",")]:
            directory = os.path.join(args.data, f"demo-{rows}")
            files = ensure_shards(args.build, directory, rows, args.shards)
            schema, plan = plan_for(directory)
            request = dpcurator.request_from_text(
                f'dataset_id: "ds_bench" noise_multiplier: 1.0 '
                f"rff_embedding {{ num_frequencies: {FREQUENCIES} seed: {SEED} }}")
            statistic_path = os.path.join(directory, "engine_statistic.f64")
            for attempt in range(args.repeat):
                for kind in kinds:
                    record = measure_recipe(client, args.build, directory, files, schema, kind,
                                            args.aim_rounds if kind == "aim" else 0)
                    record.update(kind=kind, rows=rows, attempt=attempt + 1)
                    recipes.append(record)
                    print(json.dumps(record), file=sys.stderr)
                if args.skip_rff:
                    continue
                engine = run_engine(args.build, directory, statistic_path)
                exact = np.fromfile(statistic_path, dtype="<f8")
                merged, dask_times = measure_dask(client, files, plan, schema, request)
                difference = float(np.linalg.norm(merged.values - exact) /
                                   max(np.linalg.norm(exact), 1e-300))
                if merged.num_rows != rows or difference > 1e-12:
                    sys.exit(f"the Dask partial differs from the engine: rows "
                             f"{merged.num_rows} vs {rows}, relative difference {difference:.3g}")
                record = {"rows": rows, "attempt": attempt + 1, "engine": engine,
                          "dask": dask_times, "relative_difference": difference}
                results.append(record)
                print(json.dumps(record), file=sys.stderr)

    print_recipes(recipes)
    if args.skip_rff:
        return
    load = os.getloadavg()
    print(f"\nrff_embedding, {FREQUENCIES} frequencies, demo table; "
          f"{os.cpu_count()} cores (shared machine: load average "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end)\n")
    print(f"{'rows':>10} {'try':>3} {'in-process':>11} {'(cold)':>9} {'Dask':>10} "
          f"{'ratio':>6} {'CPU ratio':>9} {'pandas':>10} {'frame':>10} | {'shard: parse':>12} "
          f"{'embed':>6} {'pandas':>7} {'convert':>8} {'embed':>6}")
    for r in results:
        engine, dask_times = r["engine"], r["dask"]
        warm = r["rows"] / engine["run_s"]
        cold = r["rows"] / (engine["read_s"] + engine["encode_s"] + engine["run_s"])
        dask_rate = r["rows"] / dask_times["wall_s"]
        shard = dask_times["one_shard"]
        print(f"{r['rows']:>10} {r['attempt']:>3} {warm:>11,.0f} {cold:>9,.0f} "
              f"{dask_rate:>10,.0f} {100 * dask_rate / warm:>5.0f}% "
              f"{100 * engine['run_cpu_s'] / dask_times['cpu_s']:>8.0f}% "
              f"{r['rows'] / dask_times['pandas_runner_wall_s']:>10,.0f} "
              f"{r['rows'] / dask_times['frame_wall_s']:>10,.0f} | "
              f"{shard['upload_parse_s']:>12.2f} {shard['upload_embed_s']:>6.2f} "
              f"{shard['pandas_parse_s']:>7.2f} {shard['convert_s']:>8.2f} "
              f"{shard['embed_s']:>6.2f}")
    print("\nrows/s. in-process = rows / the engine's Run seconds (a release on a stored "
          "dataset; cold adds the upload reader and the encoding, done once per dataset); "
          "Dask = dpcurator.dask_runner's compute with its default reader (the upload "
          "reader, plan.partial_csv_file: a task per shard, a tree of merges); ratio = "
          "Dask / in-process; CPU ratio = the CPU seconds of the engine's Run / those of "
          "the Dask workers' processes during the runner's compute (what the wall ratio "
          "would be on idle cores); pandas = the same with --reader pandas; frame = "
          "dpcurator.dask.exact_partial over dask.dataframe.read_csv. shard: one shard on "
          "one worker, seconds: the upload reader's parse and the embedding (its partial "
          "minus the parse); pandas' parse, the module's conversion and the embedding.")


if __name__ == "__main__":
    main()
