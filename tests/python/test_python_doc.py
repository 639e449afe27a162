"""docs/python.md's notebook, run as written (issue 40): its ```python
blocks, in order, as one script with this interpreter, against a real
dpcurator-server (server_harness) holding a dataset `patients` that a
curator created and uploaded with the CLI; the analyst's connection comes
from the DPCURATOR_* variables, as the page says. The blocks assert what a
reader should see (1,000 rows in a DataFrame, the budget read, an
over-budget release refused with nothing charged, synthesize's rows and its
refusal of a data-derived schema).

Also the client's error mapping on cases the page only names: an unknown
keyword is the CLI's own UsageError, an unreachable server before a release
is a ServerError that charged nothing, and the captured output does not
swallow the process's own stdout afterwards."""

import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

import server_harness

SOURCE_DIR = os.environ.get("DPC_SOURCE_DIR", "")


def python_blocks(path):
    """The text of every ```python fenced block, in order."""
    with open(path, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)


def write_patients(directory, rows, seed):
    rng = random.Random(seed)
    with open(os.path.join(directory, f"patients_{seed}.csv"), "w") as f:
        f.write("age,income,region,smoker,outcome\n")
        for _ in range(rows):
            age = rng.randint(18, 90)
            income = round(min(200000.0, math.exp(rng.gauss(10.0, 0.8))), 2)
            region = rng.choice(["north", "south", "east", "west"])
            smoker = rng.choice(["yes", "no"])
            score = 0.05 * (age - 50) + (1.2 if smoker == "yes" else 0.0) - 0.5
            outcome = "ill" if rng.random() < 1.0 / (1.0 + math.exp(-score)) else "well"
            f.write(f"{age},{income},{region},{smoker},{outcome}\n")
    return os.path.join(directory, f"patients_{seed}.csv")


SCHEMA = {"columns": [
    {"name": "age", "type": "NUMERIC", "lower": 18, "upper": 90, "integer": True,
     "bins": [30, 45, 60, 75]},
    {"name": "income", "type": "NUMERIC", "lower": 0, "upper": 200000,
     "bins": [10000, 20000, 40000, 80000]},
    {"name": "region", "type": "CATEGORICAL", "categories": ["north", "south", "east", "west"]},
    {"name": "smoker", "type": "CATEGORICAL", "categories": ["yes", "no"]},
    {"name": "outcome", "type": "CATEGORICAL", "categories": ["ill", "well"]},
], "label": "outcome"}


class PythonDocTest(unittest.TestCase):
    def setUp(self):
        if not SOURCE_DIR:
            self.fail("DPC_SOURCE_DIR must be set (ctest sets it)")
        self.server = server_harness.LocalServer()
        self.addCleanup(self.server.close)
        directory = self.server.directory
        schema_path = os.path.join(directory, "patients.schema.json")
        with open(schema_path, "w") as f:
            json.dump(SCHEMA, f)
        train = write_patients(directory, 1000, seed=1)
        os.replace(write_patients(directory, 400, seed=2), os.path.join(directory, "test.csv"))
        for arguments in (["datasets", "create", "--name", "patients", "--schema", schema_path,
                           "--epsilon", "3", "--delta", "1e-5"],
                          ["upload", "--dataset", "patients", "--csv", train]):
            run = self.server.cli(arguments, server_harness.CURATOR_TOKEN)
            self.assertEqual(run.returncode, 0, run.stderr)

    def test_walkthrough_runs_as_written(self):
        blocks = python_blocks(os.path.join(SOURCE_DIR, "docs", "python.md"))
        self.assertGreaterEqual(len(blocks), 6, "docs/python.md lost its notebook blocks")
        script = os.path.join(self.server.directory, "walkthrough.py")
        with open(script, "w") as f:
            f.write("\n".join(blocks))
        env = self.server.env(server_harness.ANALYST_TOKEN)
        result = subprocess.run([sys.executable, script], cwd=self.server.directory, env=env,
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0,
                         f"docs/python.md failed:\nstdout:\n{result.stdout}\n"
                         f"stderr:\n{result.stderr}")
        self.assertIn("nothing was charged", result.stdout)
        self.assertTrue(os.path.getsize(os.path.join(self.server.directory, "report.html")) > 0)

    def test_errors_carry_the_clis_messages(self):
        code = """
import sys
import dpcurator
client = dpcurator.connect()
try:
    client.release("patients", kind="aim", epsilon=1, bogus_option=3)
except dpcurator.UsageError as error:
    assert isinstance(error, ValueError)
    assert "unknown option --bogus-option" in str(error), error
    assert error.exit_status == 2 and not error.may_have_charged
else:
    raise AssertionError("an unknown option was accepted")
try:
    client.budget("no-such-dataset")
except dpcurator.UsageError as error:
    assert error.code == "NOT_FOUND", error.code
else:
    raise AssertionError("an unknown dataset was accepted")
closed = dpcurator.connect("127.0.0.1:1", token="t", insecure=True, deadline=5)
try:
    closed.release("patients", kind="aim", epsilon=1)
except dpcurator.ServerError as error:
    assert error.code == "UNAVAILABLE" and not error.may_have_charged, vars(error)
else:
    raise AssertionError("an unreachable server did not raise")
print("stdout is ours again")
sys.stdout.flush()
"""
        env = self.server.env(server_harness.ANALYST_TOKEN)
        result = subprocess.run([sys.executable, "-c", code], cwd=self.server.directory,
                                env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.strip(), "stdout is ours again")


class HelpTest(unittest.TestCase):
    def test_every_call_says_what_it_costs(self):
        """help() on every public call names its cost in epsilon ("Free"
        or what is charged), and the calls that take the CLI's options list
        them."""
        import dpcurator

        calls = [dpcurator.connect, dpcurator.evaluate, dpcurator.report,
                 dpcurator.synthesize, dpcurator.load_model, dpcurator.Model.sample,
                 dpcurator.Model.sample_to_csv]
        calls += [getattr(dpcurator.Client, name) for name in dir(dpcurator.Client)
                  if not name.startswith("_")]
        self.assertGreaterEqual(len(calls), 17)
        for call in calls:
            doc = call.__doc__ or ""
            self.assertIn("epsilon", doc, f"help({call.__qualname__}) says nothing of epsilon")
            self.assertTrue("Free" in doc or "Cost" in doc or "charged" in doc,
                            f"help({call.__qualname__}) does not say what it costs")
        self.assertIn("--max-model-cells", dpcurator.Client.release.__doc__)


if __name__ == "__main__":
    unittest.main()
