#!/usr/bin/python3
"""The scale-out benchmark (issue 28, "Done when"; README "Scale-out on Dask").

Demo-table rows (core/data/demo.h, 8 columns: 4 categorical, 4 numeric) in
CSV shards outside the repository, one rff_embedding plan (the server's
default 500 frequencies, a fixed seed), and the exact statistic computed
two ways on this machine's cores:

  in-process  the engine as the server runs a release (bench/dask_bench_engine
              engine): the rows read with the upload's reader and encoded
              (the store does both once and caches the encoded rows), then
              the kind's Run on the release threads (2). rows/s is rows /
              Run's seconds: a release on a stored dataset pays only Run.
  dask        LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
              with dpcurator.dask.exact_partial over dask.dataframe.read_csv
              of the shards (blocksize=None: one partition per shard,
              dpcurator.csv_options(plan)): CSV parse, the partial and the
              tree merge all inside the timed compute.

Then where the Dask time goes: the workers' busy time (Dask's task stream),
a parse-only pass (the same read_csv, len() per partition), and one shard
on one worker split into pandas parse, the module's row conversion (a
marginals plan over one column: conversion plus a trivial count) and the
embedding (the rff partial minus the conversion). Each measurement runs
--repeat times (default 2); the machine may be shared, so read the spread.

  /usr/bin/python3 bench/dask_bench.py --build build [--data /work/dask-data]
      [--sizes 1000000,10000000] [--shards 20] [--repeat 2]

It checks that the merged partial equals the in-process statistic
(relative difference <= 1e-12) before printing any speed.
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
    """On a worker: pandas parse, row conversion and embedding of one shard."""
    import pandas as pd

    import dpcurator

    plan = dpcurator.Plan.from_request(schema, plan_bytes_request)
    convert_only = dpcurator.Plan.marginals(schema, [[0]])
    started = time.perf_counter()
    frame = pd.read_csv(path, **dpcurator.csv_options(plan))
    parse = time.perf_counter() - started
    started = time.perf_counter()
    convert_only.partial(frame)
    convert = time.perf_counter() - started
    started = time.perf_counter()
    plan.partial(frame)
    whole = time.perf_counter() - started
    return {"rows": len(frame), "parse_s": parse, "convert_s": convert,
            "embed_s": max(whole - convert, 0.0)}


def measure_dask(client, files, plan, schema, request):
    import dask.dataframe as dd
    from distributed import get_task_stream

    import dpcurator
    import dpcurator.dask

    frame = dd.read_csv(files, blocksize=None, **dpcurator.csv_options(plan))
    started = time.perf_counter()
    with get_task_stream(client) as stream:
        merged = client.compute(dpcurator.dask.exact_partial(plan, frame)).result()
    wall = time.perf_counter() - started
    busy = busy_seconds(stream.data)
    started = time.perf_counter()
    lengths = frame.map_partitions(len).compute()
    parse_wall = time.perf_counter() - started
    breakdown = client.submit(one_shard_breakdown, schema, request, files[0], pure=False).result()
    # The runner's own path (dpcurator.dask_runner.compute: a task per shard
    # with the pandas reader, a tree of merges on the cluster).
    from dpcurator import dask_runner

    dask_runner.log = lambda message: None
    started = time.perf_counter()
    by_runner = dask_runner.compute(client, plan, files, "bench")
    runner_wall = time.perf_counter() - started
    if by_runner.num_rows != merged.num_rows:
        sys.exit("the runner's path read another number of rows")
    return merged, {"wall_s": wall, "busy_s": busy, "parse_only_wall_s": parse_wall,
                    "rows_parsed": int(sum(lengths)), "one_shard": breakdown,
                    "runner_wall_s": runner_wall}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="the CMake build directory")
    parser.add_argument("--data", default="/work/dask-data",
                        help="where the shards go (outside the repository)")
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--module-dir",
                        help="where the dpcurator package is (default: BUILD/python)")
    args = parser.parse_args()
    module_dir = os.path.abspath(args.module_dir or os.path.join(args.build, "python"))
    sys.path.insert(0, module_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join([module_dir, os.environ.get("PYTHONPATH", "")])
    from distributed import Client, LocalCluster

    import dpcurator  # noqa: F401  (fail early when the module is not built)

    results = []
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

    print(f"\nrff_embedding, {FREQUENCIES} frequencies, demo table; "
          f"{os.cpu_count()} cores (shared machine: load average "
          f"{os.getloadavg()[0]:.1f} at the end)\n")
    print(f"{'rows':>10} {'try':>3} {'in-process rows/s':>18} {'(cold)':>10} "
          f"{'Dask rows/s':>12} {'ratio':>6} {'runner rows/s':>13} {'busy s':>7} "
          f"{'parse-only s':>12} {'shard: parse':>12} {'convert':>8} {'embed':>7}")
    for r in results:
        engine, dask_times = r["engine"], r["dask"]
        warm = r["rows"] / engine["run_s"]
        cold = r["rows"] / (engine["read_s"] + engine["encode_s"] + engine["run_s"])
        dask_rate = r["rows"] / dask_times["wall_s"]
        shard = dask_times["one_shard"]
        print(f"{r['rows']:>10} {r['attempt']:>3} {warm:>18,.0f} {cold:>10,.0f} "
              f"{dask_rate:>12,.0f} {100 * dask_rate / warm:>5.0f}% "
              f"{r['rows'] / dask_times['runner_wall_s']:>13,.0f} "
              f"{sum(dask_times['busy_s'].values()):>7.1f} "
              f"{dask_times['parse_only_wall_s']:>12.1f} {shard['parse_s']:>12.2f} "
              f"{shard['convert_s']:>8.2f} {shard['embed_s']:>7.2f}")
    print("\nin-process = rows / the engine's Run seconds (a release on a stored dataset; "
          "cold adds the upload reader and the encoding, done once per dataset); "
          "ratio = Dask / in-process; runner = dpcurator.dask_runner's compute (a task per "
          "shard, pandas reader); busy s = the 2 workers' task compute seconds; "
          "shard: one shard's pandas parse, the module's row conversion and the "
          "embedding on one worker, seconds.")


if __name__ == "__main__":
    main()
