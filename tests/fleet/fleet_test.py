#!/usr/bin/env python3
"""End-to-end test of routing on HAProxy (docs/fleet.md, "Routing on HAProxy").

Three `inferd serve` nodes and a standby behind HAProxy on 127.0.0.1 (deploy/fleet/run_fleet.py,
config from `inferd fleet haproxy-config`, checked by `haproxy -c`), a small generated repository
(tests/server/server_test.py's write_repository). Checks:
  - the agent weights reach HAProxy (a node with --agent-capacity 0.5 gets weight 50);
  - under closed-loop load (HTTP and gRPC client threads), SIGKILL of one node gives zero
    client-visible errors (retry-on + redispatch), and HAProxy's `show stat` marks it DOWN within
    the check interval x fall (plus one interval of slack for a loaded machine);
  - while every server of the agent-weighted backend is drained (as agents that all find their
    node slow would leave it), requests are served through the fallback backend;
  - `inferd fleet balance` drains a node made slow (stopped 150 ms of every 200 ms, as a CPU
    quota would) under load, restores it once it is fast again, and exits cleanly on SIGTERM;
  - the standby takes no traffic until every active node is down, then serves;
  - a bad node list is refused with a clear error and a non-zero exit code.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "deploy", "fleet"))
from server_test import check, failures, grpc_client, write_repository  # noqa: E402
from run_fleet import Fleet  # noqa: E402

CHECK_INTER_MS, FALL = 500, 2


def infer_body(values):
    return {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                        "data": [float(v) for v in values]}]}


class Load:
    """Closed-loop clients: each thread sends a request, checks the answer, sends the next."""

    def __init__(self, http_url, grpc_unary=None, pb=None, http_threads=4):
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.errors = []
        self.threads = [threading.Thread(target=self.http_loop, args=(http_url, i))
                        for i in range(http_threads)]
        if grpc_unary is not None:
            self.threads.append(threading.Thread(target=self.grpc_loop, args=(grpc_unary, pb)))
        for t in self.threads:
            t.start()

    def record(self, error):
        with self.lock:
            if error is None:
                self.ok += 1
            else:
                self.errors.append(error)

    def http_loop(self, url, seed):
        session = requests.Session()
        rng = np.random.default_rng(seed)
        while not self.stop_flag.is_set():
            x = rng.integers(-100, 100, 16)
            try:
                r = session.post(f"{url}/v2/models/identity/infer", json=infer_body(x), timeout=30)
                if r.status_code != 200:
                    self.record(f"HTTP {r.status_code}: {r.text[:200]}")
                elif r.json()["outputs"][0]["data"] != [float(v) for v in x]:
                    self.record("HTTP: wrong output")
                else:
                    self.record(None)
            except Exception as e:  # a reset or refused connection is a client-visible error
                self.record(f"HTTP {type(e).__name__}: {e}")

    def grpc_loop(self, unary, pb):
        rng = np.random.default_rng(99)
        while not self.stop_flag.is_set():
            x = rng.integers(-100, 100, 16).astype(np.float32)
            req = pb.ModelInferRequest(model_name="identity")
            t = req.inputs.add(name="x", datatype="FP32")
            t.shape.extend([1, 16])
            req.raw_input_contents.append(x.tobytes())
            try:
                resp = unary("ModelInfer", req, pb.ModelInferResponse)
                out = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32)
                self.record(None if np.array_equal(out, x) else "gRPC: wrong output")
            except Exception as e:
                self.record(f"gRPC {type(e).__name__}: {str(e)[:200]}")

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join()


def bad_input_tests(inferd):
    cases = [(["--node", "127.0.0.1:70000"], "outside 1..65535"),
             (["--node", "not_a_host:8000"], "not an IPv4 address or host name"),
             (["--node", "127.0.0.1:8000", "--node", "127.0.0.1:8000"], "listed twice"),
             (["--node", "127.0.0.1:8000:300"], "weight '300'"),
             (["--node", "127.0.0.1:8000", "--balance", "source"], "unknown balance"),
             (["--backup", "127.0.0.1:8000"], "--node is required")]
    for args, needle in cases:
        r = subprocess.run([inferd, "fleet", "haproxy-config"] + args, capture_output=True,
                           text=True)
        check(r.returncode != 0 and needle in r.stderr and r.stdout == "",
              f"{args}: exit {r.returncode}, stderr {r.stderr.strip()!r} (want '{needle}')")


def wait_for(predicate, timeout, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def weights_tests(fleet):
    # Idle nodes report 100% x capacity: 100, 100 and 50 (node3 runs with --agent-capacity 0.5).
    def weights():
        s = fleet.server_stats()
        return [s[f"node{i}"]["weight"] for i in (1, 2, 3)]
    check(wait_for(lambda: weights() == ["100", "100", "50"], 5),
          f"agent weights reach HAProxy (weights {weights()}, want 100, 100, 50)")


def fallback_test(fleet):
    # Drain every node of inferd_http and put the standby in maintenance (a standby that is up
    # would take over: HAProxy's backups serve while no active server is usable), with the agents
    # off (their "up ready" would undo both): nbsrv(inferd_http) is 0 and the frontend uses
    # inferd_http_fallback.
    names = ["node1", "node2", "node3", "backup1"]
    for n in names:
        fleet.proxy.command(f"disable agent inferd_http/{n}")
        state = "maint" if n == "backup1" else "drain"
        fleet.proxy.command(f"set server inferd_http/{n} state {state}")
    try:
        before = sum(int(r["stot"]) for r in fleet.server_stats("inferd_http_fallback").values())
        codes = [requests.post(f"{fleet.http_url}/v2/models/identity/infer",
                               json=infer_body(range(16)), timeout=30).status_code
                 for _ in range(6)]
        fb = fleet.server_stats("inferd_http_fallback")
        after = sum(int(r["stot"]) for r in fb.values())
        check(codes == [200] * 6, f"every node drained: requests still served ({codes})")
        check(after - before == 6, f"they went through inferd_http_fallback ({after - before})")
        check(fb["backup1"]["stot"] == "0", "the fallback's standby took none while nodes are up")
    finally:
        for n in names:
            fleet.proxy.command(f"set server inferd_http/{n} state ready")
            fleet.proxy.command(f"enable agent inferd_http/{n}")


class DutyCycle:
    """Stops process `pid` for `stop_s` of every `stop_s + run_s` (a CPU quota's effect on a busy
    process) until close(), which leaves it continued."""

    def __init__(self, pid, stop_s=0.15, run_s=0.05):
        self.pid, self.stop_s, self.run_s = pid, stop_s, run_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def loop(self):
        while not self.done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            time.sleep(self.stop_s)
            os.kill(self.pid, signal.SIGCONT)
            time.sleep(self.run_s)

    def close(self):
        self.done.set()
        self.thread.join()
        os.kill(self.pid, signal.SIGCONT)


def balancer_test(fleet):
    def node3_http():
        return [e for s, e in fleet.balancer.events() if s == "inferd_http/node3"]
    load = Load(fleet.http_url)
    try:
        time.sleep(1)  # the balancer learns the nodes' service times
        quota = DutyCycle(fleet.nodes[2].proc.pid)
        try:
            drained = wait_for(lambda: "drain" in node3_http(), 5)
            served_before = int(fleet.server_stats()["node3"]["stot"])
            time.sleep(1.5)
            served_slow = int(fleet.server_stats()["node3"]["stot"]) - served_before
        finally:
            quota.close()
        returned = wait_for(lambda: node3_http()[-1:] == ["restore"] and
                            fleet.server_stats()["node3"]["status"] == "UP", 10)
        before = int(fleet.server_stats()["node3"]["stot"])
        time.sleep(1)
        served_after = int(fleet.server_stats()["node3"]["stot"]) - before
    finally:
        load.stop()
    print(f"balancer: node3 (slow) events {node3_http()}; it served {served_slow} request(s) in "
          f"1.5 s while slow, {served_after} in 1 s after; all events {fleet.balancer.events()}",
          flush=True)
    check(drained, "the balancer drained the slow node3 on inferd_http within 5 s")
    check(served_slow < 30, f"node3 got few requests while slow ({served_slow})")
    check(returned, "node3 restored (probed at weight 1, then its weight and agent back) once fast")
    check(served_after > 0, f"node3 serves again ({served_after})")
    check(not load.errors, f"zero client-visible errors ({load.errors[:3]})")


def kill_test(fleet, proto_dir, work):
    pb, channel, unary = grpc_client(fleet.grpc_target, proto_dir, work)
    load = Load(fleet.http_url, unary, pb)
    try:
        time.sleep(2)
        before = load.ok
        victim = fleet.nodes[1]  # node2
        victim.proc.kill()
        killed = time.time()
        down = {}

        def marked_down():
            for backend in ("inferd_http", "inferd_grpc"):
                if backend not in down and fleet.server_stats(backend)["node2"]["status"] \
                        .startswith("DOWN"):
                    down[backend] = time.time() - killed
            return len(down) == 2
        wait_for(marked_down, 10, step=0.02)
        time.sleep(2)
    finally:
        load.stop()
        channel.close()
    limit = (CHECK_INTER_MS * FALL + CHECK_INTER_MS) / 1000
    print(f"load: {load.ok} requests ({before} before the kill), {len(load.errors)} errors; "
          f"node2 marked down after {', '.join(f'{k} {v:.2f} s' for k, v in down.items())} "
          f"(check interval x fall = {CHECK_INTER_MS * FALL / 1000:.1f} s)", flush=True)
    check(before > 20 and load.ok > before + 20, f"load made progress ({before}, {load.ok})")
    check(not load.errors, f"zero client-visible errors after SIGKILL (got {len(load.errors)}: "
                           f"{load.errors[:3]})")
    for backend in ("inferd_http", "inferd_grpc"):
        check(backend in down and down[backend] <= limit,
              f"{backend}: node2 marked down within {limit:.1f} s ({down.get(backend)})")
    stats = fleet.server_stats()
    check(int(stats["node1"]["stot"]) > 0 and int(stats["node3"]["stot"]) > 0,
          "the surviving nodes served requests")
    check(stats["backup1"]["stot"] == "0", "the standby took no traffic while nodes were up "
          f"(stot {stats['backup1']['stot']})")


def backup_test(fleet):
    for i in (0, 2):
        fleet.nodes[i].proc.kill()
    check(wait_for(lambda: all(fleet.server_stats()[n]["status"].startswith("DOWN")
                               for n in ("node1", "node3")), 10),
          "every active node marked down")
    codes = [requests.post(f"{fleet.http_url}/v2/models/identity/infer",
                           json=infer_body(range(16)), timeout=30).status_code for _ in range(5)]
    check(codes == [200] * 5, f"the standby serves when every active node is down ({codes})")
    check(int(fleet.server_stats()["backup1"]["stot"]) >= 5, "requests went to backup1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    t0 = time.time()
    bad_input_tests(args.inferd)
    repo = os.path.join(args.work_dir, "repo")
    write_repository(repo)
    common = ["--threads", "1", "--http-threads", "1"]
    # node3 reports half capacity; the standby (node4) is a backup server.
    node_args = [common + ["--agent-capacity", c] for c in ("1", "1", "0.5", "1")]
    config = ["--check-inter-ms", str(CHECK_INTER_MS), "--fall", str(FALL),
              "--agent-inter-ms", "500"]
    balancer = ["--hold-ms", "500", "--max-hold-ms", "1000", "--probation-ms", "1000"]
    with Fleet(args.inferd, repo, args.work_dir, n=3, backups=1, node_args=node_args,
               config_args=config, balancer_args=balancer) as fleet:
        for name, fn in (("weights", lambda: weights_tests(fleet)),
                         ("fallback", lambda: fallback_test(fleet)),
                         ("balancer", lambda: balancer_test(fleet)),
                         ("kill", lambda: kill_test(fleet, args.proto_dir, args.work_dir)),
                         ("backup", lambda: backup_test(fleet))):
            try:
                fn()
            except Exception as e:
                check(False, f"{name} test raised {type(e).__name__}: {e}")
        code = fleet.balancer.stop()
        check(code == 0, f"inferd fleet balance stopped cleanly on SIGTERM (exit {code})")
    print(f"fleet test took {time.time() - t0:.1f} s")
    if failures:
        print(f"\n{len(failures)} fleet check(s) failed (logs in {args.work_dir})")
        return 1
    print("all fleet checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
