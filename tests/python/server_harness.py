"""A real dpcurator-server for the runner's tests, as the end-to-end tests
start it (tests/e2e/local_server.h): a fresh directory, a free loopback
port, bootstrap tokens, plaintext or TLS (certificates made by the openssl
command), and the real CLI run against it."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

SERVER = os.environ.get("DPC_SERVER", "")
CLI = os.environ.get("DPC_CLI", "")
CURATOR_TOKEN = "curator-token-runner"
ANALYST_TOKEN = "analyst-token-runner"

# Exit status of `release` / `release get` for a pending release (docs/json.md).
PENDING_EXIT = 5


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 (tests/server/tls_test.cc)."""
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["openssl", "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=dpc-runner-test-ca"],
        ["openssl", "req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj",
         "/CN=localhost"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem"],
    ]
    for step in steps:
        subprocess.run(step, cwd=directory, check=True, capture_output=True)


class LocalServer:
    def __init__(self, tls=False):
        if not SERVER or not CLI:
            raise RuntimeError("DPC_SERVER and DPC_CLI must name the built server and CLI "
                               "(ctest sets them)")
        self.directory = tempfile.mkdtemp(prefix="dpc_runner_test_")
        self.tls = tls
        with open(os.path.join(self.directory, "tokens.txt"), "w") as f:
            f.write(f"curator {CURATOR_TOKEN}\nanalyst {ANALYST_TOKEN}\n")
        port_file = os.path.join(self.directory, "port")
        command = [SERVER, f"--db={self.directory}/curator.db", "--listen=127.0.0.1:0",
                   f"--tokens={self.directory}/tokens.txt", f"--port_file={port_file}"]
        if tls:
            make_certificates(self.directory)
            command += [f"--tls_cert={self.directory}/server.pem",
                        f"--tls_key={self.directory}/server.key"]
        else:
            command.append("--insecure_dev")
        self.log = open(os.path.join(self.directory, "server.log"), "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=self.log)
        self.address = None
        for _ in range(600):
            try:
                with open(port_file) as f:
                    port = int(f.read().strip() or 0)
                if port > 0:
                    self.address = f"127.0.0.1:{port}"
                    break
            except (OSError, ValueError):
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        if self.address is None:
            self.close()
            raise RuntimeError("the server did not start: " + self.server_log())

    def server_log(self):
        with open(os.path.join(self.directory, "server.log")) as f:
            return f.read()

    def env(self, token):
        """The connection for the CLI and the runner, from the environment."""
        env = dict(os.environ, DPCURATOR_SERVER=self.address, DPCURATOR_TOKEN=token)
        for name in ("DPCURATOR_INSECURE", "DPCURATOR_TLS_CA", "DPCURATOR_TLS_CERT",
                     "DPCURATOR_TLS_KEY"):
            env.pop(name, None)
        if self.tls:
            env["DPCURATOR_TLS_CA"] = os.path.join(self.directory, "ca.pem")
        else:
            env["DPCURATOR_INSECURE"] = "1"
        return env

    def cli(self, arguments, token):
        return subprocess.run([CLI, *arguments], cwd=self.directory, env=self.env(token),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)

    def create_external_dataset(self, schema_path, epsilon=10, name="shards",
                                relation="add-remove", public_row_bound=None):
        """An external dataset; under relation "replace-one", public_row_bound
        is its declared (public) row count n."""
        arguments = ["datasets", "create", "--name", name, "--schema", schema_path,
                     "--epsilon", str(epsilon), "--relation", relation, "--external", "--json"]
        if public_row_bound is not None:
            arguments += ["--public-row-bound", str(public_row_bound)]
        run = self.cli(arguments, CURATOR_TOKEN)
        if run.returncode != 0:
            raise AssertionError(f"datasets create failed: {run.stderr}")
        return json.loads(run.stdout)["dataset_id"]

    def request_release(self, dataset_id, key, num_frequencies=64, seed=None):
        """An analyst's rff_embedding release at epsilon 1: pending (its JSON)."""
        arguments = ["release", "--kind", "rff_embedding", "--dataset", dataset_id,
                     "--epsilon", "1", "--num-frequencies", str(num_frequencies), "--key", key,
                     "--out", f"{key}.pb", "--json"]
        if seed is not None:
            arguments += ["--seed", str(seed)]
        run = self.cli(arguments, ANALYST_TOKEN)
        if run.returncode != PENDING_EXIT:
            raise AssertionError(f"release: exit {run.returncode}, expected pending "
                                 f"({PENDING_EXIT}): {run.stdout} {run.stderr}")
        return json.loads(run.stdout)

    def epsilon_spent(self, dataset_id):
        run = self.cli(["budget", "--dataset", dataset_id, "--json"], ANALYST_TOKEN)
        if run.returncode != 0:
            raise AssertionError(f"budget failed: {run.stderr}")
        return json.loads(run.stdout)["epsilon_spent"]

    def close(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)
