"""ctest k8s_hpa_replay: replays the load traces of tests/k8s/traces through the HPA v2 algorithm
(hpa_replay.py) with the numbers of deploy/k8s/inferd-hpa.yaml and the CPU request of
inferd-deployment.yaml, and checks the replica counts they give. Prints each trace's replica
changes (docs/fleet.md quotes them).

  /usr/bin/python3 tests/k8s/hpa_replay_test.py [-v]
"""

import copy
import math
import os
import sys
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hpa_replay import Hpa, Replay, Trace, proposal  # noqa: E402

K8S = os.path.join(HERE, "..", "..", "deploy", "k8s")


def manifests():
    with open(os.path.join(K8S, "inferd-hpa.yaml")) as f:
        hpa = yaml.safe_load(f)
    with open(os.path.join(K8S, "inferd-deployment.yaml")) as f:
        deployment = yaml.safe_load(f)
    return hpa, deployment


def replay(name, hpa_doc=None):
    hpa, deployment = manifests()
    steps = Replay(Hpa.from_manifests(hpa_doc or hpa, deployment),
                   Trace.load(os.path.join(HERE, "traces", f"{name}.csv"))).run()
    return steps, {s.t: s.replicas for s in steps}


def changes(steps):
    out, prev = [], None
    for s in steps:
        if s.replicas != prev:
            out.append((int(s.t), s.replicas))
            prev = s.replicas
    return out


class FormulaTest(unittest.TestCase):
    def test_proposal_and_tolerance(self):
        self.assertEqual(proposal(4, 100, 50), 8)     # ceil(4 * 2)
        self.assertEqual(proposal(4, 56, 50), 5)      # 1.12: outside the tolerance, ceil(4.48)
        self.assertEqual(proposal(4, 54.9, 50), 4)    # 1.098: within 10%, unchanged
        self.assertEqual(proposal(4, 45.1, 50), 4)    # 0.902: within 10%
        self.assertEqual(proposal(4, 44, 50), 4)      # 0.88: ceil(3.52) = 4
        self.assertEqual(proposal(4, 30, 50), 3)      # ceil(2.4)
        self.assertEqual(proposal(3, 100, 70), 5)     # CPU 100% of a 70% target: ceil(4.29)

    def test_manifest_numbers(self):
        hpa = Hpa.from_manifests(*manifests())
        self.assertEqual((hpa.min_replicas, hpa.max_replicas), (2, 10))
        self.assertEqual(hpa.cpu_target_pct, 70)
        self.assertEqual(hpa.rate_metric, "inferd_requests_per_second")
        self.assertEqual(hpa.down_window_s, 300)
        self.assertEqual(hpa.cpu_request_cores, 2.0)


class TraceTest(unittest.TestCase):
    def test_step(self):
        steps, at = replay("step")
        print("step:", changes(steps))
        # 40 requests/s = 20 per pod: below both targets, held at minReplicas.
        self.assertTrue(all(r == 2 for t, r in at.items() if t < 600))
        # The step to 400/s: within four syncs (60 s) at least the 8 pods 400 / 50 needs; the 1 min
        # rate window still holds the saturated pods' rates, so it overshoots to maxReplicas.
        self.assertGreaterEqual(at[660], 8)
        self.assertLessEqual(max(at.values()), 10)
        # Settled at 8 = ceil(400 / 50) once the overshoot's 5 min stabilization has passed.
        self.assertTrue(all(r == 8 for t, r in at.items() if 1020 <= t < 1200))
        # Load back to 40/s at 1200 s: the scale-down window keeps the 8 pods for 300 s ...
        self.assertTrue(all(r == 8 for t, r in at.items() if 1200 <= t < 1500))
        # ... then back to minReplicas within a few syncs.
        self.assertEqual(at[1575], 2)

    def test_scale_down_window_is_what_holds_the_pods(self):
        hpa, _ = manifests()
        fast = copy.deepcopy(hpa)
        fast["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = 0
        _, at = replay("step", fast)
        print("step, no scale-down window:", changes(replay("step", fast)[0]))
        # Without it the pods go as soon as the 1 min rate window has seen the drop.
        self.assertLessEqual(at[1290], 3)

    def test_spike(self):
        steps, at = replay("spike")
        print("spike:", changes(steps))
        self.assertTrue(all(r == 2 for t, r in at.items() if t < 300))  # 100/s = 50 per pod
        self.assertEqual(at[360], 10)  # a 1 min spike to 600/s reaches maxReplicas
        # The spike is over at 360 s; the pods stay for the 300 s window, then go.
        self.assertTrue(all(r == 10 for t, r in at.items() if 360 <= t < 660))
        self.assertEqual(at[720], 2)

    def test_ramp(self):
        steps, at = replay("ramp")
        print("ramp:", changes(steps))
        up = [r for t, r in sorted(at.items()) if t <= 600]
        self.assertEqual(up, sorted(up))  # never down while the load rises
        # The plateau of 450/s: ceil(450 / 50) = 9 pods.
        self.assertTrue(all(r == 9 for t, r in at.items() if 700 <= t < 900))
        self.assertEqual(at[max(at)], 2)

    def test_cpu_bound(self):
        steps, at = replay("cpu_bound")
        print("cpu_bound:", changes(steps))
        # 150/s × 60 ms = 9 cores; 70% of 2 cores per pod → ceil(9 / 1.4) = 7 pods, set by CPU:
        # the request rate per pod (about 21) stays under its 50 target.
        want = math.ceil(150 * 0.06 / (2 * 0.7))
        self.assertEqual(want, 7)
        self.assertTrue(all(r == want for t, r in at.items() if t >= 300))
        self.assertTrue(all(s.rate_per_pod < 50 for s in steps))


if __name__ == "__main__":
    unittest.main()
