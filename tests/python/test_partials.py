"""dpcurator._core partials (issue 28 item 1): the merged partials of row
blocks equal the in-process engine's exact statistic; bytes and merges keep
them exact; plans the scale-out path cannot run are refused before any row
is read; malformed rows name the column and row, never the value, and
read_block makes them null rows (docs/privacy.md 6.5)."""

import hashlib
import io
import pickle
import unittest

import numpy as np
import pandas as pd

import dpcurator
import fixtures


def frame_of(text, plan):
    return pd.read_csv(io.StringIO(text), **dpcurator.csv_options(plan))


class PartialsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plans = fixtures.plans()
        cls.blocks = [fixtures.random_csv(700, seed) for seed in (1, 2, 3, 4)]
        header = cls.blocks[0].splitlines()[0]
        cls.whole = header + "\n" + "".join(
            "\n".join(b.splitlines()[1:]) + "\n" for b in cls.blocks
        )

    def test_merged_dataframe_partials_equal_the_engine(self):
        for kind, plan in self.plans.items():
            with self.subTest(kind=kind):
                engine = plan.engine_statistic_csv(self.whole)
                self.assertEqual(engine.shape, (plan.dimension,))
                self.assertGreater(np.abs(engine).sum(), 0.0)
                merged = dpcurator.merge_all(
                    plan.partial(frame_of(b, plan)) for b in self.blocks
                )
                self.assertEqual(merged.num_rows, 2800)
                self.assertLessEqual(
                    fixtures.relative_difference(merged.values, engine), 1e-12
                )

    def test_the_comparison_sees_one_row(self):
        # The 1e-12 bound has power: the shards less one row are far off.
        for kind, plan in self.plans.items():
            with self.subTest(kind=kind):
                engine = plan.engine_statistic_csv(self.whole)
                frames = [frame_of(b, plan) for b in self.blocks]
                frames[2] = frames[2].drop(index=frames[2].index[-1])
                merged = dpcurator.merge_all(plan.partial(f) for f in frames)
                self.assertGreater(fixtures.relative_difference(merged.values, engine), 1e-6)

    def test_csv_and_dataframe_blocks_agree(self):
        for kind, plan in self.plans.items():
            with self.subTest(kind=kind):
                a = plan.partial_csv(self.blocks[0], "shard-0")
                b = plan.partial(frame_of(self.blocks[0], plan))
                self.assertLessEqual(fixtures.relative_difference(a.values, b.values), 1e-12)

    def test_counts_are_the_rows(self):
        plan = self.plans["rff_embedding"]
        partial = plan.partial_csv(self.blocks[1])
        counts = partial.values[-2:]  # two classes: the per-class counts come last
        self.assertEqual(counts.sum(), 700)
        marginals = self.plans["marginals"].partial_csv(self.blocks[1]).values
        # Four cliques, each a table of every row.
        self.assertEqual(marginals.sum(), 4 * 700)

    def test_plans_differ(self):
        # A comparison that could not fail would prove nothing: another seed
        # is another feature map, and the statistic moves.
        schema = fixtures.schema_bytes()
        other = dpcurator.Plan.from_request(
            schema,
            dpcurator.request_from_text("rff_embedding { num_frequencies: 64 seed: 13 }"),
        )
        plan = self.plans["rff_embedding"]
        self.assertNotEqual(other.fingerprint, plan.fingerprint)
        a = plan.partial_csv(self.blocks[0]).values
        b = other.partial_csv(self.blocks[0]).values
        self.assertGreater(fixtures.relative_difference(a, b), 1e-3)
        with self.assertRaisesRegex(RuntimeError, "different plans"):
            plan.partial_csv(self.blocks[0]).merge(other.partial_csv(self.blocks[0]))

    def test_bytes_and_pickle_are_exact(self):
        for kind, plan in self.plans.items():
            with self.subTest(kind=kind):
                partial = plan.partial_csv(self.blocks[2])
                data = partial.to_bytes()
                self.assertEqual(len(data), 64 + 8 * plan.dimension)
                back = dpcurator.Partial.from_bytes(data)
                self.assertEqual(back.num_rows, partial.num_rows)
                self.assertEqual(back.plan_digest, plan.digest)
                np.testing.assert_array_equal(back.values, partial.values)
                np.testing.assert_array_equal(
                    pickle.loads(pickle.dumps(partial)).values, partial.values
                )
                with self.assertRaises(ValueError):
                    dpcurator.Partial.from_bytes(data[:-1])
                # A pickled plan is rebuilt from its inputs: the same map.
                again = pickle.loads(pickle.dumps(plan))
                self.assertEqual(again.fingerprint, plan.fingerprint)
                np.testing.assert_array_equal(
                    again.partial_csv(self.blocks[2]).values, partial.values
                )

    def test_the_digest_is_the_servers(self):
        # The pending job names its plan by SHA-256(schema || request); a
        # partial carries its plan's digest through merges and pickles.
        schema = fixtures.schema_bytes()
        request = dpcurator.request_from_text("rff_embedding { num_frequencies: 64 seed: 11 }")
        plan = dpcurator.Plan.from_request(schema, request)
        self.assertEqual(plan.digest, hashlib.sha256(schema + request).digest())
        partial = plan.partial_csv(self.blocks[0]) + plan.partial_csv(self.blocks[1])
        self.assertEqual(partial.plan_digest, plan.digest)
        self.assertEqual(pickle.loads(pickle.dumps(partial)).plan_digest, plan.digest)
        other = dpcurator.Plan.from_request(
            schema, dpcurator.request_from_text("rff_embedding { num_frequencies: 64 seed: 12 }"))
        self.assertNotEqual(other.digest, plan.digest)
        self.assertNotEqual(self.plans["marginals"].digest,
                            dpcurator.Plan.marginals(schema, [[0]]).digest)

    def test_empty_is_the_identity(self):
        plan = self.plans["marginals"]
        partial = plan.partial_csv(self.blocks[3])
        merged = plan.empty() + partial
        np.testing.assert_array_equal(merged.values, partial.values)
        self.assertEqual(merged.num_rows, partial.num_rows)

    def test_recipe_plans_count_every_table_once(self):
        # Issue 41: an mst plan's partial is the exact tables of every 1-way
        # and every pair (4 columns: 4 + 6 cliques), aim's those of its
        # workload's closure; each table holds every row once, and the plan
        # is the job's: its digest is SHA-256(schema || request).
        block = self.blocks[2]
        for kind, cliques in (("mst", 4 + 6), ("aim", 4 + 1 + 3 + 1)):
            with self.subTest(kind=kind):
                plan = self.plans[kind]
                partial = plan.partial_csv(block)
                self.assertEqual(plan.kind, kind)
                self.assertEqual(partial.num_rows, 700)
                self.assertEqual(partial.values.sum(), cliques * 700)
                np.testing.assert_array_equal(partial.values, np.round(partial.values))
                request = pickle.loads(pickle.dumps(plan)).digest
                self.assertEqual(request, plan.digest)
        # (One schema's bytes: schema_from_json's map of aliases may
        # serialize in either order, so two calls may give two digests.)
        schema = fixtures.schema_bytes()
        request = dpcurator.request_from_text('dataset_id: "ds_test" epsilon: 1 mst {}')
        self.assertEqual(dpcurator.Plan.from_request(schema, request).digest,
                         hashlib.sha256(schema + request).digest())

    def test_unrunnable_plans_are_refused(self):
        schema = fixtures.schema_bytes()
        cases = {
            "seed is 0": "rff_embedding { num_frequencies: 64 }",
            "private_length_scale": "charfn_embedding { seed: 3 private_length_scale: true }",
            "has no partials": 'marginals { cliques { columns: "age" } }',
            # An aim request as the analyst sent it, not as the server stored it.
            "names no workload": "aim {}",
        }
        for expected, text in cases.items():
            with self.subTest(request=text):
                with self.assertRaisesRegex(RuntimeError, expected):
                    dpcurator.Plan.from_request(schema, dpcurator.request_from_text(text))
        with self.assertRaisesRegex(ValueError, "column index 9"):
            dpcurator.Plan.marginals(schema, [[9]])

    def test_malformed_rows_name_column_and_row_not_value(self):
        plan = self.plans["rff_embedding"]
        frame = frame_of(self.blocks[0], plan)
        # csv_options reads workclass as a categorical, which takes no new level.
        bad = frame.astype({"workclass": object})
        bad.loc[5, "workclass"] = "Bogus"
        with self.assertRaisesRegex(ValueError, "row 5 .*workclass"):
            plan.partial(bad)
        bad = frame.copy()
        bad["hours"] = bad["hours"].astype("float64")
        bad.loc[7, "hours"] = 123456.75
        plan.partial(bad)  # outside the bounds: clamped, as on upload
        bad.loc[7, "hours"] = float("nan")
        with self.assertRaises(ValueError) as raised:
            plan.partial(bad)
        self.assertIn("'hours', row 7", str(raised.exception))
        self.assertNotIn("nan", str(raised.exception).lower())
        with self.assertRaisesRegex(ValueError, "no column 'Y'"):
            plan.partial(frame.drop(columns=["Y"]))

    def test_read_block_makes_unreadable_rows_null_rows(self):
        # plan.read_block, the total form for a reader of another format
        # (docs/privacy.md 6.5): a row with a cell the upload would refuse
        # adds nothing and is counted; its position is for the curator.
        for kind, plan in self.plans.items():
            with self.subTest(kind=kind):
                frame = frame_of(self.blocks[1], plan).astype({"workclass": object})
                frame["hours"] = frame["hours"].astype("float64")
                bad = frame.copy()
                bad.loc[5, "workclass"] = "Bogus"
                bad.loc[7, "hours"] = float("nan")
                bad.loc[9, "hours"] = float("inf")
                bad.loc[11, "workclass"] = "Bogus"  # a second bad row, same column
                bad.loc[11, "hours"] = float("-inf")  # and a second bad cell in it
                dropped = [5, 7, 9, 11]
                partial, malformed, examples = plan.read_block(bad)
                self.assertEqual((partial.num_rows, malformed), (len(frame), len(dropped)))
                self.assertEqual([row for row, _ in examples], dropped)
                expected = plan.partial(frame.drop(index=dropped))
                self.assertLessEqual(
                    fixtures.relative_difference(partial.values, expected.values), 1e-12)
                # A numeric column of text, read cell by cell.
                as_text = frame.astype({"hours": object})
                as_text.loc[3, "hours"] = "lots"
                partial, malformed, examples = plan.read_block(as_text)
                self.assertEqual((partial.num_rows, malformed), (len(frame), 1))
                self.assertEqual(examples[0][0], 3)
                # A clean block: read_block is partial.
                partial, malformed, _ = plan.read_block(frame)
                self.assertEqual(malformed, 0)
                np.testing.assert_array_equal(partial.values, plan.partial(frame).values)
                # The block's shape is still an error.
                with self.assertRaisesRegex(ValueError, "no column 'Y'"):
                    plan.read_block(frame.drop(columns=["Y"]))


if __name__ == "__main__":
    unittest.main()
