"""dpcurator.load_model(path).sample(n, seed) (issue 28 item 5) returns the
DataFrame `dpcurator sample` writes for the same model and seed: the same
rows, values and column types, across the sampler's 100000-row chunks."""

import os
import subprocess
import tempfile
import unittest

import pandas as pd
import pandas.testing

import dpcurator
import fixtures


class SampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.directory.name, "model.pb")
        subprocess.run(
            [os.environ["DPC_WRITE_MODEL"], fixtures.SCHEMA_PATH, cls.model], check=True
        )

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def cli_sample(self, rows, seed):
        out = os.path.join(self.directory.name, f"cli-{rows}-{seed}.csv")
        subprocess.run(
            [os.environ["DPC_CLI"], "sample", "--model", self.model, "--rows", str(rows),
             "--seed", str(seed), "--out", out],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return pd.read_csv(
            out,
            dtype={"workclass": str, "Y": str},
            keep_default_na=False,
            float_precision="round_trip",
        )

    def test_equals_the_command_across_chunks(self):
        model = dpcurator.load_model(self.model)
        self.assertEqual(model.method, "merf")
        rows = 150001  # two chunks of the sampler (kSampleChunkRows = 100000)
        ours = model.sample(rows, seed=9)
        theirs = self.cli_sample(rows, 9)
        self.assertEqual(list(ours.columns), ["age", "hours", "workclass", "Y"])
        pandas.testing.assert_frame_equal(ours, theirs, check_dtype=True)

    def test_sizes_memory_cannot_hold_are_refused_up_front(self):
        # Issue 40: Model.sample(10**12) grew to 22 GB until the kernel
        # killed it; the CLI refuses such sizes up front, and so does this.
        model = dpcurator.load_model(self.model)
        with self.assertRaises(MemoryError) as refused:
            model.sample(10**12)
        message = str(refused.exception)
        self.assertIn("nothing was sampled", message)
        self.assertIn("dpcurator sample --model", message)
        with self.assertRaises(ValueError):
            model.sample(0)
        self.assertEqual(len(model.sample(3)), 3)

    def test_seed_matters(self):
        model = dpcurator.load_model(self.model)
        a = model.sample(500, seed=1)
        b = model.sample(500, seed=2)
        self.assertFalse(a.equals(b))
        pandas.testing.assert_frame_equal(a, model.sample(500, seed=1))

    def test_bad_inputs(self):
        with self.assertRaises(ValueError):
            dpcurator.load_model(self.model).sample(0, seed=1)
        not_a_model = os.path.join(self.directory.name, "schema.json")
        with open(not_a_model, "w") as f:
            f.write("{}")
        with self.assertRaises((RuntimeError, ValueError)):
            dpcurator.load_model(not_a_model)


if __name__ == "__main__":
    unittest.main()
