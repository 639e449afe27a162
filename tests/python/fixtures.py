"""Shared pieces of the Python module's tests: the test schema, plans of
each kind, and CSV shards of random rows that exercise what the server's
reader does (clamping, aliases, missing tokens, whitespace, a category
that looks like a number)."""

import os
import random
import time

import dpcurator

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_PATH = os.path.join(HERE, "test_schema.json")
HEADER = ["age", "hours", "workclass", "Y"]
WORKCLASS = ["Private", "Self-emp", "Gov", "01", "", "?", " Gov "]
LABELS = ["<=50K", ">50K", "<=50K.", ">50K."]


def schema_bytes():
    with open(SCHEMA_PATH) as f:
        return dpcurator.schema_from_json(f.read())


def plans():
    """One plan of each kind, as a server would have resolved it."""
    schema = schema_bytes()
    return {
        "rff_embedding": dpcurator.Plan.from_request(
            schema,
            dpcurator.request_from_text(
                'dataset_id: "ds_test" noise_multiplier: 1.0 '
                "rff_embedding { num_frequencies: 64 seed: 11 }"
            ),
        ),
        "charfn_embedding": dpcurator.Plan.from_request(
            schema,
            dpcurator.request_from_text(
                'dataset_id: "ds_test" noise_multiplier: 1.0 '
                "charfn_embedding { num_frequencies: 48 seed: 5 }"
            ),
        ),
        "marginals": dpcurator.Plan.marginals(schema, [[0], [2], [0, 3], [1, 2, 3]]),
        # Issue 41: the recipes' tables (every 1-way and pair; the named
        # workload's closure), as the server stores the resolved request.
        "mst": dpcurator.Plan.from_request(
            schema, dpcurator.request_from_text('dataset_id: "ds_test" epsilon: 1 mst {}')
        ),
        "aim": dpcurator.Plan.from_request(
            schema,
            dpcurator.request_from_text(
                'dataset_id: "ds_test" epsilon: 1 aim { '
                'workload { columns: "age" columns: "Y" } '
                'workload { columns: "hours" columns: "workclass" columns: "Y" } '
                "max_model_cells: 10000000 rounds: 8 }"
            ),
        ),
    }


def random_csv(num_rows, seed):
    """CSV text (header first) of num_rows random rows."""
    rng = random.Random(seed)
    lines = [",".join(HEADER)]
    for _ in range(num_rows):
        age = rng.randint(10, 95)  # some outside [17, 90]: clamped
        hours = rng.uniform(-5.0, 105.0)  # full precision, some clamped
        lines.append(
            f"{age},{hours!r},{rng.choice(WORKCLASS)},{rng.choice(LABELS)}"
        )
    return "\n".join(lines) + "\n"


def write_shards(directory, num_shards, rows_per_shard, seed):
    """num_shards CSV files; returns (their paths, the whole table's CSV)."""
    paths = []
    body = []
    for shard in range(num_shards):
        text = random_csv(rows_per_shard, seed * 1000 + shard)
        path = os.path.join(directory, f"shard-{shard:02d}.csv")
        with open(path, "w") as f:
            f.write(text)
        paths.append(path)
        body.extend(text.splitlines()[1:])
    whole = ",".join(HEADER) + "\n" + "\n".join(body) + "\n"
    return paths, whole


def relative_difference(a, b):
    import numpy as np

    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def slow_shard_partial(plan, path):
    """dpcurator.dask.shard_partial after a one-second pause: the runner's
    fault tests need a job that lasts long enough to kill a worker or the
    runner in the middle of it, whatever the machine's load
    (`--reader fixtures:slow_shard_partial`; the workers import this file
    through PYTHONPATH)."""
    from dpcurator.dask import shard_partial

    time.sleep(1.0)
    return shard_partial(plan, path)
