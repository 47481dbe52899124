#!/usr/bin/env python3
"""Soak test of `inferd serve` (issue 15, docs/hardening.md): capacity first, then ~70% of it held
open-loop for 30 minutes while a new version of the model is hot-swapped in every 2 minutes.

    /usr/bin/python3 bench/soak/run_soak.py --inferd build/inferd            # 30 min (make soak)
    /usr/bin/python3 bench/soak/run_soak.py --minutes 3 --swap-every 30s --window 20s   # a check

1. Writes a poll-mode repository with an MLP (tests/lifecycle/lifecycle_test.py's model: version k
   adds k to every output, so a response names the version that computed it) and starts
   `inferd serve --model-control-mode poll --repository-poll-secs 1` on free loopback ports.
2. Capacity: `inferd bench --url` closed loop over --concurrency (default 1:16:... doubling); the
   best throughput of a stable level.
3. Soak: `inferd bench --url --request-rate-range R --duration M` open loop (Poisson arrivals,
   latency from intended send times) at --load x capacity, one window per --window (default 60 s:
   P99 and errors per minute); meanwhile this script writes version k+1 into the repository every
   --swap-every (atomically: a hidden folder renamed into place, the folder of version k-2
   removed), waits until it is the only ready version, and samples the server's RSS from /proc
   every second (the max per window).
4. Checks, written to soak.json and soak.md in --out-dir (and printed): zero failed requests, every
   swap done, the server exits 0 on SIGTERM, and the mean per-window P99 and the mean RSS of the
   last 10 minutes at most --tolerance (10%) above the first 10 (for runs under 30 minutes: the
   first and last third; lower is fine). Exit code 1 if a check fails.

Never part of `make test` (it takes --minutes plus ~1 minute); `make soak` runs the full 30 min.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lifecycle"))
from lifecycle_test import write_repo, write_version  # noqa: E402  (the lifecycle tests' MLP)

MODEL = "mlp"
WIDTH = 64


def seconds(text):
    """'90', '90s', '2m', '1h' -> seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration '{text}' (e.g. 30s, 2m)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


class Server:
    """`inferd serve` in poll mode on free ports; `http` and `metrics` are its URLs."""

    def __init__(self, inferd, repo, log_path, threads):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [inferd, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "-1",
             "--metrics-port", "0", "--model-control-mode", "poll", "--repository-poll-secs", "1",
             "--threads", str(threads)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.http = self.metrics = None
        deadline = time.time() + 120
        while time.time() < deadline and not (self.http and self.metrics):
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.write(line)
            if m := re.search(r"HTTP KServe v2 listening on (http://\S+)", line):
                self.http = m.group(1)
            if m := re.search(r"metrics listening on (http://\S+)", line):
                self.metrics = m.group(1)
        if not (self.http and self.metrics):
            self.proc.kill()
            raise RuntimeError(f"server did not start; see {log_path}")
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()

    def rss_mb(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None

    def ready_versions(self):
        try:
            with urllib.request.urlopen(f"{self.http}/v2/models/{MODEL}", timeout=5) as r:
                return json.load(r).get("versions", [])
        except Exception:  # not ready, mid-swap, ...: the caller polls again
            return []

    def stop(self, timeout=60):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "killed after %d s" % timeout


def wait_for(pred, timeout, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False


def bench(a, server, out_json, extra, log_path):
    cmd = [a.inferd, "bench", "--url", server.http, "--model", MODEL, "--quiet",
           "--json", out_json, "--timeout-ms", "10000"] + extra
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise RuntimeError(f"inferd bench failed ({rc}); see {log_path}")
    with open(out_json) as f:
        return json.load(f)


def measure_capacity(a, server):
    points = bench(a, server, os.path.join(a.work_dir, "capacity.json"),
                   ["--concurrency-range", a.concurrency, "--measurement-interval-ms", "2000",
                    "--max-trials", "6", "--warmup-ms", "1000"],
                   os.path.join(a.work_dir, "capacity.log"))
    best = max(points, key=lambda p: p["throughput"])
    return best["throughput"], points


class Swapper(threading.Thread):
    """Writes version k+1 every `every` seconds; records when each became the only ready one."""

    def __init__(self, server, repo, every, stop):
        super().__init__(daemon=True)
        self.server, self.repo, self.every, self.stop_event = server, repo, every, stop
        self.swaps = []  # {"version", "t_write", "ready_after_s" or None}
        self.version = 1

    def run(self):
        t0 = time.time()
        while not self.stop_event.wait(max(0, t0 + self.every * (len(self.swaps) + 1) -
                                           time.time())):
            k = self.version + 1
            t_write = time.time()
            write_version(self.repo, MODEL, k, width=WIDTH)
            ok = wait_for(lambda: self.server.ready_versions() == [str(k)], 60)
            self.swaps.append({"version": k, "t": round(t_write - t0, 1),
                               "ready_after_s": round(time.time() - t_write, 2) if ok else None})
            self.version = k
            old = os.path.join(self.repo, MODEL, str(k - 2))  # k-1 may still be retiring
            if ok and os.path.isdir(old):
                shutil.rmtree(old)


def sample_rss(server, stop, samples):
    t0 = time.time()
    while not stop.wait(1.0):
        rss = server.rss_mb()
        if rss is not None:
            samples.append((time.time() - t0, rss))


def compare(values, k, tolerance):
    """Mean of the first k against the last k values: (first, last, no more than `tolerance`
    above the first). One-sided: a P99 or RSS that falls during a soak is no failure."""
    first, last = statistics.mean(values[:k]), statistics.mean(values[-k:])
    return first, last, last <= first * (1 + tolerance)


def analyse(a, capacity, rate, points, rss_samples, swaps, exit_code):
    window = a.window
    rows = []
    for i, p in enumerate(points):
        lo, hi = i * window, (i + 1) * window
        rss = [r for t, r in rss_samples if lo <= t < hi]
        rows.append({"window": i + 1, "end_s": round(hi), "throughput": round(p["throughput"], 1),
                     "p50_ms": round(p["p50_ms"], 2), "p99_ms": round(p["p99_ms"], 2),
                     "errors": p["errors"], "errors_by_kind": p.get("errors_by_kind", {}),
                     "rss_mb": round(max(rss), 1) if rss else p.get("server_rss_mb"),
                     "server_cpu_pct": p.get("server_cpu_pct")})
    # The first and last 10 minutes (a third of the run each when it is shorter than 30 min).
    k = max(1, min(int(600 // window), len(rows) // 3))
    checks = []
    errors = sum(r["errors"] for r in rows)
    checks.append({"check": "zero failed requests", "value": errors, "pass": errors == 0})
    failed = [s["version"] for s in swaps if s["ready_after_s"] is None]
    checks.append({"check": "every swap became the only ready version within 60 s",
                   "value": f"{len(swaps) - len(failed)}/{len(swaps)}",
                   "pass": bool(swaps) and not failed})
    checks.append({"check": "server exits 0 on SIGTERM", "value": exit_code,
                   "pass": exit_code == 0})
    for key, what in (("p99_ms", "P99"), ("rss_mb", "RSS")):
        values = [r[key] for r in rows if r[key] is not None]
        if len(values) < 2:
            checks.append({"check": f"{what} drift", "value": "too few windows", "pass": False})
            continue
        first, last, ok = compare(values, min(k, len(values) // 2 or 1), a.tolerance)
        checks.append({"check": f"{what}: mean of the last {k} windows at most "
                                f"{a.tolerance:.0%} above the first {k}",
                       "value": f"{first:.2f} -> {last:.2f} ({(last / first - 1):+.1%})",
                       "pass": ok})
    return {"minutes": a.minutes, "window_s": window, "swap_every_s": a.swap_every,
            "load": a.load, "capacity_infer_per_s": round(capacity, 1),
            "rate_req_per_s": round(rate, 1), "compared_windows": k, "windows": rows,
            "swaps": swaps, "checks": checks, "pass": all(c["pass"] for c in checks),
            "uptime": open("/proc/loadavg").read().split()[:3],
            "cpus": os.cpu_count()}


def table(result):
    lines = [f"soak: {result['minutes']} min at {result['rate_req_per_s']} req/s "
             f"({result['load']:.0%} of {result['capacity_infer_per_s']} infer/s), "
             f"a swap every {result['swap_every_s']:.0f} s, {len(result['swaps'])} swaps", "",
             "| window | end (s) | infer/s | P50 (ms) | P99 (ms) | errors | RSS (MB) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["windows"]:
        lines.append(f"| {r['window']} | {r['end_s']} | {r['throughput']} | {r['p50_ms']} | "
                     f"{r['p99_ms']} | {r['errors']} | {r['rss_mb']} |")
    lines += ["", "| check | value | result |", "|---|---|---|"]
    for c in result["checks"]:
        lines.append(f"| {c['check']} | {c['value']} | {'pass' if c['pass'] else 'FAIL'} |")
    lines.append("")
    lines.append(f"load average at the end: {' '.join(result['uptime'])} ({result['cpus']} CPUs)")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build", "inferd"))
    ap.add_argument("--work-dir", default=os.path.join(ROOT, "build", "soak"))
    ap.add_argument("--out-dir", help="where soak.json and soak.md go (default: --work-dir)")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--swap-every", type=seconds, default=120, help="e.g. 2m, 30s")
    ap.add_argument("--window", type=seconds, default=60, help="report window, e.g. 60s")
    ap.add_argument("--load", type=float, default=0.7, help="fraction of the measured capacity")
    ap.add_argument("--concurrency", default="1:13:4", help="capacity sweep, A:B:STEP (closed loop)")
    ap.add_argument("--capacity", type=float, help="skip the sweep: capacity in infer/s")
    ap.add_argument("--threads", type=int, default=0, help="server --threads (0 = all cores)")
    ap.add_argument("--tolerance", type=float, default=0.10)
    a = ap.parse_args()
    a.out_dir = a.out_dir or a.work_dir
    os.makedirs(a.work_dir, exist_ok=True)
    os.makedirs(a.out_dir, exist_ok=True)
    repo = os.path.join(a.work_dir, "repo")
    write_repo(repo, MODEL, width=WIDTH)
    server = Server(a.inferd, repo, os.path.join(a.work_dir, "server.log"), a.threads)
    exit_code = None
    try:
        if not wait_for(lambda: server.ready_versions() == ["1"], 60):
            raise RuntimeError("version 1 never became ready")
        if a.capacity:
            capacity = a.capacity
        else:
            capacity, _ = measure_capacity(a, server)
        rate = capacity * a.load  # one row per request: infer/s = req/s
        print(f"soak: capacity {capacity:.1f} infer/s; holding {rate:.1f} req/s for "
              f"{a.minutes:g} min, a swap every {a.swap_every:.0f} s", flush=True)
        stop = threading.Event()
        rss_samples = []
        swapper = Swapper(server, repo, a.swap_every, stop)
        sampler = threading.Thread(target=sample_rss, args=(server, stop, rss_samples),
                                   daemon=True)
        sampler.start()
        swapper.start()
        try:
            points = bench(a, server, os.path.join(a.work_dir, "soak_points.json"),
                           ["--request-rate-range", f"{rate:.2f}", "--distribution", "poisson",
                            "--duration", f"{int(a.minutes * 60)}s", "--warmup-ms", "2000",
                            "--measurement-interval-ms", str(int(a.window * 1000)),
                            "--metrics-url", server.metrics + "/metrics"],
                           os.path.join(a.work_dir, "soak_bench.log"))
        finally:
            stop.set()
            swapper.join(90)
    finally:
        exit_code = server.stop()
    result = analyse(a, capacity, rate, points, rss_samples, swapper.swaps, exit_code)
    with open(os.path.join(a.out_dir, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    text = table(result)
    with open(os.path.join(a.out_dir, "soak.md"), "w") as f:
        f.write(text)
    print(text, end="")
    print("soak:", "PASS" if result["pass"] else "FAIL", flush=True)
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
