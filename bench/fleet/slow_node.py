#!/usr/bin/env python3
"""Slow-node benchmark for routing on HAProxy (docs/fleet.md, "Routing on HAProxy").

Three `inferd serve` nodes (1 inference thread each) serve a compute-bound model (mlp_model.py)
on 127.0.0.1. Three HAProxies front the same nodes: least connections with agent weights (the
configuration `inferd fleet haproxy-config` writes by default), least connections without agent
checks, and round-robin without agent checks; `inferd fleet balance` (the fleet balancer,
drains a node slower than its peers) runs on the first proxy's stats socket, which is then
"leastconn+agent+balance", and a fourth proxy is least connections with agent weights alone
("leastconn+agent"). One node is made slower by a CPU quota: it is
stopped (SIGSTOP) for (1 - share) of every period and continued (SIGCONT) for the rest, which is
what a cgroup CPU quota (cpu.cfs_quota_us / cpu.cfs_period_us) does to a busy process; this
needs no cgroup rights. `inferd bench` drives closed-loop load through one HAProxy at a time,
phases alternating in the same run:

    healthy / leastconn+agent+balance, slow / leastconn+agent+balance, slow / leastconn+agent,
    slow / leastconn, slow / roundrobin

repeated --rounds times. Reported: P50/P99 per phase (median over rounds), the share of requests
each node served, the agent weights HAProxy held, the balancer's drains, the load average before
and after. Done when (issue 18): slow P99 with agent weights and least connections (here with
the balancer) <= 1.3x the healthy P99 and >= 2x better than round-robin.

    bench/fleet/slow_node.py --inferd build/inferd --work-dir build/bench_fleet
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "deploy", "fleet"))
from mlp_model import write_mlp_repository  # noqa: E402
from run_fleet import Balancer, Haproxy, Node  # noqa: E402


class CpuQuota:
    """Emulates a CPU quota on process `pid`: stopped for (1 - share) * period of every period
    while enabled. Always leaves the process continued."""

    def __init__(self, pid, share, period_s):
        self.pid, self.run_s, self.stop_s = pid, share * period_s, (1 - share) * period_s
        self.enabled = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.done.is_set():
            if not self.enabled.wait(0.05):
                continue
            os.kill(self.pid, signal.SIGSTOP)
            time.sleep(self.stop_s)
            os.kill(self.pid, signal.SIGCONT)
            time.sleep(self.run_s)

    def set(self, on):
        (self.enabled.set if on else self.enabled.clear)()

    def close(self):
        self.enabled.clear()
        self.done.set()
        self.thread.join()
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def run_phase(args, proxy, out_json):
    subprocess.run([args.inferd, "bench", "--url", proxy.http_url, "--model", "mlp",
                    "--concurrency-range", str(args.concurrency), "--warmup-ms", "500",
                    "--measurement-interval-ms", str(int(args.phase_secs * 1000 / 3)),
                    "--max-trials", "3", "--json", out_json, "-q"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out_json) as f:
        return json.load(f)[0]


def served(proxy):
    """Requests each node served through `proxy`: its HTTP backend and, with agent checks, the
    fallback backend HAProxy uses while every agent says drain."""
    out = {}
    for backend in ("inferd_http", "inferd_http_fallback"):
        for name, r in proxy.server_stats(backend).items():
            out[name] = out.get(name, 0) + int(r["stot"])
    return out


def fallback_served(proxy):
    return sum(int(r["stot"]) for r in proxy.server_stats("inferd_http_fallback").values())


def weights(proxy):
    return [r["weight"] for _, r in sorted(proxy.server_stats().items())]


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lscpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next((l.split(":", 1)[1].strip() for l in out.splitlines()
                     if l.startswith("Model name")), "?")
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inferd", default="build/inferd")
    ap.add_argument("--work-dir", default="build/bench_fleet")
    ap.add_argument("--layers", type=int, default=16, help="model size (~2.2 ms CPU per 8)")
    ap.add_argument("--concurrency", type=int, default=6, help="closed-loop requests in flight")
    ap.add_argument("--phase-secs", type=float, default=4.0, help="measured seconds per phase")
    ap.add_argument("--settle-secs", type=float, default=1.5,
                    help="load before each phase's measurement, for the weights to adapt")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--share", type=float, default=0.5, help="the slow node's CPU quota")
    ap.add_argument("--period-ms", type=float, default=100, help="the quota's period")
    ap.add_argument("--slow-capacity", default="1",
                    help="--agent-capacity of the slow node (1: it reports what it measures, "
                         "like the others; 0.5: the operator declares its quota)")
    ap.add_argument("--slow-speed", default=None,
                    help="every node's --agent-slow-speed (default: inferd serve's)")
    ap.add_argument("--node-log-level", default=None,
                    help="the nodes' --log-level (debug: every agent reply with its speed)")
    ap.add_argument("--balancer-arg", action="append", default=[],
                    help="extra `inferd fleet balance` flag (repeatable)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repo")
    write_mlp_repository(repo, args.layers)
    load_before = os.getloadavg()
    nodes, proxies, quota, balancer = [], {}, None, None
    results = {}
    try:
        for i in range(3):
            capacity = args.slow_capacity if i == 2 else "1"
            node_args = ["--threads", "1", "--agent-capacity", capacity]
            if args.slow_speed is not None:
                node_args += ["--agent-slow-speed", args.slow_speed]
            if args.node_log_level:
                node_args += ["--log-level", args.node_log_level]
            nodes.append(Node(args.inferd, repo, os.path.join(args.work_dir, f"node{i + 1}.log"),
                              node_args))
        for node in nodes:
            node.wait_started()
        proxies = {
            "leastconn+agent+balance": Haproxy(args.inferd, args.work_dir, nodes, "balance",
                                               config_args=["--agent-inter-ms", "250"]),
            "leastconn+agent": Haproxy(args.inferd, args.work_dir, nodes, "leastconn_agent",
                                       config_args=["--agent-inter-ms", "250"]),
            "leastconn": Haproxy(args.inferd, args.work_dir, nodes, "leastconn", agent=False),
            "roundrobin": Haproxy(args.inferd, args.work_dir, nodes, "roundrobin", agent=False,
                                  config_args=["--balance", "roundrobin"]),
        }
        for p in proxies.values():
            p.start()
        balancer = Balancer(args.inferd, proxies["leastconn+agent+balance"],
                            os.path.join(args.work_dir, "balancer.log"),
                            ["--backend", "inferd_http"] + args.balancer_arg)
        balancer.start()
        balancer_started = time.time()
        quota = CpuQuota(nodes[2].proc.pid, args.share, args.period_ms / 1000)
        phases = [("healthy", "leastconn+agent+balance"), ("slow", "leastconn+agent+balance"),
                  ("slow", "leastconn+agent"), ("slow", "leastconn"), ("slow", "roundrobin")]
        for r in range(args.rounds):
            for state, name in phases:
                proxy = proxies[name]
                quota.set(state == "slow")
                time.sleep(args.settle_secs if r == 0 else args.settle_secs / 2)
                before, fb_before = served(proxy), fallback_served(proxy)
                point = run_phase(args, proxy, os.path.join(args.work_dir, "point.json"))
                after, fb_after = served(proxy), fallback_served(proxy)
                total = sum(after[k] - before[k] for k in after) or 1
                share = [round((after[k] - before[k]) / total, 3) for k in sorted(after)]
                key = f"{state} / {name}"
                drains = sum(1 for _, e in balancer.events() if e == "drain")
                results.setdefault(key, []).append(
                    {"p50_ms": point["p50_ms"], "p99_ms": point["p99_ms"],
                     "throughput": point["throughput"], "errors": point["errors"],
                     "node_share": share, "weights": weights(proxy),
                     "fallback_share": round((fb_after - fb_before) / total, 3),
                     "balancer_drains_so_far": drains})
                print(f"round {r + 1} {key:36s} p50 {point['p50_ms']:7.2f} ms  p99 "
                      f"{point['p99_ms']:7.2f} ms  {point['throughput']:6.1f} infer/s  errors "
                      f"{point['errors']}  node share {share}  weights {weights(proxy)}  "
                      f"fallback {(fb_after - fb_before) / total:.1%}  balancer drains so far "
                      f"{drains}", flush=True)
        balancer_cpu_s = cpu_seconds(balancer.proc.pid)
        balancer_wall_s = time.time() - balancer_started
    finally:
        if balancer:
            balancer.stop()
        if quota:
            quota.close()
        for p in proxies.values():
            p.stop()
        for node in nodes:
            node.stop()
    load_after = os.getloadavg()
    p99 = {k: statistics.median(x["p99_ms"] for x in v) for k, v in results.items()}
    healthy = p99["healthy / leastconn+agent+balance"]
    agent = p99["slow / leastconn+agent+balance"]
    rr = p99["slow / roundrobin"]
    drains = {}
    for server, e in (balancer.events() if balancer else []):
        drains[server] = drains.get(server, 0) + (e == "drain")
    summary = {"cpu": lscpu_model(), "cores": os.cpu_count(), "load_before": load_before,
               "load_after": load_after, "args": vars(args), "median_p99_ms": p99,
               "slow_vs_healthy": agent / healthy, "roundrobin_vs_agent": rr / agent,
               "balancer_drains": drains, "balancer_cpu_share": balancer_cpu_s / balancer_wall_s,
               "phases": results}
    print(f"\nCPU {summary['cpu']} ({summary['cores']} cores); load average before "
          f"{load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}, after "
          f"{load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f}")
    for k, v in p99.items():
        print(f"  median P99 {k:36s} {v:7.2f} ms")
    print(f"  balancer drains per server: {drains}; its CPU: {balancer_cpu_s:.2f} s in "
          f"{balancer_wall_s:.0f} s ({balancer_cpu_s / balancer_wall_s:.2%} of a core)")
    for i in range(3):
        try:
            with open(os.path.join(args.work_dir, f"node{i + 1}.log")) as f:
                sheds = sum("of its unloaded speed: answering 'drain'" in line for line in f)
        except OSError:
            sheds = "?"
        summary[f"node{i + 1}_sheds"] = sheds
        print(f"  node{i + 1}: shed for being slow {sheds} time(s)")
    print(f"  slow, agent weights + balancer / healthy: {agent / healthy:.2f}x (target <= 1.3x)")
    print(f"  round-robin / agent weights + balancer:   {rr / agent:.2f}x (target >= 2x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
