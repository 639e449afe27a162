"""The runner's shard readers (dpcurator.dask.read_shard and
read_shard_pandas; docs/scale-out.md "The runner"): a shard's partial is
the upload reader's, and a row an upload would refuse is a null row
(docs/privacy.md 6.5): counted in the partial's rows, adding nothing, its
line told to the curator, whichever reader met it. No cluster and no
server: plain functions."""

import os
import tempfile
import unittest

import numpy as np

import dpcurator
import fixtures
from dpcurator.dask import (Shard, ShardError, read_shard, read_shard_pandas, shard_partial,
                            shard_partial_pandas)

READERS = {"upload": read_shard, "pandas": read_shard_pandas}
# The upload reader's longest record (data::CsvOptions::max_record_bytes).
MAX_RECORD_BYTES = 1 << 20


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
        # Blank lines are not rows, for either reader.
        lines = text.splitlines()
        path = self.shard("\n".join(lines[:100] + ["", "\r"] + lines[100:]) + "\n\n")
        expected = self.plan.partial_csv(text)
        for name, reader in READERS.items():
            with self.subTest(reader=name):
                shard = reader(self.plan, path)
                self.assertEqual((shard.malformed_rows, shard.malformed_lines), (0, ()))
                partial = shard.partial
                self.assertEqual(partial.num_rows, 3000)
                self.assertEqual(partial.plan_digest, self.plan.digest)
                self.assertLessEqual(
                    fixtures.relative_difference(partial.values, expected.values), 1e-12)

    def test_a_malformed_row_is_a_null_row(self):
        # Issue 37 item 3: a row an upload would refuse contributes nothing
        # (the partial of the other rows) and is counted in num_rows, so
        # that neither the job's outcome nor, under REPLACE_ONE, the row
        # count the server checks depends on it. Its line goes to the
        # curator.
        lines = fixtures.random_csv(40, seed=3).splitlines()
        long_text = "x" * (MAX_RECORD_BYTES + 10)
        cases = {
            # line 6 (the header is line 1): an unknown category.
            "unknown level": (6, lambda f: [f[0], f[1], "Mars", f[3]]),
            "unknown label": (7, lambda f: [f[0], f[1], f[2], "maybe"]),
            # numeric cells that are not finite numbers, or missing.
            "not a number": (9, lambda f: [f[0], "lots", f[2], f[3]]),
            "nan": (10, lambda f: [f[0], "nan", f[2], f[3]]),
            "infinite": (11, lambda f: ["inf", f[1], f[2], f[3]]),
            "overflows to infinity": (13, lambda f: [f[0], "1e999", f[2], f[3]]),
            "missing number": (14, lambda f: [f[0], "?", f[2], f[3]]),
            # a row with a field too many, and one with a field too few: the
            # upload reader refuses both, and pandas must not fill them in.
            "extra field": (12, lambda f: f + ["x"]),
            "missing field": (15, lambda f: f[:3]),
            "one field": (16, lambda f: ["   "]),
            # a record longer than the reader's limit, unquoted and quoted
            # (delimiters, quotes and line ends inside): the reader skips to
            # its end by the CSV rules and reads on.
            "too long": (17, lambda f: [f[0], f[1], long_text, f[3]]),
            "too long, quoted": (18, lambda f: [f[0], f[1], '"a,""b\n' + long_text + '\n,"',
                                                f[3]]),
            "too long in a label": (19, lambda f: f[:3] + [" " * 10 + long_text]),
        }
        for case, (line, edit) in cases.items():
            bad = list(lines)
            bad[line - 1] = ",".join(edit(bad[line - 1].split(",")))
            path = self.shard("\n".join(bad) + "\n", f"shard-{line:02d}.csv")
            without = self.plan.partial_csv("\n".join(lines[:line - 1] + lines[line:]) + "\n")
            self.assertEqual(without.num_rows, 39)
            for name, reader in READERS.items():
                with self.subTest(case=case, reader=name):
                    shard = reader(self.plan, path)
                    self.assertIsInstance(shard, Shard)
                    self.assertEqual(shard.partial.num_rows, 40)
                    self.assertLessEqual(fixtures.relative_difference(shard.partial.values,
                                                                      without.values), 1e-12)
                    self.assertEqual(shard.malformed_rows, 1)
                    self.assertEqual([ln for ln, _ in shard.malformed_lines], [line])
                    self.assertEqual(shard_partial(self.plan, path).num_rows, 40)
                    self.assertTrue(np.isfinite(shard.partial.values).all())

    def test_an_unterminated_quote_at_the_end_is_one_null_row(self):
        lines = fixtures.random_csv(20, seed=4).splitlines()
        text = "\n".join(lines) + '\n30,40,"Gov\n31,41,Gov,>50K\n'
        path = self.shard(text)
        for name, reader in READERS.items():
            with self.subTest(reader=name):
                shard = reader(self.plan, path)
                self.assertEqual((shard.partial.num_rows, shard.malformed_rows), (21, 1))
                self.assertEqual(shard.malformed_lines[0][0], 22)
                self.assertLessEqual(fixtures.relative_difference(
                    shard.partial.values, self.plan.partial_csv("\n".join(lines) + "\n").values),
                    1e-12)

    def test_every_row_malformed(self):
        # Every contribution is null: the zero vector, and every row counted.
        text = "age,hours,workclass,Y\n" + "".join(f"{i},x,Gov,>50K\n" for i in range(30))
        path = self.shard(text)
        for kind, plan in fixtures.plans().items():
            for chunk_rows in (1, 7, 1 << 16):
                with self.subTest(kind=kind, chunk_rows=chunk_rows):
                    partial, malformed, examples = plan.read_csv_file(path, chunk_rows)
                    self.assertEqual((partial.num_rows, malformed), (30, 30))
                    self.assertFalse(partial.values.any())
                    # The first few lines only: the count says how many.
                    self.assertEqual([line for line, _ in examples], list(range(2, 10)))

    def test_a_header_the_schema_cannot_map_is_a_shard_error(self):
        # Not a row: the shard's format. The runner leaves the job pending.
        path = self.shard("age,hours,class,Y\n30,40,Gov,>50K\n")
        for name, reader in READERS.items():
            with self.subTest(reader=name):
                with self.assertRaises(ShardError) as raised:
                    reader(self.plan, path)
                self.assertEqual((raised.exception.shard, raised.exception.line), (path, 0))
                self.assertIn("workclass", raised.exception.detail)

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
        good = "\n".join(lines[:1203] + lines[1204:]) + "\n"
        lines[1203] = lines[1203].replace(",", ",,", 1)  # line 1204: a field too many
        bad = self.shard("\n".join(lines) + "\n", "shard-bad.csv")
        for chunk_rows in (1, 7, 1 << 16):
            with self.subTest(chunk_rows=chunk_rows):
                partial, malformed, examples = self.plan.read_csv_file(bad, chunk_rows)
                self.assertEqual((partial.num_rows, malformed), (1500, 1))
                self.assertEqual(examples[0][0], 1204)
                self.assertIn("fields", examples[0][1])
                self.assertLessEqual(fixtures.relative_difference(
                    partial.values, self.plan.partial_csv(good).values), 1e-12)

    def test_a_missing_shard_is_an_os_error(self):
        # The runner leaves the job pending (a path the curator fixes).
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
