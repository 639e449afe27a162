"""The runner's shard readers (dpcurator.dask.shard_partial and
shard_partial_pandas; docs/scale-out.md "The runner"): a shard's partial
is the upload reader's, and a malformed row names the shard and its line,
whichever reader found it. No cluster and no server: plain functions."""

import os
import tempfile
import unittest

import numpy as np

import dpcurator
import fixtures
from dpcurator.dask import ShardError, shard_partial, shard_partial_pandas

READERS = {"upload": shard_partial, "pandas": shard_partial_pandas}


class ShardReadersTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        self.plan = fixtures.plans()["rff_embedding"]

    def shard(self, text, name="shard-00.csv"):
        path = os.path.join(self.directory.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_readers_agree_with_the_upload_reader(self):
        text = fixtures.random_csv(3000, seed=21)
        path = self.shard(text)
        expected = self.plan.partial_csv(text)
        for name, reader in READERS.items():
            with self.subTest(reader=name):
                partial = reader(self.plan, path)
                self.assertEqual(partial.num_rows, 3000)
                self.assertEqual(partial.plan_digest, self.plan.digest)
                self.assertLessEqual(
                    fixtures.relative_difference(partial.values, expected.values), 1e-12)

    def test_a_malformed_row_names_the_shard_and_line(self):
        lines = fixtures.random_csv(40, seed=3).splitlines()
        cases = {
            # line 6 (the header is line 1): an unknown category.
            "unknown level": (6, lambda f: [f[0], f[1], "Mars", f[3]]),
            # a numeric cell that is not a number.
            "not a number": (9, lambda f: [f[0], "lots", f[2], f[3]]),
            # a row with a field too many, and one with a field too few: the
            # upload reader refuses both, and pandas must not fill them in.
            "extra field": (12, lambda f: f + ["x"]),
            "missing field": (15, lambda f: f[:3]),
        }
        for case, (line, edit) in cases.items():
            bad = list(lines)
            bad[line - 1] = ",".join(edit(bad[line - 1].split(",")))
            path = self.shard("\n".join(bad) + "\n", f"shard-{line:02d}.csv")
            for name, reader in READERS.items():
                with self.subTest(case=case, reader=name):
                    with self.assertRaises(ShardError) as raised:
                        reader(self.plan, path)
                    self.assertEqual(raised.exception.shard, path)
                    self.assertEqual(raised.exception.line, line, raised.exception.detail)

    def test_a_file_is_read_in_chunks_as_the_whole_text(self):
        # plan.partial_csv_file streams the file (chunks of chunk_rows rows,
        # each chunk's partial added in): any chunk size gives the partial
        # of the whole text, for every kind, and a bad row's line is the
        # file's line whichever chunk it falls in.
        text = fixtures.random_csv(1500, seed=8)
        path = self.shard(text)
        for kind, plan in fixtures.plans().items():
            expected = plan.partial_csv(text)
            for chunk_rows in (1, 7, 1000, 1 << 16):
                with self.subTest(kind=kind, chunk_rows=chunk_rows):
                    partial = plan.partial_csv_file(path, chunk_rows)
                    self.assertEqual(partial.num_rows, 1500)
                    self.assertLessEqual(
                        fixtures.relative_difference(partial.values, expected.values), 1e-12)
        lines = text.splitlines()
        lines[1203] = lines[1203].replace(",", ",,", 1)  # line 1204: a field too many
        bad = self.shard("\n".join(lines) + "\n", "shard-bad.csv")
        for chunk_rows in (7, 1 << 16):
            with self.assertRaises(ValueError) as raised:
                self.plan.partial_csv_file(bad, chunk_rows)
            self.assertTrue(str(raised.exception).startswith(f"{bad}:1204: "),
                            str(raised.exception))

    def test_a_missing_shard_is_an_os_error(self):
        # Not a ShardError: the runner leaves the job pending (a path the
        # curator fixes), it does not fail it.
        with self.assertRaises(OSError):
            shard_partial(self.plan, os.path.join(self.directory.name, "absent.csv"))

    def test_the_error_survives_a_pickle(self):
        import pickle

        error = pickle.loads(pickle.dumps(ShardError("/s/shard-03.csv", 7, "bad")))
        self.assertEqual((error.shard, error.line, error.detail), ("/s/shard-03.csv", 7, "bad"))
        self.assertIsInstance(error, ValueError)

    def test_categorical_frames_are_read_as_text(self):
        # csv_options reads categories as pandas categoricals; the module reads
        # them by their categories, equal to reading every cell.
        import pandas as pd

        text = fixtures.random_csv(2000, seed=5)
        path = self.shard(text)
        frame = pd.read_csv(path, **dpcurator.csv_options(self.plan))
        as_text = frame.astype({c: object for c in self.plan.categorical_columns})
        np.testing.assert_array_equal(self.plan.partial(frame).values,
                                      self.plan.partial(as_text).values)


if __name__ == "__main__":
    unittest.main()
