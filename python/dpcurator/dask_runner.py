"""The curator's runner (issue 28 item 3; docs/scale-out.md "The runner").

    python3 -m dpcurator.dask_runner --scheduler tcp://HOST:PORT|local \\
        --server HOST:PORT --dataset ds_... --data 'shards/*.csv' \\
        [--token-file FILE | env DPCURATOR_TOKEN] [--tls-ca PEM] [--once]

It takes the external dataset's pending jobs from the server (a curator
token), builds each job's plan from the schema and request the server
stored, computes one exact partial per CSV shard on the Dask cluster,
merges them there in a tree, and submits the merged statistic to the server,
which checks it against the plan and noises it. Progress goes to stderr.

A row that cannot be read (one an upload would refuse: an undeclared
category, a cell that is not a finite number, a wrong field count) is a
null row: counted in the partial's rows, adding nothing (docs/privacy.md
6.5). The job goes on; stderr, the curator's only, gives the count and
each such row's shard, line and message. Nothing the server or the analyst
sees depends on it. The runner never fails a job (FailJob is the curator's,
for an infrastructure fault it cannot fix: docs/scale-out.md).

Exit status: 0 when every job taken was submitted (or there was none), 1
when one was left pending by an error (a missing shard, a header the schema
cannot map, a worker lost too often, a refused submission), 2 for a usage
error.
"""

import argparse
import glob
import os
import sys
import time

import dpcurator
from dpcurator.dask import Shard, read_shard, read_shard_pandas, use_worker_malloc_environ

PROG = "python3 -m dpcurator.dask_runner"
READERS = {"upload": read_shard, "pandas": read_shard_pandas}


def log(message):
    print(f"dask_runner: {message}", file=sys.stderr, flush=True)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compute the pending releases of an external dataset on a Dask cluster "
        "and submit their exact statistics to the dpcurator server, which noises them "
        "(docs/scale-out.md).",
    )
    parser.add_argument("--scheduler", required=True,
                        help="tcp://HOST:PORT of a running Dask scheduler, or 'local' for a "
                        "LocalCluster of --workers processes on this machine")
    parser.add_argument("--server",
                        help="the dpcurator server, HOST:PORT (default: DPCURATOR_SERVER, "
                        "else 127.0.0.1:50051)")
    parser.add_argument("--dataset", required=True, help="the external dataset's id (ds_...)")
    parser.add_argument("--data", required=True,
                        help="glob of the dataset's CSV shards (each with a header line), as "
                        "the workers see them, e.g. '/shared/adult/*.csv'")
    parser.add_argument("--token-file",
                        help="file holding a curator token (default: DPCURATOR_TOKEN)")
    parser.add_argument("--tls-ca", help="PEM of the CA that signed the server's certificate "
                        "(default: DPCURATOR_TLS_CA, else the system roots)")
    parser.add_argument("--tls-cert", help="PEM client certificate (with --tls-key)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--insecure", action="store_true",
                        help="plaintext, for a server started with --insecure_dev (tests)")
    parser.add_argument("--deadline", type=int,
                        help="seconds before a server call gives up (default 120)")
    parser.add_argument("--once", action="store_true",
                        help="take the pending jobs once and exit (default: poll)")
    parser.add_argument("--poll", type=float, default=10.0,
                        help="seconds between looks for new jobs (default 10)")
    parser.add_argument("--workers", type=int, default=2,
                        help="with --scheduler local: worker processes of one thread (default 2)")
    parser.add_argument("--split-every", type=int, default=8,
                        help="partials merged per task in the reduce tree (default 8)")
    parser.add_argument("--reader", default="upload",
                        help="how a worker reads a shard: 'upload' (default), the server's own "
                        "CSV reader, streamed in chunks of rows (the fastest: "
                        "bench/dask_bench.py); 'pandas', pandas.read_csv with "
                        "dpcurator.csv_options(plan), the server's reader deciding any row "
                        "pandas fails or fills in; or MODULE:FUNCTION, a function "
                        "(plan, path) -> dpcurator.Partial or dpcurator.dask.Shard that the "
                        "workers can import (other file formats). A reader must be a total "
                        "function of the rows: a row it cannot read is a null row, counted "
                        "in the partial's rows and adding nothing (docs/privacy.md 6.5)")
    args = parser.parse_args(argv)
    try:
        args.reader_function = reader_of(args.reader)
    except (ImportError, AttributeError, ValueError) as error:
        parser.error(f"--reader {args.reader}: {error}")
    if args.split_every < 2:
        parser.error("--split-every must be at least 2")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def reader_of(name):
    if name in READERS:
        return READERS[name]
    module, colon, function = name.partition(":")
    if not colon or not module or not function:
        raise ValueError(f"not one of {', '.join(sorted(READERS))} nor MODULE:FUNCTION")
    import importlib

    return getattr(importlib.import_module(module), function)


def connect_server(args):
    token = None
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
        if not token:
            raise ValueError(f"--token-file {args.token_file} is empty")
    return dpcurator.Curator(
        server=args.server, token=token, insecure=True if args.insecure else None,
        tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key,
        deadline=args.deadline)


def connect_cluster(args):
    """(client, cluster or None)."""
    from distributed import Client, LocalCluster

    if args.scheduler == "local":
        use_worker_malloc_environ()
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), cluster
    return Client(args.scheduler), None


def _expand(pattern):
    return sorted(glob.glob(pattern))


def _partial_of(result):
    # A reader returns a Partial or a Shard (a partial and its null rows).
    return result.partial if isinstance(result, Shard) else result


def _merge(results):
    return dpcurator.merge_all(_partial_of(r) for r in results)


def _malformed_of(result):
    """(count, lines) of a shard's null rows: a few bytes, fetched by the
    runner instead of the shard's partial."""
    if isinstance(result, Shard):
        return result.malformed_rows, tuple(result.malformed_lines)
    return 0, ()


def compute(client, plan, paths, job_id, split_every=8, reader=read_shard):
    """The merged partial of every shard, computed and reduced on the
    cluster; only the merged partial comes back (and each shard's count of
    null rows, which is logged). Raises what a shard's reader raised (a
    shard that cannot be opened, a header the schema cannot map); Dask
    recomputes the partials of a lost worker by itself."""
    from distributed import as_completed

    futures = [client.submit(reader, plan, path, pure=False) for path in paths]
    shard_of = {future.key: path for future, path in zip(futures, paths)}
    done = 0
    malformed_rows = malformed_shards = 0
    try:
        for future in as_completed(futures):
            if future.status == "error":
                raise future.exception()
            done += 1
            path = shard_of[future.key]
            count, lines = client.submit(_malformed_of, future, pure=False).result()
            note = ""
            if count:
                malformed_rows += count
                malformed_shards += 1
                note = f"; {count} malformed {'row' if count == 1 else 'rows'} read as null"
            log(f"job {job_id}: shard {done}/{len(paths)} done ({os.path.basename(path)}{note})")
            for line, detail in lines:
                log(f"job {job_id}: {path}, line {line}: malformed row, read as a null row "
                    f"(counted, adding nothing): {detail}")
            if count > len(lines):
                log(f"job {job_id}: {path}: {count - len(lines)} more malformed rows")
        if malformed_rows:
            log(f"job {job_id}: {malformed_rows} malformed "
                f"{'row' if malformed_rows == 1 else 'rows'} in {malformed_shards} "
                f"{'shard' if malformed_shards == 1 else 'shards'}, each read as a null row "
                "(docs/privacy.md 6.5); the server and the analyst are not told")
        level = futures
        while len(level) > 1:
            level = [client.submit(_merge, level[i:i + split_every], pure=False)
                     for i in range(0, len(level), split_every)]
        return _partial_of(level[0].result())
    finally:
        client.cancel(futures)


def run_job(client, curator, dataset_id, job, pattern, split_every=8,
            reader=read_shard):
    """Computes and submits one job: the merged partial when the server
    took its statistic, else None (the job is left pending for a later
    runner: an error the curator fixes, never a row's contents)."""
    job_id = job["job_id"]
    try:
        plan = dpcurator.Plan.from_request(job["schema"], job["request"])
    except (ValueError, RuntimeError) as error:
        log(f"job {job_id} ({job['kind']}): this module cannot run its plan, left pending: {error}")
        return None
    if plan.digest != job["plan_digest"]:
        log(f"job {job_id}: the plan's digest differs from the server's; left pending "
            "(is this module the server's version?)")
        return None
    paths = client.submit(_expand, pattern, pure=False).result()
    if not paths:
        log(f"job {job_id}: no shard matches --data '{pattern}' on the workers; left pending")
        return None
    log(f"job {job_id} ({job['kind']}): {len(paths)} shards")
    started = time.monotonic()
    try:
        merged = compute(client, plan, paths, job_id, split_every, reader)
    except Exception as error:  # noqa: BLE001: a shard or the cluster; the job stays pending
        log(f"job {job_id}: not computed, left pending: {type(error).__name__}: {error}")
        return None
    log(f"job {job_id}: {merged.num_rows} rows merged in {time.monotonic() - started:.1f} s; "
        "submitting")
    try:
        release = curator.submit(job_id, dataset_id, merged)
    except (ValueError, RuntimeError, PermissionError) as error:
        log(f"job {job_id}: the server refused the statistic: {error}")
        return None
    log(f"job {job_id}: submitted; release {release['release_id']} is {release['state']}")
    return merged


def run_once(client, curator, args):
    """Every pending job once: True when all were submitted."""
    jobs = curator.pending_jobs(args.dataset)
    if not jobs:
        log(f"no pending jobs on {args.dataset}")
    ok = True
    for job in jobs:
        merged = run_job(client, curator, args.dataset, job, args.data, args.split_every,
                         args.reader_function)
        ok = ok and merged is not None
    return ok


def main(argv=None):
    args = parse_args(argv)
    try:
        curator = connect_server(args)
    except (OSError, ValueError, RuntimeError, PermissionError) as error:
        log(f"cannot connect to the server: {error}")
        return 1
    client, cluster = connect_cluster(args)
    try:
        while True:
            try:
                ok = run_once(client, curator, args)
            except (ValueError, RuntimeError, PermissionError) as error:
                log(f"cannot list the pending jobs: {error}")
                ok = False
            if args.once:
                return 0 if ok else 1
            time.sleep(args.poll)
    except KeyboardInterrupt:
        return 1
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


if __name__ == "__main__":
    sys.exit(main())
