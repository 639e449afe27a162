"""Partials over a Dask DataFrame (docs/scale-out.md): map_partitions
computes one partial per partition where the partition lives, a tree of
merges reduces them on the cluster, and only the merged partial (a few MB
whatever the row count) reaches the caller. Dask schedules, retries and
moves the data; nothing here is a scheduler or a wire protocol."""

import dask
import pandas as pd

from dpcurator import csv_options, merge_all

# glibc malloc settings for the worker processes. Dask's nanny starts
# workers with MALLOC_TRIM_THRESHOLD_=65536 (its distributed.nanny.
# pre-spawn-environ), which also turns off glibc's adaptive mmap threshold:
# every allocation over 128 KiB is then a fresh mmap, and a partial's
# per-chunk buffers (the encoded rows, the feature blocks) page-fault anew
# on every chunk. Measured on the 1M-row benchmark (bench/dask_bench.py,
# load 8.6-8.9 on 2 cores): the workers used 3.4-3.6 CPU seconds with
# Dask's setting and 2.1-2.2 with these (buffers up to 32 MiB come from the
# heap, and the heap is trimmed past 256 MiB free). The engine's server
# runs with glibc's defaults.
WORKER_MALLOC_ENVIRON = {
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
}


def use_worker_malloc_environ():
    """Sets WORKER_MALLOC_ENVIRON in this process's Dask configuration, so
    that workers started from it after the call (a LocalCluster) get it;
    Dask's other pre-spawn variables (the BLAS thread caps) are kept.
    Workers started by `dask-worker` read it from a Dask config file
    (docs/scale-out.md)."""
    import distributed  # noqa: F401  (registers the nanny's defaults)

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    environ.update(WORKER_MALLOC_ENVIRON)
    dask.config.set({"distributed.nanny.pre-spawn-environ": environ})


class ShardError(ValueError):
    """Rows of a CSV shard that the plan cannot read (the runner fails the
    job on it). `shard` is the file, `line` its line (1 is the header; 0
    when unknown) and `detail` the module's message, which is for the
    curator only: it may quote a categorical cell."""

    def __init__(self, shard, line, detail):
        super().__init__(f"{shard}:{line if line else '?'}: {detail}")
        self.shard = shard
        self.line = line
        self.detail = detail

    def __reduce__(self):
        # Raised on a worker, re-raised in the client: pickled by its fields.
        return (ShardError, (self.shard, self.line, self.detail))


def _partial_series(block, plan):
    # One object per partition: map_partitions wants a pandas object back.
    return pd.Series([plan.partial(block)], dtype=object)


def _merge_series(*parts):
    return merge_all(p for series in parts for p in series)


def exact_partial(plan, frame, split_every=8):
    """A dask Delayed of the merged partial of every row of `frame` (a
    dask.dataframe read with dpcurator.csv_options(plan)). Nothing is noised:
    the result must stay inside the curator's cluster."""
    if split_every < 2:
        raise ValueError("split_every must be at least 2")
    series = frame.map_partitions(_partial_series, plan, meta=pd.Series(dtype=object))
    level = [dask.delayed(_merge_series)(part) for part in series.to_delayed()]
    while len(level) > 1:
        level = [
            dask.delayed(merge_all)(level[i : i + split_every])
            for i in range(0, len(level), split_every)
        ]
    return level[0]


def _line_of(message, shard):
    """(line, detail) of the module's CSV reader's message
    "<shard>:<line>: <detail>" (core/data/csv.cc); line 0 when it names
    none (a header or encoding error: "<shard>: <detail>")."""
    prefix = f"{shard}:"
    if not message.startswith(prefix):
        return 0, message
    rest = message[len(prefix):]
    number, colon, detail = rest.partition(":")
    if colon and number.isdigit():
        return int(number), detail.strip()
    return 0, rest.strip()


def shard_partial(plan, path):
    """The exact partial of one CSV shard with a header (a file path the
    worker can open), read by the module's upload reader: the server's own
    CSV rules (plan.partial_csv_file, data::CsvTableReader), so a shard is
    read exactly as an upload of it would be, streamed in chunks of rows
    (bounded memory). A malformed row raises ShardError with the shard and
    line; a shard that cannot be opened raises OSError (the runner leaves
    the job pending)."""
    with open(path, "rb"):
        pass
    try:
        return plan.partial_csv_file(path)
    except ValueError as error:
        line, detail = _line_of(str(error), path)
        raise ShardError(path, line, detail) from None


def shard_partial_pandas(plan, path):
    """shard_partial through pandas.read_csv with csv_options(plan) and
    plan.partial(frame) (`--reader pandas`; slower than shard_partial,
    whose reader streams the file in C++ with no DataFrame between:
    bench/dask_bench.py), with the
    upload reader as the arbiter: where pandas fails, or fills in a cell
    (csv_options recognises no missing-value token, so a NaN is a row with
    fewer fields than the header, which the upload reader refuses), the
    shard is read again by shard_partial, whose partial or ShardError (with
    the line) is the answer."""
    try:
        frame = pd.read_csv(path, **csv_options(plan))
        if not frame.isna().any().any():
            return plan.partial(frame)
    except ValueError:
        pass
    return shard_partial(plan, path)
