"""Partials over a Dask DataFrame (docs/scale-out.md): map_partitions
computes one partial per partition where the partition lives, a tree of
merges reduces them on the cluster, and only the merged partial (a few MB
whatever the row count) reaches the caller. Dask schedules, retries and
moves the data; nothing here is a scheduler or a wire protocol."""

import dask
import pandas as pd

from dpcurator import merge_all


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
