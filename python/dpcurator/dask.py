"""Partials over a Dask DataFrame (docs/scale-out.md): map_partitions
computes one partial per partition where the partition lives, a tree of
merges reduces them on the cluster, and only the merged partial (a few MB
whatever the row count) reaches the caller. Dask schedules, retries and
moves the data; nothing here is a scheduler or a wire protocol."""

from typing import NamedTuple

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
    """A CSV shard the plan cannot read at all: its header (a schema column
    it does not name, a column named twice) or an empty file. Not raised
    for a row: a row that cannot be read is a null row (Shard,
    docs/privacy.md 6.5). The runner leaves the job pending on it. `shard`
    is the file, `line` its line (0 when unknown) and `detail` the module's
    message, which is for the curator only."""

    def __init__(self, shard, line, detail):
        super().__init__(f"{shard}:{line if line else '?'}: {detail}")
        self.shard = shard
        self.line = line
        self.detail = detail

    def __reduce__(self):
        # Raised on a worker, re-raised in the client: pickled by its fields.
        return (ShardError, (self.shard, self.line, self.detail))


class Shard(NamedTuple):
    """A shard's partial and what its reader read as null rows
    (docs/privacy.md 6.5): `malformed_rows` rows an upload would refuse,
    each counted in partial.num_rows with no contribution, and
    `malformed_lines`, (line, message) of the first few (the header is line
    1). The count and the lines are for the curator only: the runner prints
    them on its stderr and sends the server the partial alone."""

    partial: object
    malformed_rows: int = 0
    malformed_lines: tuple = ()


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


def read_shard(plan, path):
    """The Shard of one CSV shard with a header (a file path the worker can
    open), read by the module's upload reader: the server's own CSV rules
    (plan.read_csv_file, data::CsvTableReader), so every row an upload of
    the shard would accept is read as the upload reads it, streamed in
    chunks of rows (bounded memory). A total function of the rows: a row an
    upload would refuse is a null row (counted, no contribution) and never
    an error. A shard that cannot be opened raises OSError, a header the
    schema cannot map ShardError (the runner leaves the job pending on
    either: they depend on the files, not on a row)."""
    with open(path, "rb"):
        pass
    try:
        partial, malformed, lines = plan.read_csv_file(path)
    except ValueError as error:
        message = str(error)
        prefix = f"{path}: "
        raise ShardError(path, 0, message[len(prefix):] if message.startswith(prefix)
                         else message) from None
    return Shard(partial, malformed, tuple(lines))


def shard_partial(plan, path):
    """read_shard's partial alone: `(plan, path) -> Partial`, the shape of a
    --reader function."""
    return read_shard(plan, path).partial


def _line_records(path):
    """The number of records read_shard frames in the shard at `path`, header
    included: its non-blank lines (a blank line holds nothing but CRs), one
    record each (docs/privacy.md 6.5). None when a CR stands other than
    before an LF: pandas ends a line there, the upload reader does not (it
    drops a CR outside quotes). Read in blocks: bounded memory."""
    records = 0
    tail = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            data = tail + block
            cut = data.rfind(b"\n") + 1
            body, tail = data[:cut], data[cut:]
            if b"\r" in body:
                if body.count(b"\r") != body.count(b"\r\n"):
                    return None
                body = body.replace(b"\r\n", b"\n")
            if body.startswith(b"\n") or b"\n\n" in body:  # blank lines
                lines = body.split(b"\n")
                records += len(lines) - lines.count(b"")
            else:
                records += body.count(b"\n")
    if b"\r" in tail:
        return None
    return records + (1 if tail else 0)


def read_shard_pandas(plan, path):
    """read_shard through pandas.read_csv with csv_options(plan) and
    plan.partial(frame) (`--reader pandas`; slower than read_shard, whose
    reader streams the file in C++ with no DataFrame between:
    bench/dask_bench.py), with the upload reader as the arbiter: where
    pandas or plan.partial fails in any way, pandas fills in a cell
    (csv_options recognises no missing-value token, so a NaN is a row with
    fewer fields than the header, which the upload reader refuses), or
    pandas frames the file otherwise than by line, the shard is read again
    by read_shard, whose Shard is the answer. read_shard's records are the
    non-blank lines (docs/privacy.md 6.5); pandas lets a quoted field span
    lines and ends a line at a lone CR, so its frame is taken only when it
    has one row per non-blank line after the header and the file has no
    lone CR (a row that spans lines covers at least two non-blank lines, so
    the counts then differ). Blank lines are not skipped here: pandas would
    also skip a line of spaces, which the upload reader counts as a
    (malformed) row; a blank line reads as a row of NaN and so goes to
    read_shard, which skips it. So the result is read_shard's, malformed
    rows included (tests/python/test_shards.py)."""
    try:
        frame = pd.read_csv(path, skip_blank_lines=False, **csv_options(plan))
        records = _line_records(path)
        if (records is not None and len(frame) == records - 1
                and not frame.isna().any().any()):
            return Shard(plan.partial(frame))
    except Exception:  # noqa: BLE001: whatever pandas makes of a row, read_shard decides
        pass
    return read_shard(plan, path)


def shard_partial_pandas(plan, path):
    """read_shard_pandas's partial alone."""
    return read_shard_pandas(plan, path).partial
