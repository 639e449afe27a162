"""dpcurator for Python (issue 28; docs/scale-out.md).

Two audiences, one module built from the same C++ as the server and client:

* A curator's cluster: exact partials of the one-shot sum-over-rows release
  kinds (rff_embedding, charfn_embedding with a declared length-scale,
  marginals) over blocks of rows, merged on the cluster. Nothing here adds
  noise: a partial is the exact statistic of its rows and stays inside the
  curator's trust boundary; the server noises the merged statistic once.
* The curator's runner (``python3 -m dpcurator.dask_runner``): ``Curator``
  takes an external dataset's pending jobs from the server and submits their
  merged statistics, which the server noises.
* Analysts: ``load_model(path).sample(n, seed)`` draws synthetic rows from a
  model file into a pandas DataFrame, the same rows ``dpcurator sample``
  writes for that model and seed.
* Analysts and curators (docs/python.md): ``connect(...)`` returns a Client
  whose calls (datasets, budget, release, train, sessions) run the CLI's own
  commands in this process, raising ``Error`` subclasses with the CLI's
  messages; ``evaluate`` and ``report`` judge synthetic rows locally.
* Stewards: ``synthesize(df, schema=..., method="aim", epsilon=1)`` runs a
  local server with its own ledger and returns synthetic rows.
"""

from dpcurator import _core
from dpcurator._core import Partial, Plan, merge, request_from_text, schema_from_json
from dpcurator.client import (BudgetExceededError, Client, Error, PermissionDeniedError,
                              RefusedError, Release, ServerError, UsageError, command_help,
                              connect, evaluate, report, run)
from dpcurator.steward import find_server_binary, synthesize

__all__ = [
    "BudgetExceededError",
    "Client",
    "Curator",
    "Error",
    "Model",
    "PermissionDeniedError",
    "RefusedError",
    "Release",
    "ServerError",
    "UsageError",
    "command_help",
    "connect",
    "evaluate",
    "find_server_binary",
    "report",
    "run",
    "synthesize",
    "Partial",
    "Plan",
    "csv_options",
    "load_model",
    "merge",
    "merge_all",
    "request_from_text",
    "schema_from_json",
]


class Model:
    """A tabular model file (``dpcurator train ... --out FILE``)."""

    def __init__(self, path):
        self.path = str(path)
        self._model = _core.load_model(self.path)
        # What `train --json` said of it, when Client.train wrote it.
        self.info = None

    @property
    def method(self):
        return self._model.method

    def sample(self, n, seed=7):
        """n synthetic rows as a DataFrame: the rows, columns, values and
        types ``dpcurator sample --rows n --seed seed`` writes (categories as
        text, integer columns as int64, others float64 at the CSV's
        precision).

        Free: sampling is post-processing of the model, no server and no
        epsilon.

        Raises ValueError for n < 1, and MemoryError, before sampling
        anything, when the DataFrame could not fit in half of the memory
        this process may still use (``dpcurator sample --out FILE.csv``
        streams any number of rows to disk instead)."""
        import pandas as pd

        n = int(n)
        if n < 1:
            raise ValueError(f"sample: n must be at least 1, got {n}")
        _check_sample_fits(self, n)
        data = {}
        for name, kind, values in self._model.sample_columns(n, int(seed)):
            if kind == "integer":
                data[name] = pd.Series(values).astype("int64")
            elif kind == "float":
                data[name] = pd.Series(values, dtype="float64")
            else:
                data[name] = pd.Series(values, dtype=object)
        return pd.DataFrame(data)

    def sample_to_csv(self, path, n, seed=7):
        """``dpcurator sample --model ... --rows n --seed seed --out path``
        in this process: any number of rows streamed to a CSV, refused
        before writing when its disk cannot hold them (UsageError). Returns
        ``sample --json``'s dict. Free: no server, no epsilon."""
        from dpcurator.client import run

        return run("sample", ["--model", self.path, "--rows", int(n), "--seed", int(seed),
                              "--out", str(path), "--json"])[1]

    def __fspath__(self):
        return self.path

    def bytes_per_row(self):
        """An upper estimate of the memory one sampled row takes while
        ``sample`` builds its DataFrame: a number is held three times (the
        sampler's vector, the array, the DataFrame's column) at 8 bytes, a
        text cell as the sampler's string and a Python str (about 128
        bytes)."""
        per_kind = {"integer": 3 * 8, "float": 3 * 8, "text": _TEXT_CELL_BYTES}
        return sum(per_kind[kind] for _, kind, _ in self._model.sample_columns(1, 0))


_TEXT_CELL_BYTES = 128


def _available_memory_bytes():
    """What this process may still allocate: MemAvailable from
    /proc/meminfo, or less when a cgroup v2 limit leaves less; None when
    neither can be read."""
    candidates = []
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    candidates.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as limit_file:
            limit = limit_file.read().strip()
        with open("/sys/fs/cgroup/memory.current") as current_file:
            current = int(current_file.read().strip())
        if limit != "max":
            candidates.append(max(int(limit) - current, 0))
    except (OSError, ValueError):
        pass
    return min(candidates) if candidates else None


def _check_sample_fits(model, n):
    """MemoryError when n rows could not fit in half of what is available
    (the CLI refuses sizes its disk cannot hold the same way, up front)."""
    available = _available_memory_bytes()
    if available is None:
        return
    per_row = model.bytes_per_row()
    needed = n * per_row
    if needed > available / 2:
        raise MemoryError(
            f"sample({n}) would need about {needed / 1e9:.3g} GB of memory "
            f"({per_row} bytes a row) and this machine has {available / 1e9:.3g} GB "
            f"available; nothing was sampled. Ask for at most {int(available / 2 / per_row)} "
            f"rows, or stream them to disk: dpcurator sample --model {model.path} "
            f"--rows {n} --out FILE.csv"
        )


def load_model(path):
    """Reads a tabular model file; image models are refused. Free: no
    server, no epsilon."""
    return Model(path)


def csv_options(plan):
    """Keyword arguments for pandas.read_csv / dask.dataframe.read_csv that
    read a shard as the server reads an upload: categorical columns as
    pandas categoricals of their text (so '01' stays '01' and the schema's
    missing tokens reach the schema; the module parses each distinct text
    once, which is what makes the scale-out benchmark's row conversion
    cheap), no pandas missing-value guessing."""
    return {"dtype": {name: "category" for name in plan.categorical_columns},
            "keep_default_na": False}


class Curator:
    """The runner's server calls (RunnerService) with a curator token, over
    the CLI's own connection code: the same TLS options and environment
    variables as ``dpcurator`` (DPCURATOR_SERVER, DPCURATOR_TOKEN,
    DPCURATOR_TLS_CA, ...). An argument left None falls back to its
    variable, then to the CLI's default."""

    def __init__(self, server=None, token=None, *, insecure=None, tls_ca=None, tls_cert=None,
                 tls_key=None, deadline=None):
        arguments = []
        for option, value in (("server", server), ("token", token), ("tls-ca", tls_ca),
                              ("tls-cert", tls_cert), ("tls-key", tls_key),
                              ("deadline", deadline)):
            if value is not None:
                arguments += [f"--{option}", str(value)]
        if insecure is not None:
            arguments.append("--insecure" if insecure else "--insecure=false")
        self._curator = _core.Curator(arguments)

    @property
    def address(self):
        return self._curator.address

    def pending_jobs(self, dataset_id):
        """The dataset's pending jobs, oldest first: dicts of job_id,
        dataset_id, kind, schema (bytes), request (bytes), plan_digest
        (bytes) and created_unix. Plan.from_request(job["schema"],
        job["request"]) is the job's plan."""
        return self._curator.pending_jobs(dataset_id)

    def submit(self, job_id, dataset_id, partial):
        """Sends the merged partial's exact statistic, row count and plan
        digest; the server checks them against the job and noises the
        statistic. Returns the release's id, dataset_id, kind and state."""
        return self._curator.submit(job_id, dataset_id, partial)

    def fail(self, job_id, dataset_id, reason):
        """Marks the job failed; the analyst is told only that it failed in
        the curator's cluster. For infrastructure faults only (shards lost
        for good, a cluster that cannot run the job): never because of what
        a row holds, or whether the job fails would tell the analyst about
        that row (docs/privacy.md 6.5; the runner reads such a row as a
        null row and never calls this). `reason` must name no cell's
        value."""
        self._curator.fail(job_id, dataset_id, reason)


def merge_all(partials):
    """The sum of an iterable of partials of one plan (at least one)."""
    total = None
    for partial in partials:
        total = partial if total is None else total.merge(partial)
    if total is None:
        raise ValueError("merge_all needs at least one partial")
    return total
