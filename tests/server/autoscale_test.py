#!/usr/bin/env python3
"""End-to-end check of in-node autoscaling through `inferd serve` (docs/fleet.md, "Autoscaling").

A model of 8 MatMuls over 64 x 1024 (~1 GFLOP, tens of ms per request on one thread) is served with
`inferd { autoscaling { min_instances: 1 max_instances: 3 ... } }` and windows of a second or two.
Closed-loop load from 4 client threads keeps its single instance busy: the gauge
inferd_model_instances must rise above 1 within a few seconds; once the load stops (0 requests/s,
below scale_down_qps, 1 here) it must fall back to 1. No request may fail while instances come and go,
and the scale events are counted. A second model with min_instances > max_instances must fail its
load with the error naming both.

  /usr/bin/python3 tests/server/autoscale_test.py --inferd build/inferd --work-dir /tmp/as
"""
import argparse
import os
import re
import shutil
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, failures  # noqa: E402

MATMULS = 8
WIDTH = 1024
ROWS = 64
CONFIG = """name: "heavy"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 1, {w} ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 1, {w} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
inferd {{
  threads_per_instance: 1
  autoscaling {{
    min_instances: 1 max_instances: 3
    scale_up_utilization: 0.7 scale_down_qps: 1
    scale_up_window_ms: 1000 scale_down_window_ms: 2000 cooldown_ms: 1000 sample_period_ms: 250
  }}
}}
"""
BAD_CONFIG = """name: "bad"
platform: "onnxruntime_onnx"
max_batch_size: 0
inferd { autoscaling { min_instances: 3 max_instances: 1 } }
"""


def write_repository(root):
    """heavy: x [1, WIDTH] is expanded to ROWS rows, goes through MATMULS MatMul + Tanh layers
    and is averaged back to [1, WIDTH]: ~1 GFLOP a request, so the instance, not the HTTP client,
    is what the load keeps busy. bad: the same model with min_instances > max_instances."""
    if os.path.exists(root):
        shutil.rmtree(root)
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([ROWS, WIDTH], dtype=np.int64), "rows")]
    nodes, prev = [helper.make_node("Expand", ["x", "rows"], ["e"])], "e"
    for i in range(MATMULS):
        w = (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        prev = f"t{i}"
    nodes.append(helper.make_node("ReduceMean", [prev], ["y"], axes=[0], keepdims=1))
    g = helper.make_graph(nodes, "heavy",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    for name, config in (("heavy", CONFIG.format(w=WIDTH)), ("bad", BAD_CONFIG)):
        os.makedirs(f"{root}/{name}/1")
        onnx.save(m, f"{root}/{name}/1/model.onnx")
        with open(f"{root}/{name}/config.pbtxt", "w") as f:
            f.write(config)


def metric(text, family, model="heavy", extra=""):
    m = re.search(rf'^{family}{{model="{model}",version="1"{extra}}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def instances(metrics_url):
    return metric(requests.get(f"{metrics_url}/metrics", timeout=10).text,
                  "inferd_model_instances")


class Load:
    """Closed-loop clients posting to the model until stopped; counts answers by status."""

    def __init__(self, http, clients):
        self.url = f"{http}/v2/models/heavy/infer"
        self.body = {"inputs": [{"name": "x", "shape": [1, WIDTH], "datatype": "FP32",
                                 "data": [0.5] * WIDTH}]}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.bad = []
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def run(self):
        s = requests.Session()
        while not self.stop.is_set():
            try:
                r = s.post(self.url, json=self.body, timeout=30)
                status = r.status_code
            except requests.RequestException as e:
                status = f"{type(e).__name__}"
            with self.lock:
                if status == 200:
                    self.ok += 1
                else:
                    self.bad.append(status)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def wait_for(fn, timeout_s, every_s=0.25):
    """Seconds until fn() was true, or None after timeout_s."""
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        if fn():
            return time.time() - t0
        time.sleep(every_s)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    repo = os.path.join(a.work_dir, "repo")
    write_repository(repo)
    log = os.path.join(a.work_dir, "autoscale.log")
    srv = Server(a.inferd, repo, log, args=["--threads", "2"], grpc=False)
    try:
        rows = {r["name"]: r for r in requests.post(f"{srv.http}/v2/repository/index",
                                                     json={}, timeout=10).json()}
        bad = rows.get("bad", {})
        check(bad.get("state") == "UNAVAILABLE" and
              "inferd.autoscaling.max_instances 1 is below min_instances 3" in bad.get("reason", ""),
              f"min > max fails that model's load with a clear error ({bad})")
        check(rows.get("heavy", {}).get("state") == "READY", f"heavy is ready ({rows.get('heavy')})")
        check(instances(srv.metrics) == 1, "one instance before the load")

        load = Load(srv.http, clients=4)
        t_up = wait_for(lambda: (instances(srv.metrics) or 0) >= 2, 30)
        peak = instances(srv.metrics)
        time.sleep(3)  # under load a little longer: it may go on to max_instances
        peak = max(peak or 0, instances(srv.metrics) or 0)
        load.finish()
        served = load.ok
        check(t_up is not None, "instances rose above 1 under load")
        print(f"load: instances 1 -> {peak:.0f} after {t_up or -1:.1f} s of load "
              f"(up window 1 s, sample period 0.25 s); {served} requests served")
        t_down = wait_for(lambda: instances(srv.metrics) == 1, 30)
        check(t_down is not None, "instances fell back to 1 after the load stopped")
        print(f"idle: back to 1 instance {t_down or -1:.1f} s after the load stopped "
              f"(down window 2 s, cool-down 1 s)")
        check(not load.bad, f"no request failed while instances changed ({load.bad[:5]})")
        text = requests.get(f"{srv.metrics}/metrics", timeout=10).text
        ups = metric(text, "inferd_model_scale_events_total", extra=',direction="up"')
        downs = metric(text, "inferd_model_scale_events_total", extra=',direction="down"')
        check((ups or 0) >= 1 and (downs or 0) >= 1 and ups == downs,
              f"scale events counted: {ups} up, {downs} down (back at min: as many of each)")
        check((metric(text, "inferd_model_busy_seconds_total") or 0) > 0, "busy time exported")
        check(srv.proc.poll() is None, "server still running")
    finally:
        rc = srv.stop()
    check(rc == 0, f"clean shutdown (exit code {rc})")
    time.sleep(0.5)  # the log pump thread writes the last lines
    srv.log.flush()
    with open(log) as f:
        logged = f.read()
    check(re.search(r"autoscaling 'heavy' version 1: 1 -> [23] instance", logged) is not None,
          "the scale-up is logged")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("autoscale e2e: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
