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
  (d) a shard with a malformed row: the job is FAILED, the runner's stderr
      names the shard and line, and the analyst's message names no value.

(b), (c) and (d) share one LocalCluster of 2 worker processes of one thread
(--scheduler tcp://...). The slow reader (fixtures.slow_shard_partial,
`--reader fixtures:slow_shard_partial`) keeps a job running long enough
to kill something in the middle of it, whatever the machine's load."""

import os
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

    def test_d_a_malformed_shard_fails_the_job(self):
        server = self.start_server()
        dataset = server.create_external_dataset(fixtures.SCHEMA_PATH)
        paths, _ = fixtures.write_shards(self.data.name, 4, 500, seed=34)
        # Line 7 of shard-02.csv (the header is line 1): a level the schema
        # does not declare, a value the analyst must never see.
        with open(paths[2]) as f:
            lines = f.read().splitlines()
        fields = lines[6].split(",")
        fields[2] = "Marsupial-secret"
        lines[6] = ",".join(fields)
        with open(paths[2], "w") as f:
            f.write("\n".join(lines) + "\n")
        release = server.request_release(dataset, "malformed")
        spent = server.epsilon_spent(dataset)

        run = subprocess.run(
            runner_command(server, dataset, os.path.join(self.data.name, "shard-*.csv"),
                           self.cluster.scheduler_address, "--once"),
            env=server.env(CURATOR_TOKEN), capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn(f"shard {paths[2]}, line 7", run.stderr)
        self.assertNotIn("submitting", run.stderr)
        self.assertEqual(self.pending(server, dataset)[1], [])

        get = server.cli(["release", "get", "--id", release["release_id"], "--out", "got.pb",
                          "--json"], ANALYST_TOKEN)
        self.assertNotIn(get.returncode, (0, PENDING_EXIT), get.stdout + get.stderr)
        self.assertIn("curator's cluster", get.stdout + get.stderr)
        self.assertNotIn("Marsupial", get.stdout + get.stderr)
        self.assertNotIn("line 7", get.stdout + get.stderr)
        listed = server.cli(["releases", "--dataset", dataset, "--json"], ANALYST_TOKEN)
        self.assertIn('"FAILED"', listed.stdout)
        self.assertNotIn("Marsupial", listed.stdout + listed.stderr)
        # Charged, never refunded once the curator's cluster read rows.
        self.assertAlmostEqual(server.epsilon_spent(dataset), spent, places=12)

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
