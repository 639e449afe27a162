"""The curator's runner against a real server and a real Dask cluster
(issue 28 items 3 and 4; docs/scale-out.md "The runner"). Each test starts
dpcurator-server on a free port, creates an external dataset as the
curator, requests an rff_embedding release on it as an analyst (admitted,
charged, pending), and runs `python3 -m dpcurator.dask_runner`:

  (a) end to end, over TLS with a LocalCluster of its own: the release is
      DONE and `release get` writes it;
  (b) a worker process killed mid-job: Dask recomputes its partials and the
      merged statistic equals the in-process engine's over the same rows;
  (c) the runner killed (SIGKILL) before it submits: the job stays pending
      and a second runner completes it, charged once;
  (d) issue 37 item 3: two external datasets whose shards differ in one
      row, which has an undeclared category in one of them, under both
      relations: everything the analyst can observe (the release's state,
      every reply but its ids and noised numbers, the artefact's shape, the
      budget) is identical; only the runner's stderr (the curator's) names
      the row's shard and line.

(b), (c) and (d) share one LocalCluster of 2 worker processes of one thread
(--scheduler tcp://...). The slow reader (fixtures.slow_shard_partial,
`--reader fixtures:slow_shard_partial`) keeps a job running long enough
to kill something in the middle of it, whatever the machine's load."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

from distributed import Client, LocalCluster

import dpcurator
import fixtures
from dpcurator import dask_runner
from server_harness import ANALYST_TOKEN, CURATOR_TOKEN, PENDING_EXIT, LocalServer

RUNNER = [sys.executable, "-m", "dpcurator.dask_runner"]

# Object ids differ between two datasets whatever their rows: they are not
# observations about the rows.
ID_PATTERN = re.compile(r"\b(ds|rel|inc)_[0-9a-f]+\b")


def without_ids(text):
    return ID_PATTERN.sub(lambda m: f"{m.group(1)}_<id>", text)


def normalized(text):
    """A CLI output with ids blanked and, for JSON, creation times dropped."""
    text = without_ids(text)
    try:
        value = json.loads(text)
    except ValueError:
        return text

    def walk(node):
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items() if k != "created_unix"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value)


# v1.Release's created_unix: a clock reading, not an observation about rows.
RELEASE_CREATED_UNIX = 5


def wire_shape(data):
    """The protobuf wire structure of a v1.Release, without its schema: per
    field in order, its number and wire type, and a varint's value (but
    created_unix's), a length-delimited field's length (a packed vector of
    doubles: 8 bytes an entry). A fixed-width field's bits (a noised
    double) are left out: two artefacts of one plan have the same shape
    whatever their rows."""
    shape, i = [], 0

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
            shape.append((field, wire, None if field == RELEASE_CREATED_UNIX else value))
        elif wire == 1:
            shape.append((field, wire))
            i += 8
        elif wire == 2:
            length = varint()
            shape.append((field, wire, length))
            i += length
        elif wire == 5:
            shape.append((field, wire))
            i += 4
        else:
            raise AssertionError(f"wire type {wire} in an artefact")
    return shape


def runner_command(server, dataset_id, pattern, scheduler, *extra):
    command = [*RUNNER, "--scheduler", scheduler, "--dataset", dataset_id, "--data", pattern,
               "--server", server.address, *extra]
    if not server.tls:
        command.append("--insecure")
    return command


class RunnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.TemporaryDirectory()
        cls.cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None,
                                   local_directory=cls.workdir.name)
        cls.client = Client(cls.cluster)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()
        cls.workdir.cleanup()

    def setUp(self):
        self.data = tempfile.TemporaryDirectory()
        self.addCleanup(self.data.cleanup)

    def start_server(self, tls=False):
        server = LocalServer(tls=tls)
        self.addCleanup(server.close)
        return server

    def pending(self, server, dataset_id):
        curator = dpcurator.Curator(
            token=CURATOR_TOKEN, server=server.address, insecure=not server.tls,
            tls_ca=os.path.join(server.directory, "ca.pem") if server.tls else None)
        return curator, curator.pending_jobs(dataset_id)

    def test_a_end_to_end_over_tls(self):
        server = self.start_server(tls=True)
        dataset = server.create_external_dataset(fixtures.SCHEMA_PATH)
        fixtures.write_shards(self.data.name, 4, 1500, seed=31)
        release = server.request_release(dataset, "e2e")
        self.assertEqual(release["state"], "pending")
        spent = server.epsilon_spent(dataset)
        self.assertGreater(spent, 0.0)
        # Pending: `release get` says so and writes nothing.
        get = server.cli(["release", "get", "--id", release["release_id"], "--out", "got.pb"],
                         ANALYST_TOKEN)
        self.assertEqual(get.returncode, PENDING_EXIT, get.stderr)

        token_file = os.path.join(self.data.name, "token")
        with open(token_file, "w") as f:
            f.write(CURATOR_TOKEN + "\n")
        env = dict(os.environ)
        env.pop("DPCURATOR_TOKEN", None)
        run = subprocess.run(
            runner_command(server, dataset, os.path.join(self.data.name, "shard-*.csv"),
                           "local", "--token-file", token_file, "--tls-ca",
                           os.path.join(server.directory, "ca.pem"), "--once"),
            env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("shard 4/4 done", run.stderr)
        self.assertIn("6000 rows merged", run.stderr)

        get = server.cli(["release", "get", "--id", release["release_id"], "--out", "got.pb",
                          "--json"], ANALYST_TOKEN)
        self.assertEqual(get.returncode, 0, get.stdout + get.stderr)
        self.assertGreater(os.path.getsize(os.path.join(server.directory, "got.pb")), 0)
        listed = server.cli(["releases", "--dataset", dataset, "--json"], ANALYST_TOKEN)
        self.assertIn('"DONE"', listed.stdout)
        # The submission is not a second charge.
        self.assertAlmostEqual(server.epsilon_spent(dataset), spent, places=12)
        # Nothing is left to do.
        self.assertEqual(self.pending(server, dataset)[1], [])

    def test_b_a_worker_killed_mid_job(self):
        server = self.start_server()
        dataset = server.create_external_dataset(fixtures.SCHEMA_PATH)
        _, whole = fixtures.write_shards(self.data.name, 8, 1000, seed=32)
        release = server.request_release(dataset, "killed-worker")
        curator, jobs = self.pending(server, dataset)
        self.assertEqual(len(jobs), 1)
        job = jobs[0]

        first_shard_done = threading.Event()
        messages = []

        def log(message):
            messages.append(message)
            if "shard 1/8 done" in message:
                first_shard_done.set()

        # The runner in this process (its log captured), on the shared cluster.
        original_log = dask_runner.log
        dask_runner.log = log
        self.addCleanup(setattr, dask_runner, "log", original_log)
        result = {}
        thread = threading.Thread(target=lambda: result.update(merged=dask_runner.run_job(
            self.client, curator, dataset, job, os.path.join(self.data.name, "shard-*.csv"),
            split_every=2, reader=fixtures.slow_shard_partial)))
        thread.start()
        self.assertTrue(first_shard_done.wait(60), messages)
        workers = self.client.run(os.getpid)
        victim = sorted(workers.values())[0]
        os.kill(victim, signal.SIGKILL)
        killed_at = len(messages)
        thread.join(120)
        self.assertFalse(thread.is_alive())
        # Killed mid-job: shards were still to come after the kill.
        self.assertFalse(any("rows merged" in m for m in messages[:killed_at]), messages)
        merged = result.get("merged")
        self.assertIsNotNone(merged, messages)
        self.assertEqual(merged.num_rows, 8000)
        plan = dpcurator.Plan.from_request(job["schema"], job["request"])
        self.assertLessEqual(
            fixtures.relative_difference(merged.values, plan.engine_statistic_csv(whole)), 1e-12)
        get = server.cli(["release", "get", "--id", release["release_id"], "--out", "got.pb"],
                         ANALYST_TOKEN)
        self.assertEqual(get.returncode, 0, get.stderr)
        self.client.wait_for_workers(2, timeout=60)  # the nanny restarted it

    def test_c_the_runner_killed_before_it_submits(self):
        server = self.start_server()
        dataset = server.create_external_dataset(fixtures.SCHEMA_PATH)
        fixtures.write_shards(self.data.name, 6, 1000, seed=33)
        release = server.request_release(dataset, "killed-runner")
        spent = server.epsilon_spent(dataset)
        pattern = os.path.join(self.data.name, "shard-*.csv")
        command = runner_command(server, dataset, pattern, self.cluster.scheduler_address,
                                 "--reader", "fixtures:slow_shard_partial", "--once")
        env = server.env(CURATOR_TOKEN)
        first = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in first.stderr:
            seen.append(line)
            if "shard 1/6 done" in line:
                first.send_signal(signal.SIGKILL)
                break
        first.wait(30)
        first.stderr.close()
        self.assertEqual(first.returncode, -signal.SIGKILL, "".join(seen))
        self.assertFalse(any("submitting" in line for line in seen), seen)
        # Still pending, charged once.
        _, jobs = self.pending(server, dataset)
        self.assertEqual([j["job_id"] for j in jobs], [release["release_id"]])
        self.assertAlmostEqual(server.epsilon_spent(dataset), spent, places=12)

        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("submitted", second.stderr)
        self.assertEqual(self.pending(server, dataset)[1], [])
        get = server.cli(["release", "get", "--id", release["release_id"], "--out", "got.pb"],
                         ANALYST_TOKEN)
        self.assertEqual(get.returncode, 0, get.stderr)
        self.assertAlmostEqual(server.epsilon_spent(dataset), spent, places=12)

    def test_e_mst_and_aim_on_an_external_dataset(self):
        # Issue 41: the runner counts every table the recipe's plan fixed in
        # one pass over the shards and submits them once; the server runs
        # the recipe over them (equal to the in-process release for the same
        # noise: tests/server/external_dataset_test.cc), and the analyst
        # gets the recipe's artefact, charged once.
        _, whole = fixtures.write_shards(self.data.name, 4, 500, seed=34)
        pattern = os.path.join(self.data.name, "shard-*.csv")
        for kind, relation, extra in (("mst", "replace-one", []),
                                      ("aim", "add-remove", ["--rounds", "8"])):
            with self.subTest(kind=kind):
                server = self.start_server()
                dataset = server.create_external_dataset(
                    fixtures.SCHEMA_PATH, relation=relation,
                    public_row_bound=2000 if relation == "replace-one" else None)
                requested = server.cli(
                    ["release", "--kind", kind, "--dataset", dataset, "--epsilon", "1",
                     "--key", kind, "--out", f"{kind}.pb", "--json", *extra], ANALYST_TOKEN)
                self.assertEqual(requested.returncode, PENDING_EXIT,
                                 requested.stdout + requested.stderr)
                release_id = json.loads(requested.stdout)["release_id"]
                spent = server.epsilon_spent(dataset)
                self.assertGreater(spent, 0.0)
                _, jobs = self.pending(server, dataset)
                plan = dpcurator.Plan.from_request(jobs[0]["schema"], jobs[0]["request"])
                self.assertEqual(plan.kind, kind)
                run = subprocess.run(
                    runner_command(server, dataset, pattern, self.cluster.scheduler_address,
                                   "--once"),
                    env=server.env(CURATOR_TOKEN), capture_output=True, text=True, timeout=120)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("2000 rows merged", run.stderr)
                get = server.cli(["release", "get", "--id", release_id, "--out", "got.pb",
                                  "--json"], ANALYST_TOKEN)
                self.assertEqual(get.returncode, 0, get.stdout + get.stderr)
                self.assertIn(f'"{kind}"', get.stdout.lower())
                self.assertEqual(self.pending(server, dataset)[1], [])
                self.assertAlmostEqual(server.epsilon_spent(dataset), spent, places=12)
                # The module's tables of the whole table are the engine's.
                self.assertEqual(plan.partial_csv(whole).values.tolist(),
                                 plan.engine_statistic_csv(whole).tolist())

    def analyst_view(self, server, dataset, requested):
        """Everything an analyst can observe of a release on `dataset`:
        the reply to the request, `release get` (exit status, output, the
        artefact's wire shape), `releases` and `budget`; ids blanked."""
        artefact = os.path.join(server.directory, "view.pb")
        if os.path.exists(artefact):
            os.remove(artefact)
        get = server.cli(["release", "get", "--id", requested["release_id"], "--out", "view.pb",
                          "--json"], ANALYST_TOKEN)
        shape = None
        if os.path.exists(artefact):
            with open(artefact, "rb") as f:
                shape = wire_shape(f.read())
        view = {"requested": normalized(json.dumps(requested)),
                "get": (get.returncode, normalized(get.stdout), normalized(get.stderr)),
                "artefact": shape}
        for name, arguments in (("releases", ["releases", "--dataset", dataset, "--json"]),
                                ("budget", ["budget", "--dataset", dataset, "--json"])):
            run = server.cli(arguments, ANALYST_TOKEN)
            view[name] = (run.returncode, normalized(run.stdout), normalized(run.stderr))
        return view

    def test_d_one_malformed_row_is_invisible_to_the_analyst(self):
        # Issue 37 item 3, the audit's reproduction: two clusters whose
        # shards differ in one row, which in the second has a category the
        # schema does not declare. The analyst asked for the same release
        # on each; before the fix the first was DONE and the second FAILED
        # ("failed in the curator's cluster").
        rows_per_shard, shards, bad_line = 40, 2, 9
        for relation in ("add-remove", "replace-one"):
            views, stderr = {}, {}
            # Names of one length: the idempotency key is in the artefact.
            for variant in ("clean", "dirty"):
                # A server each: the ledger's event ids count every dataset.
                server = self.start_server()
                directory = os.path.join(self.data.name, f"{relation}-{variant}")
                os.makedirs(directory)
                paths, _ = fixtures.write_shards(directory, shards, rows_per_shard, seed=35)
                if variant == "dirty":
                    with open(paths[1]) as f:
                        lines = f.read().splitlines()
                    fields = lines[bad_line - 1].split(",")
                    fields[2] = "Marsupial-secret"
                    lines[bad_line - 1] = ",".join(fields)
                    with open(paths[1], "w") as f:
                        f.write("\n".join(lines) + "\n")
                dataset = server.create_external_dataset(
                    fixtures.SCHEMA_PATH, name=f"{relation}-{variant}", relation=relation,
                    public_row_bound=(shards * rows_per_shard
                                      if relation == "replace-one" else None))
                requested = server.request_release(dataset, f"{relation}-{variant}", seed=77)
                run = subprocess.run(
                    runner_command(server, dataset, os.path.join(directory, "shard-*.csv"),
                                   self.cluster.scheduler_address, "--once"),
                    env=server.env(CURATOR_TOKEN), capture_output=True, text=True, timeout=120)
                stderr[variant] = run.stderr
                views[variant] = self.analyst_view(server, dataset, requested)
            with self.subTest(relation=relation):
                self.assertEqual(views["clean"], views["dirty"], stderr)
                self.assertIn('"DONE"', json.dumps(views["dirty"]["releases"]))
                self.assertIsNotNone(views["dirty"]["artefact"])
                self.assertNotIn("Marsupial", json.dumps(views["dirty"]))
                # The curator, and only the curator, learns of the row.
                self.assertIn("1 malformed row", stderr["dirty"])
                self.assertIn(f"shard-01.csv, line {bad_line}", stderr["dirty"])
                self.assertNotIn("malformed", stderr["clean"])
                self.assertNotIn("Marsupial", server.server_log())

    def test_help_answers(self):
        run = subprocess.run([*RUNNER, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        for option in ("--scheduler", "--server", "--dataset", "--data", "--token-file",
                       "--tls-ca", "--once"):
            self.assertIn(option, run.stdout)
        bad = subprocess.run([*RUNNER, "--dataset", "ds_x"], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(bad.returncode, 2)


if __name__ == "__main__":
    unittest.main()
