"""The analysts' and curators' client (issue 40; docs/python.md).

Every call runs the `dpcurator` command it names in this process
(``_core.run_command``: the CLI's command table, option parser, connection,
checks, retry rules, messages and exit statuses) with ``--json``, and turns
its JSON document into Python values and its refusal into an exception. No
call here speaks the protocol itself, so the CLI and Python cannot drift.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import warnings
import weakref

from dpcurator import _core

# The CLI's exit statuses (docs/json.md, "Exit status").
_EXIT_USAGE = 2
_EXIT_REFUSED = 3
_EXIT_PENDING = 5


class Error(Exception):
    """A `dpcurator` command failed. ``str(error)`` is the CLI's message
    (what went wrong and what to do).

    Attributes: ``message`` (that text), ``code`` (the status code's name:
    ``RESOURCE_EXHAUSTED``, ``INVALID_ARGUMENT``, ...), ``exit_status`` (the
    CLI's, docs/json.md), ``command`` (e.g. ``"release"``),
    ``may_have_charged`` (True only when the request may have been admitted
    and charged: retry with ``key=idempotency_key`` to get the stored
    release at no second charge; False: nothing was charged), ``charged``
    (the same), ``idempotency_key`` and ``release_id`` (where the CLI names
    them), ``log`` (what else the command wrote to stderr)."""

    def __init__(self, message, *, code, exit_status, command, may_have_charged=False,
                 idempotency_key=None, release_id=None, log=""):
        super().__init__(message)
        self.message = message
        self.code = code
        self.exit_status = exit_status
        self.command = command
        self.may_have_charged = bool(may_have_charged)
        self.idempotency_key = idempotency_key
        self.release_id = release_id
        self.log = log

    @property
    def charged(self):
        """False when nothing was charged; True when the request may have
        been (may_have_charged)."""
        return self.may_have_charged


class UsageError(Error, ValueError):
    """A bad option, file, schema or name (exit status 2): nothing was sent
    or charged."""


class RefusedError(Error):
    """The server refused the request (exit status 3) before admitting it:
    nothing was charged."""


class BudgetExceededError(RefusedError):
    """The dataset's budget cannot pay for the request: nothing was
    charged."""


class PermissionDeniedError(RefusedError, PermissionError):
    """The token is missing, unknown or of the wrong role: nothing was
    charged."""


class ServerError(Error):
    """The server could not be reached, or the request failed after it was
    sent (exit status 1): see may_have_charged."""


# Commands that charge a ledger without printing a JSON outcome on failure:
# a failure of theirs that is no refusal may have charged (the CLI's
# MayHaveCharged rule on the status code), unless the CLI's message says
# otherwise. `release` prints its outcome as JSON once the request was sent
# (may_have_charged), and nothing was requested when it printed none.
_CHARGING = {"session open", "train aim", "train mst", "train autogan", "train kernel"}


def _may_have_charged(command, exit_status, message, details, result):
    if "may_have_charged" in details:
        return bool(details["may_have_charged"])
    if exit_status in (_EXIT_USAGE, _EXIT_REFUSED):
        return False  # refused before admission (docs/json.md, "Exit status")
    if "nothing was charged" in message or "nothing was requested" in message:
        return False
    if "may have been charged" in message:  # client::ReleaseRpcError's words
        return True
    return command in _CHARGING and result["may_have_charged"]


def _error_class(exit_status, code):
    if exit_status == _EXIT_USAGE:
        return UsageError
    if exit_status == _EXIT_REFUSED:
        if code == "RESOURCE_EXHAUSTED":
            return BudgetExceededError
        if code in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
            return PermissionDeniedError
        return RefusedError
    return ServerError


def _option_arguments(options):
    """Keyword arguments as the CLI's options: ``max_model_cells=10`` is
    ``--max-model-cells 10``, ``private_length_scale=True`` the flag, a
    list or tuple joined with commas, None left out."""
    arguments = []
    for name, value in options.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            arguments.append(flag)
        elif value is False:
            arguments.append(flag + "=false")
        elif isinstance(value, (list, tuple)):
            arguments += [flag, ",".join(str(v) for v in value)]
        else:
            arguments += [flag, str(value)]
    return arguments


def _report_log(stderr, message):
    """What the command wrote to stderr, less the final error line (the
    exception carries it): its warnings become Python warnings."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if message and lines and lines[-1] == f"dpcurator: {message}":
        lines.pop()
    for line in lines:
        if line.startswith("dpcurator: warning: "):
            warnings.warn(line[len("dpcurator: warning: "):], UserWarning, stacklevel=4)
    return "\n".join(lines)


def run(command, arguments=(), *, allow=(0,)):
    """Runs ``dpcurator COMMAND ARGUMENTS...`` in this process and returns
    (exit status, JSON document or None, stderr text). Raises Error (the
    subclass for its exit status) unless the status is in ``allow``.
    A lower-level door for what the typed calls do not cover: pass
    ``--json`` to get a document."""
    result = _core.run_command(command, [str(a) for a in arguments])
    out = result["stdout"].decode("utf-8", "replace")
    document = None
    if out.strip():
        try:
            document = json.loads(out)
        except ValueError:
            document = None
    exit_status = result["exit_code"]
    log = _report_log(result["stderr"], result["message"])
    if exit_status in allow:
        return exit_status, document, log
    details = document if isinstance(document, dict) else {}
    message = details.get("error") or result["message"] or (
        f"dpcurator {command} exited with status {exit_status}")
    may_have_charged = _may_have_charged(command, exit_status, message, details, result)
    if details.get("idempotency_key") is None and may_have_charged:
        found = re.search(r"retry with --key (\S+)", message)
        if found:
            details = dict(details, idempotency_key=found.group(1))
    raise _error_class(exit_status, result["code"])(
        message, code=details.get("code", result["code"]), exit_status=exit_status,
        command=command, may_have_charged=may_have_charged,
        idempotency_key=details.get("idempotency_key"), release_id=details.get("release_id"),
        log=log)


def command_help(command):
    """What ``dpcurator COMMAND --help`` prints: every option (a keyword
    argument of the typed call, ``-`` written ``_``)."""
    return _core.command_help(command)


class Release:
    """A release artefact on disk (``path``) and what the server said of it:
    ``id``, ``dataset_id``, ``kind``, ``epsilon`` (this release's),
    ``noise_multiplier``, ``epsilon_spent_total`` and ``epsilon_remaining``
    (the dataset's after it), ``idempotency_key``, ``replayed`` (a stored
    release returned again at no charge) and ``pending`` (an external
    dataset's release, charged and computed later in the curator's cluster:
    ``Client.release_get(release.id)`` fetches it then)."""

    def __init__(self, document, path):
        self.info = dict(document)
        self.path = path
        self.id = document.get("release_id")
        self.dataset_id = document.get("dataset_id")
        self.kind = document.get("kind")
        self.epsilon = document.get("epsilon")
        self.noise_multiplier = document.get("noise_multiplier")
        self.epsilon_spent_total = document.get("epsilon_spent_total")
        self.epsilon_remaining = document.get("epsilon_remaining")
        self.idempotency_key = document.get("idempotency_key")
        self.replayed = bool(document.get("replayed", False))
        self.pending = document.get("state") == "pending"

    def __fspath__(self):
        return self.path

    def __repr__(self):
        state = "pending" if self.pending else f"epsilon={self.epsilon:g}"
        return f"Release({self.id!r}, kind={self.kind!r}, {state}, path={self.path!r})"


class _Workspace:
    """A temporary folder for artefacts nobody named a path for, removed
    when its owner is collected or the interpreter exits."""

    def __init__(self, owner):
        self.path = tempfile.mkdtemp(prefix="dpcurator_")
        self._count = 0
        weakref.finalize(owner, shutil.rmtree, self.path, True)

    def file(self, stem, suffix):
        self._count += 1
        return os.path.join(self.path, f"{stem}-{self._count}{suffix}")


def _frame_or_path(value, workspace, stem):
    """A CSV path for a DataFrame (written without its index) or a path."""
    if hasattr(value, "to_csv"):
        path = workspace.file(stem, ".csv")
        value.to_csv(path, index=False)
        return path
    return os.fspath(value)


def _model_path(model):
    return model.path if hasattr(model, "path") else os.fspath(model)


class Client:
    """A connection to a curator server, as ``dpcurator`` makes it (see
    connect). Costs in epsilon are charged to the dataset's ledger by the
    server; every method's help says what it costs."""

    def __init__(self, server=None, token=None, *, tls_ca=None, insecure=None, tls_cert=None,
                 tls_key=None, deadline=None):
        self._connection = _option_arguments({
            "server": server, "token": token, "tls_ca": tls_ca, "tls_cert": tls_cert,
            "tls_key": tls_key, "deadline": deadline, "insecure": insecure})
        self._workspace = _Workspace(self)

    def _run(self, command, arguments, **kwargs):
        accepted = set(_core.command_options(command))
        connection = self._connection if "server" in accepted else []
        return run(command, list(arguments) + connection + ["--json"], **kwargs)

    def datasets(self):
        """The datasets this token may see: a list of dicts (dataset_id,
        name, relation, epsilon_cap, delta, epsilon_spent, created_unix,
        sealed, rows where the role may see it; docs/json.md). Free: no
        epsilon."""
        return self._run("datasets list", [])[1]["datasets"]

    def budget(self, dataset):
        """The dataset's budget (by id or name): epsilon_cap, delta,
        epsilon_spent, epsilon_remaining, the ledger's events and sessions
        (docs/json.md, ``budget --json``). Free: no epsilon."""
        return self._run("budget", ["--dataset", dataset])[1]

    def release(self, dataset, kind="rff_embedding", epsilon=None, *, out=None, key=None,
                **options):
        """Requests a DP release of ``kind`` from ``dataset`` (id or name):
        rff_embedding (DP-MERF), charfn_embedding (PEARL), mst, aim or
        marginals. Returns a Release (its artefact at ``out``, or in a
        temporary folder).

        Cost: ``epsilon`` (at the dataset's delta), charged to the dataset's
        ledger once the server admits the request (or the epsilon a
        ``noise_multiplier=`` option amounts to). A retry with the same
        ``key`` returns the stored release at no second charge. A refused
        request (BudgetExceededError, PermissionDeniedError, UsageError)
        charged nothing; a ServerError says in ``may_have_charged`` whether
        it may have, and carries the ``idempotency_key`` to retry with.

        Other options are the CLI's (``dpcurator release --help``, or
        dpcurator.command_help("release")), e.g. ``workload="a,b;c,d"``,
        ``num_frequencies=500``, ``partition_by="label"``."""
        out = out or self._workspace.file(str(kind), ".release")
        arguments = ["--dataset", dataset, "--kind", kind, "--out", out]
        arguments += _option_arguments({"epsilon": epsilon, "key": key, **options})
        exit_status, document, _ = self._run("release", arguments, allow=(0, _EXIT_PENDING))
        return Release(document, None if exit_status == _EXIT_PENDING else out)

    def release_get(self, release_id, *, out=None):
        """Fetches a stored release again (also a pending one, once computed).
        Free: no epsilon."""
        out = out or self._workspace.file("release", ".release")
        exit_status, document, _ = self._run("release get", ["--id", release_id, "--out", out],
                                             allow=(0, _EXIT_PENDING))
        return Release(document, None if exit_status == _EXIT_PENDING else out)

    def releases(self, dataset):
        """The dataset's releases: dicts of release_id, kind, created_unix,
        status, epsilon. Free: no epsilon."""
        return self._run("releases", ["--dataset", dataset])[1]["releases"]

    def train(self, method, *, dataset=None, epsilon=None, release=None, out=None, **options):
        """Trains ``method`` and returns its Model (``model.sample(n)``
        gives a DataFrame; ``model.info`` what ``train --json`` said).

        Methods and their cost (dpcurator.command_help("train METHOD") lists
        each one's options, keyword arguments here):
          * aim, mst: ``dataset=`` and ``epsilon=``: one release of epsilon
            charged to the dataset (or ``release=`` an aim/mst release: free).
          * merf, pearl: ``release=`` an rff_embedding / charfn_embedding
            Release: free (no server, no budget).
          * autogan, kernel: ``dataset=``, ``epsilon=`` and ``rows=`` (a
            public guess of the dataset's size): epsilon, charged as the
            sessions open.
          * sinkhorn: ``reports=`` a collection's reports: free.
        Errors as for release()."""
        out = out or self._workspace.file(str(method), ".model")
        if isinstance(release, Release):
            if release.pending:
                raise ValueError(f"release {release.id} is still pending in the curator's "
                                 "cluster: fetch it with release_get once it is computed")
            release = release.path
        elif release is not None:
            release = os.fspath(release)
        arguments = ["--out", out] + _option_arguments(
            {"dataset": dataset, "epsilon": epsilon, "release": release, **options})
        _, document, log = self._run(f"train {method}", arguments)
        from dpcurator import Model

        model = Model(out)
        model.info = document
        model.log = log
        return model

    def open_session(self, dataset, *, steps, sampling_rate, epsilon=None, **options):
        """Opens an accounted session of ``steps`` subsampled steps (the
        low-level door to DP-SGD and kernel training; ``dpcurator session
        open --help``). Cost: the whole reservation (``epsilon``, or what
        ``noise_multiplier=`` amounts to) is charged now; close_session
        returns the steps not run. Returns the session's dict."""
        arguments = _option_arguments({"dataset": dataset, "steps": steps,
                                       "sampling_rate": sampling_rate, "epsilon": epsilon,
                                       **options})
        return self._run("session open", arguments)[1]

    def show_session(self, session_id):
        """A session's state and reservation (a dict). Free: no epsilon."""
        return self._run("session show", ["--session", session_id])[1]

    def close_session(self, session_id):
        """Closes a session, returning the budget of its unused steps to the
        ledger. Frees epsilon; charges none."""
        return self._run("session close", ["--session", session_id])[1]

    def evaluate(self, model, synthetic, real, **options):
        """As dpcurator.evaluate. Free: no server, no epsilon."""
        return evaluate(model, synthetic, real, **options)

    def report(self, model, synthetic, real, out="report.html", **options):
        """As dpcurator.report. Free: no server, no epsilon."""
        return report(model, synthetic, real, out=out, **options)

    def __repr__(self):
        return f"dpcurator.Client({' '.join(a for a in self._connection if a != '--token')})"


def connect(server=None, token=None, tls_ca=None, insecure=None, *, tls_cert=None, tls_key=None,
            deadline=None):
    """A Client for the curator server at ``server`` (host:port). Each
    argument left None falls back to its DPCURATOR_* variable
    (DPCURATOR_SERVER, DPCURATOR_TOKEN, DPCURATOR_TLS_CA, DPCURATOR_INSECURE,
    DPCURATOR_TLS_CERT, DPCURATOR_TLS_KEY, DPCURATOR_DEADLINE), then to the
    CLI's default, exactly as ``dpcurator`` reads them: nothing is sent
    until a call. ``insecure=True`` for a server started with
    ``--insecure-dev``. Free: connecting spends no epsilon."""
    return Client(server, token, tls_ca=tls_ca, insecure=insecure, tls_cert=tls_cert,
                  tls_key=tls_key, deadline=deadline)


_local_workspace = None


def _workspace():
    global _local_workspace
    if _local_workspace is None:
        _local_workspace = _Workspace(sys.modules[__name__])
    return _local_workspace


def evaluate(model, synthetic, real, *, real_train=None, schema=None, **options):
    """``dpcurator eval``: train-on-synthetic / test-on-real utility and
    marginal fidelity of ``synthetic`` (a DataFrame or CSV path) against
    ``real`` held-out rows (a DataFrame, CSV or ARFF path), with the schema
    of ``model`` (a Model or model file; or ``schema=`` a schema file).
    Returns ``eval --json``'s dict (docs/json.md). Free: it runs locally on
    rows you hold, no server and no epsilon."""
    workspace = _workspace()
    arguments = ["--synthetic", _frame_or_path(synthetic, workspace, "synthetic"),
                 "--real", _frame_or_path(real, workspace, "real"), "--json"]
    if model is not None:
        arguments += ["--model", _model_path(model)]
    if real_train is not None:
        arguments += ["--real-train", _frame_or_path(real_train, workspace, "real_train")]
    arguments += _option_arguments({"schema": schema, **options})
    return run("eval", arguments)[1]


def report(model, synthetic, real, *, out="report.html", **options):
    """``dpcurator report``: a self-contained HTML quality report at ``out``
    (synthetic rows against real held-out rows, and the privacy spent from
    the model). ``synthetic``: a DataFrame or CSV path (or a list of them,
    compared). Returns ``report --json``'s scores. Free: local, no epsilon."""
    workspace = _workspace()
    frames = synthetic if isinstance(synthetic, (list, tuple)) else [synthetic]
    paths = [_frame_or_path(frame, workspace, "synthetic") for frame in frames]
    arguments = ["--synthetic", ",".join(paths), "--real", _frame_or_path(real, workspace, "real"),
                 "--out", os.fspath(out), "--json"]
    if model is not None:
        arguments += ["--model", _model_path(model)]
    arguments += _option_arguments(options)
    return run("report", arguments)[1]


def _append_cli_options(function, command, note):
    """The CLI's own option list under a call's help (each option a keyword
    argument), so help() shows every option the command takes."""
    text = _core.command_help(command)
    options = text.split("options:\n", 1)[-1]
    function.__doc__ = (function.__doc__ or "") + (
        f"\n\n        {note} (`dpcurator {command} --help`; write - as _):\n\n" +
        "\n".join("        " + line for line in options.splitlines()))


_append_cli_options(Client.release, "release", "Options")
_append_cli_options(Client.open_session, "session open", "Options")
_append_cli_options(evaluate, "eval", "Options")
_append_cli_options(report, "report", "Options")
