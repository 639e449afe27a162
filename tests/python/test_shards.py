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
            # (delimiters and quotes inside): the reader skips to the end of
            # its line and reads on.
            "too long": (17, lambda f: [f[0], f[1], long_text, f[3]]),
            "too long, quoted": (18, lambda f: [f[0], f[1], '"a,""b' + long_text + ',"', f[3]]),
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

    def check_null_lines(self, bad_lines, null_lines, good_lines, name="shard-q.csv"):
        # Both readers: one record per non-blank line after the header, the
        # lines in null_lines null rows (in order) and the partial that of
        # good_lines (header first) alone.
        path = self.shard("".join(bad_lines), name)
        expected = self.plan.partial_csv("\n".join(good_lines) + "\n")
        self.assertEqual(expected.num_rows, len(good_lines) - 1)
        for name, reader in READERS.items():
            with self.subTest(reader=name):
                shard = reader(self.plan, path)
                self.assertEqual((shard.partial.num_rows, shard.malformed_rows),
                                 (expected.num_rows + len(null_lines), len(null_lines)))
                self.assertEqual([line for line, _ in shard.malformed_lines], null_lines)
                self.assertLessEqual(fixtures.relative_difference(shard.partial.values,
                                                                  expected.values), 1e-12)

    def test_an_unterminated_quote_is_one_null_row_on_its_line(self):
        # The residue of docs/privacy.md 6.5 before the line rule: a field
        # that opens a quote and never closes it made the rest of the shard
        # one record (one null row), so the shard's row count, which the
        # server checks against the public n under REPLACE_ONE, depended on
        # a row's contents. A record is now one line: the line is a null
        # row, and the next line starts a record.
        lines = fixtures.random_csv(40, seed=4).splitlines()
        for line in (2, 9, 23, 41):  # the header is line 1; 41 is the last
            for ending in ("\n", "\r\n"):
                with self.subTest(line=line, ending=repr(ending)):
                    bad = [text + ending for text in lines]
                    fields = lines[line - 1].split(",")
                    bad[line - 1] = f'{fields[0]},{fields[1]},"{fields[2]},{fields[3]}{ending}'
                    self.check_null_lines(bad, [line], lines[:line - 1] + lines[line:],
                                          f"shard-q{line}-{len(ending)}.csv")

    def test_a_quote_closed_on_a_later_line_ends_at_its_line(self):
        # A quoted field that the RFC would continue onto the next line:
        # each line is its own record, here both null rows. Pandas reads the
        # two lines as one good row (hours "80.8\n" parses as a number), so
        # read_shard_pandas must not take its frame.
        lines = fixtures.random_csv(40, seed=3).splitlines()
        for ending in ("\n", "\r\n"):
            with self.subTest(ending=repr(ending)):
                bad = [text + ending for text in lines]
                first, second = lines[9].split(","), lines[10].split(",")
                bad[9] = f'{first[0]},"{first[1]}{ending}'
                bad[10] = f'",{second[2]},{second[3]}{ending}'
                self.check_null_lines(bad, [10, 11], lines[:9] + lines[11:],
                                      f"shard-span-{len(ending)}.csv")
        # A quoted field holding line ends and a blank line: the blank line
        # is not a record, each other line is one.
        bad = [text + "\n" for text in lines]
        bad[19:22] = ['1,2,"Gov\n', "\n", 'x",>50K\n']
        self.check_null_lines(bad, [20, 22], lines[:19] + lines[22:], "shard-span-blank.csv")

    def test_a_lone_carriage_return_does_not_end_a_line(self):
        # Outside quotes the upload reader drops a CR (CRLF line ends), so a
        # CR inside a line leaves one record, here of 7 fields: a null row.
        # Pandas ends a line at a lone CR and read two good rows.
        lines = fixtures.random_csv(40, seed=3).splitlines()
        bad = [text + "\n" for text in lines]
        bad[9:11] = [lines[9] + "\r" + lines[10] + "\n"]
        self.check_null_lines(bad, [10], lines[:9] + lines[11:], "shard-cr.csv")

    def test_the_row_count_is_the_number_of_lines(self):
        # N, the partial's rows, is the number of non-blank lines after the
        # header (a blank line holds nothing but CRs), whatever the lines
        # hold: the count the curator declares as n under REPLACE_ONE.
        import random

        rng = random.Random(37)
        pieces = ['"', '""', ",", "x", "Gov", "40", " ", "\r", '"a\nb"', "\n", "\r\n"]
        good = fixtures.random_csv(30, seed=6).splitlines()
        for trial in range(40):
            body = []
            for text in good[1:]:
                body.append(text if rng.random() < 0.6 else
                            "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))))
            text = good[0] + "\n" + "\n".join(body) + rng.choice(["", "\n", "\r\n"])
            path = self.shard(text, f"shard-n{trial}.csv")
            with open(path, "rb") as f:
                physical = f.read().split(b"\n")
            lines = sum(1 for line in physical[1:] if line.strip(b"\r"))
            shards = {}
            for name, reader in READERS.items():
                with self.subTest(trial=trial, reader=name):
                    shard = shards[name] = reader(self.plan, path)
                    self.assertEqual(shard.partial.num_rows, lines)
                    self.assertTrue(np.isfinite(shard.partial.values).all())
            with self.subTest(trial=trial):
                self.assertEqual(shards["pandas"].malformed_rows, shards["upload"].malformed_rows)
                self.assertLessEqual(fixtures.relative_difference(
                    shards["pandas"].partial.values, shards["upload"].partial.values), 1e-12)

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
