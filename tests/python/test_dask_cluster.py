"""The scale-out path on a real Dask cluster (issue 28 item 1, "Done
when"): a LocalCluster of 2 worker processes of one thread each, 4 CSV
shards read by dask.dataframe, partials by map_partitions, merged on the
cluster, equal the in-process engine's exact statistic over the same rows
(relative difference <= 1e-12) for every kind."""

import os
import tempfile
import unittest

import dask.dataframe as dd
from distributed import Client, LocalCluster

import dpcurator
import dpcurator.dask
import fixtures


class DaskClusterTest(unittest.TestCase):
    def test_sharded_partials_equal_the_engine(self):
        with tempfile.TemporaryDirectory() as directory:
            paths, whole = fixtures.write_shards(directory, 4, 2500, seed=7)
            with LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                local_directory=directory,
            ) as cluster, Client(cluster) as client:
                for kind, plan in fixtures.plans().items():
                    with self.subTest(kind=kind):
                        frame = dd.read_csv(
                            os.path.join(directory, "shard-*.csv"),
                            blocksize=None,  # one partition per shard
                            **dpcurator.csv_options(plan),
                        )
                        self.assertEqual(frame.npartitions, 4)
                        merged = client.compute(
                            dpcurator.dask.exact_partial(plan, frame, split_every=2)
                        ).result()
                        self.assertEqual(merged.num_rows, 10000)
                        engine = plan.engine_statistic_csv(whole)
                        self.assertLessEqual(
                            fixtures.relative_difference(merged.values, engine), 1e-12
                        )
                # The work ran in the workers' processes, not here.
                self.assertEqual(len(client.scheduler_info()["workers"]), 2)


if __name__ == "__main__":
    unittest.main()
