"""Unit tests of bench/prepost-run's own logic (run by `make bench-check`, part of `make check`)."""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader("prepost_run", os.path.join(HERE, "prepost-run"))
_spec = importlib.util.spec_from_loader("prepost_run", _loader)
pr = importlib.util.module_from_spec(_spec)
_loader.exec_module(pr)


def launches(*runs):
    """{setting: [cells per launch]} from runs of {size: (eager, rndv, split) at 0%, at 100%}."""
    out = {"protean:" + k: [] for k in ("eager", "rendezvous", "eager-rendezvous")}
    for run in runs:
        cells = {k: {} for k in out}
        for size, (at0, at100) in run.items():
            for k, v0, v100 in zip(out, at0, at100):
                cells[k][(size, 0)] = v0
                cells[k][(size, 100)] = v100
        for k in out:
            out[k].append(cells[k])
    return out


class CrossoverSizes(unittest.TestCase):
    PCT = [0, 50, 100]

    def test_a_crossover_against_the_other_phases_winner(self):
        # 0%: both rendezvous variants beat eager by 15% but tie with each other; 100%: eager
        # wins by 14%. Choosing per phase pays both ways.
        run = {262144: ((8300, 9400, 9800), (11400, 9900, 10000))}
        self.assertEqual(pr.crossover_sizes(launches(run, run), self.PCT), [262144])

    def test_no_crossover_when_one_protocol_wins_both_phases(self):
        run = {8192: ((1700, 850, 840), (1760, 1400, 1540))}
        self.assertEqual(pr.crossover_sizes(launches(run), self.PCT), [])

    def test_under_five_percent_one_way_is_none(self):
        # 1 MiB: rendezvous 47% ahead at 0%, eager only 2% ahead at 100%.
        run = {1048576: ((7500, 11050, 10980), (11500, 11250, 11120))}
        self.assertEqual(pr.crossover_sizes(launches(run), self.PCT), [])

    def test_a_crossover_by_eight_percent(self):
        # 256 KiB over TCP in one launch: rendezvous 13% ahead at 0%, eager 8% at 100%.
        run = {262144: ((6500, 7350, 7300), (7900, 7300, 7310))}
        self.assertEqual(pr.crossover_sizes(launches(run), self.PCT), [262144])

    def test_every_launch_must_cross(self):
        yes = {262144: ((8300, 9400, 9800), (11400, 9900, 10000))}
        no = {262144: ((8300, 9400, 9800), (10400, 9900, 10000))}
        self.assertEqual(pr.crossover_sizes(launches(yes, no), self.PCT), [])
        self.assertEqual(pr.crossover_sizes(launches(yes, yes), self.PCT), [262144])


if __name__ == "__main__":
    unittest.main()
