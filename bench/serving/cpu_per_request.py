#!/usr/bin/python3
"""Server CPU per request, by thread, for run_bench.py's DLRM and identity HTTP loads.

    /usr/bin/python3 bench/serving/cpu_per_request.py --inferd A [--inferd B ...]
        [--server-args "--threads 1"] [--rounds 3] [--seconds 5]
        [--variants dlrm_batching,dlrm_no_batching,identity]

Starts one `inferd serve` per --inferd (each on run_bench.py's repository; the binaries may be
the same with different --server-args, given as --server-args once per --inferd or once for all),
and per round drives every variant on every server in turn (the servers alternate, A B then B A,
so a change in the machine's load hits all of them) with `wrk -t1 -c64` and the JSON request
bodies of run_bench.py. Around each run it reads every server thread's CPU time from
/proc/PID/task/*/stat and reports, per server and variant, the median over rounds of req/s and
of CPU µs per request for each thread group (by thread name: the model worker, its OpenMP helpers,
the HTTP I/O threads, ...: inferd names its threads) and for the whole server. A thread group's
CPU per request is what that part of the server costs; on a saturated machine the whole server's
CPU per request, plus the client's, bounds the request rate.
"""
import argparse
import collections
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_bench  # noqa: E402

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """{tid: (name, utime + stime in µs)} of the process's threads."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) * TICK_US)
    return out


def measure(server, variant, body, seconds, connections):
    before = thread_cpu(server.proc.pid)
    r = run_bench.run_wrk(server.http, variant, body, seconds, connections)
    after = thread_cpu(server.proc.pid)
    used = collections.defaultdict(list)  # thread name -> CPU µs of each of its threads
    for tid, (name, cpu) in after.items():
        used[name].append(cpu - before.get(tid, (name, 0))[1])
    n = max(1, r["requests"])
    per_req = {}
    for name, cpus in used.items():
        if name == "batch-worker":
            # The OpenMP threads a worker's runs start inherit its name: the busiest thread of
            # the name is the worker of the model under load, the rest its OpenMP helpers.
            cpus.sort(reverse=True)
            per_req["batch-worker"] = cpus[0] / n
            per_req["OpenMP helpers"] = sum(cpus[1:]) / n
        else:
            per_req[name] = sum(cpus) / n
    per_req["whole server"] = sum(sum(c) for c in used.values()) / n
    return r, {k: v for k, v in per_req.items() if v > 0.05}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", action="append", required=True)
    ap.add_argument("--server-args", action="append", default=None)
    ap.add_argument("--models", default=os.path.join(run_bench.ROOT, "build", "models"))
    ap.add_argument("--work", default=os.path.join(run_bench.ROOT, "build", "bench_cpu"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--variants", default="dlrm_batching,dlrm_no_batching,identity")
    args = ap.parse_args()
    server_args = args.server_args or [""]
    if len(server_args) == 1:
        server_args = server_args * len(args.inferd)
    if len(server_args) != len(args.inferd):
        sys.exit("cpu_per_request: give --server-args once, or once per --inferd")
    os.makedirs(args.work, exist_ok=True)
    repo, bodies = run_bench.write_repository(args.work, args.models)
    body_of = {"dlrm_batching": bodies["json"], "dlrm_no_batching": bodies["json"],
               "identity": None}
    variants = args.variants.split(",")
    servers = []
    try:
        for i, (binary, extra) in enumerate(zip(args.inferd, server_args)):
            servers.append(run_bench.Server(binary, repo,
                                            os.path.join(args.work, f"server{i}.log"),
                                            extra.split(), "default"))
        labels = [f"{b} {a}".strip() for b, a in zip(args.inferd, server_args)]
        print(f"{os.cpu_count()} CPUs; load average {run_bench.loadavg()}")
        for s in servers:  # warm-up: arenas, plans, weights faulted in
            for v in variants:
                measure(s, v, body_of[v], 2, args.connections)
        results = collections.defaultdict(list)
        for rnd in range(args.rounds):
            order = list(range(len(servers)))
            if rnd % 2:
                order.reverse()
            print(f"round {rnd + 1} (load average {run_bench.loadavg()})", flush=True)
            for v in variants:
                for i in order:
                    r, per_req = measure(servers[i], v, body_of[v], args.seconds,
                                         args.connections)
                    results[(i, v)].append((r, per_req))
                    print(f"  {labels[i]:<40} {v:<18} {r['rps']:>9.1f} req/s  p99 "
                          f"{r['p99_us'] / 1000:6.2f} ms  server {per_req['whole server']:5.1f} "
                          f"µs/req  failed {r['failed']}", flush=True)
        print(f"\nload average at the end: {run_bench.loadavg()}\n")
        for v in variants:
            print(f"### {v}: medians over {args.rounds} rounds × {args.seconds} s\n")
            groups = sorted({g for i in range(len(servers)) for _, p in results[(i, v)]
                             for g in p})
            print("| server | req/s | p99 ms | " + " | ".join(groups) + " |")
            print("|---|---|---|" + "---|" * len(groups))
            for i in range(len(servers)):
                runs = results[(i, v)]
                med = lambda key: statistics.median(r[key] for r, _ in runs)  # noqa: E731
                cells = [f"{statistics.median(p.get(g, 0) for _, p in runs):.1f}"
                         for g in groups]
                print(f"| {labels[i]} | {med('rps'):.0f} | {med('p99_us') / 1000:.2f} | " +
                      " | ".join(cells) + " |")
            print()
        failed = sum(r["failed"] for runs in results.values() for r, _ in runs)
        if failed:
            sys.exit(f"cpu_per_request: {failed} requests failed")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
