"""dpcurator.synthesize: a data steward's one call from a DataFrame to
synthetic rows (issue 40; docs/python.md).

It runs what a curator and an analyst would run, on a local server of its
own: a dpcurator-server child process on a free loopback port with its
ledger in a temporary SQLite file (or ``db``, so the spent budget is kept
across calls), then the CLI's own commands in this process (client.run):
``datasets create`` (which refuses a schema with data-derived values, as
the CLI does), ``upload --csv``, ``train METHOD --dataset`` (the release and
its charge) and the model's sampler.
"""

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import warnings

from dpcurator import client as _client

# Rows synthesize() samples unless told: `dpcurator sample --rows`'s default.
# Never len(df), the private row count.
DEFAULT_SAMPLE_ROWS = 10000

# Where the server binary may be named explicitly (docs/python.md).
SERVER_BINARY_VARIABLE = "DPCURATOR_SERVER_BINARY"

# How each method is trained from a dataset: the release kind a one-shot
# embedding method needs first, or None where `train METHOD --dataset`
# makes its own release.
_RELEASE_FIRST = {"aim": None, "mst": None, "autogan": None, "kernel": None,
                  "merf": "rff_embedding", "pearl": "charfn_embedding"}


def find_server_binary():
    """The dpcurator-server to start: $DPCURATOR_SERVER_BINARY, else the one
    built beside this module (BUILD/server/dpcurator-server for the module
    in BUILD/python/dpcurator), else the first on PATH."""
    named = os.environ.get(SERVER_BINARY_VARIABLE)
    if named:
        if not os.access(named, os.X_OK):
            raise FileNotFoundError(f"{SERVER_BINARY_VARIABLE}={named} is not an executable")
        return named
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    beside = os.path.join(build, "server", "dpcurator-server")
    if os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which("dpcurator-server")
    if on_path:
        return on_path
    raise FileNotFoundError(
        "cannot find dpcurator-server: set DPCURATOR_SERVER_BINARY to its path, put it on PATH, "
        "or build it beside this module (cmake --build build --target dpcurator-server)")


@contextlib.contextmanager
def _without_connection_variables():
    """The local server is reached in plaintext with its own tokens: the
    caller's DPCURATOR_* connection variables must not redirect the calls."""
    saved = {name: value for name, value in os.environ.items()
             if name.startswith("DPCURATOR_") and name != SERVER_BINARY_VARIABLE}
    for name in saved:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(saved)


class _LocalServer:
    """A dpcurator-server child on 127.0.0.1 (a port of its choosing), its
    ledger at ``db``, stopped with SIGTERM (SIGKILL after 20 s)."""

    def __init__(self, directory, db):
        self.curator_token = "dpc_local_curator_" + secrets.token_hex(16)
        self.analyst_token = "dpc_local_analyst_" + secrets.token_hex(16)
        tokens = os.path.join(directory, "tokens.txt")
        with open(os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(f"curator {self.curator_token}\nanalyst {self.analyst_token}\n")
        port_file = os.path.join(directory, "port")
        self.log_path = os.path.join(directory, "server.log")
        command = [find_server_binary(), f"--db={db}", "--listen=127.0.0.1:0",
                   f"--tokens={tokens}", f"--port_file={port_file}", "--insecure_dev"]
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL)
        self.address = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with open(port_file) as f:
                    port = int(f.read().strip() or 0)
                if port > 0:
                    self.address = f"127.0.0.1:{port}"
                    return
            except (OSError, ValueError):
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        with open(self.log_path) as f:
            raise RuntimeError(f"the local dpcurator-server did not start: {f.read()[-2000:]}")

    def connection(self, token):
        return ["--server", self.address, "--token", token, "--insecure"]

    def close(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _schema_path(schema, directory):
    """A schema file's path, or a dict / JSON text written to one."""
    import json

    if isinstance(schema, dict):
        path = os.path.join(directory, "schema.json")
        with open(path, "w") as f:
            json.dump(schema, f)
        return path
    if isinstance(schema, str) and schema.lstrip().startswith("{"):
        path = os.path.join(directory, "schema.json")
        with open(path, "w") as f:
            f.write(schema)
        return path
    return os.fspath(schema)


def synthesize(df, schema, method="aim", epsilon=1.0, db=None, *, n=DEFAULT_SAMPLE_ROWS, seed=7,
               budget=None, delta=1e-5, name="frame", accept_data_derived=False, **options):
    """Synthetic rows of ``df`` (a pandas DataFrame) under ``epsilon``-DP:
    a DataFrame of ``n`` rows with the schema's columns.

    ``schema``: a schema file's path, or the schema as a dict (docs/schema.md).
    Its bounds and categories must be public: a schema still carrying
    ``"data_derived": true`` markers (``dpcurator schema draft``'s, read from
    the rows) is refused with the CLI's message (UsageError), because bounds
    read from the rows leak them; ``accept_data_derived=True`` publishes
    them as they are (``datasets create --accept-data-derived``).

    ``method``: aim (default), mst, merf, pearl, autogan or kernel (the
    last two need ``rows=``, a public guess of the row count); other
    keyword arguments are ``dpcurator train METHOD``'s options.

    Cost: ``epsilon`` (at ``delta``), charged to a ledger in a temporary
    SQLite file that goes away with the call, or in ``db`` (a path) so that
    what was spent is kept: a later call with the same ``db`` and ``name``
    trains on the rows stored the first time (it uploads nothing) and spends
    from what is left of ``budget`` (the dataset's epsilon cap, set when
    ``db`` first creates it; default ``epsilon``). A call the budget cannot
    pay for raises BudgetExceededError and charges nothing.

    ``n``: rows to sample; default 10,000, as ``dpcurator sample``. Not
    ``len(df)``: that is the true row count, which the epsilon does not
    protect, and rows of that count would publish it.

    The server binary: $DPCURATOR_SERVER_BINARY, the one built beside this
    module, or dpcurator-server on PATH (find_server_binary)."""
    from dpcurator import Model

    if method not in _RELEASE_FIRST:
        raise ValueError(f"synthesize: method must be one of {', '.join(_RELEASE_FIRST)}, "
                         f"got {method!r}")
    directory = tempfile.mkdtemp(prefix="dpcurator_synthesize_")
    server = None
    try:
        with _without_connection_variables():
            db_path = os.path.abspath(db) if db is not None else os.path.join(directory,
                                                                              "curator.db")
            server = _LocalServer(directory, db_path)
            curator = server.connection(server.curator_token)
            analyst = server.connection(server.analyst_token)
            _, listed, _ = _client.run("datasets list", curator + ["--json"])
            if any(d["name"] == name for d in listed["datasets"]):
                warnings.warn(f"synthesize: {db} already holds dataset '{name}': training on "
                              "the rows stored then (nothing uploaded)", UserWarning,
                              stacklevel=2)
            else:
                _client.run("datasets create", curator + [
                    "--name", name, "--schema", _schema_path(schema, directory),
                    "--epsilon", repr(float(budget if budget is not None else epsilon)),
                    "--delta", repr(float(delta)), "--json"]
                    + (["--accept-data-derived"] if accept_data_derived else []))
                rows = os.path.join(directory, "rows.csv")
                df.to_csv(rows, index=False)
                _client.run("upload", curator + ["--dataset", name, "--csv", rows, "--json"])
            model_path = os.path.join(directory, f"{method}.model")
            arguments = ["--out", model_path, "--json"] + _client._option_arguments(options)
            kind = _RELEASE_FIRST[method]
            if kind is None:
                arguments += ["--dataset", name, "--epsilon", repr(float(epsilon))] + analyst
            else:
                release_path = os.path.join(directory, f"{method}.release")
                _client.run("release", analyst + [
                    "--dataset", name, "--kind", kind, "--epsilon", repr(float(epsilon)),
                    "--out", release_path, "--json"])
                arguments += ["--release", release_path]
            _client.run(f"train {method}", arguments)
            model = Model(model_path)
            return model.sample(n, seed=seed)
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(directory, ignore_errors=True)
