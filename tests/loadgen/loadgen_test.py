"""End-to-end tests of `inferd bench --url` (the server load generator).

1. Open loop above capacity: a stub server with a fixed 20 ms service time, one request at a time
   (capacity 50/s), driven at 100 requests/s. The reported P99 must grow with the queue (seconds)
   instead of staying at the service time; driven at 20/s it must stay near the service time.
2. Concurrency sweeps over HTTP and gRPC against `inferd serve` with an identity model, writing
   JSON, CSV and the SVG chart; the documented fields are checked.
   gRPC also with --streaming (ModelStreamInfer) and with --grpc-channels 4.
3. Bad command lines: one error line, exit code 1 or 2 (2 for mixing engine and server mode).
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inferd_server import InferdServer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def bench(inferd, args, timeout=240):
    r = subprocess.run([inferd, "bench", *args], capture_output=True, text=True, timeout=timeout)
    return r


def run_json(inferd, args, path):
    r = bench(inferd, args + ["--json", path])
    if r.returncode != 0:
        check(False, f"inferd bench {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}")
        return None
    with open(path) as f:
        return json.load(f)


def open_loop_tests(inferd, work):
    service_ms = 20
    stub = subprocess.Popen([sys.executable, os.path.join(HERE, "stub_server.py"),
                             "--service-ms", str(service_ms)],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(stub.stdout.readline().split()[-1])
        url = f"http://127.0.0.1:{port}"
        common = ["--url", url, "--model", "stub", "--measurement-interval-ms", "1000",
                  "--max-trials", "3", "--distribution", "constant", "-q"]
        over = run_json(inferd, common + ["--request-rate-range", "100"], f"{work}/over.json")
        under = run_json(inferd, common + ["--request-rate-range", "20"], f"{work}/under.json")
        closed = run_json(inferd, ["--url", url, "--model", "stub", "--concurrency-range", "1",
                                   "--measurement-interval-ms", "1000", "--max-trials", "3", "-q"],
                          f"{work}/closed.json")
        if not (over and under and closed):
            return
        o, u, c = over[0], under[0], closed[0]
        print(f"      over capacity (100/s): {o['throughput']:.1f}/s p50 {o['p50_ms']:.0f} ms "
              f"p99 {o['p99_ms']:.0f} ms; under (20/s): p99 {u['p99_ms']:.1f} ms; "
              f"closed c=1: {c['throughput']:.1f}/s p99 {c['p99_ms']:.1f} ms")
        check(o["request_rate"] == 100 and "concurrency" not in o, "open-loop point has request_rate")
        check(o["throughput"] < 60, f"throughput capped near capacity 50/s ({o['throughput']:.1f})")
        # 50 excess requests/s queue up; after 1-3 s of overload the waiting is 1-3 s.
        check(o["p99_ms"] > 10 * service_ms,
              f"P99 above capacity grows with the queue ({o['p99_ms']:.0f} ms > {10 * service_ms})")
        check(o["p99_ms"] > 4 * u["p99_ms"],
              f"P99 above capacity ({o['p99_ms']:.0f} ms) >> below it ({u['p99_ms']:.1f} ms)")
        check(u["p50_ms"] < 5 * service_ms, f"below capacity P50 near the service time "
              f"({u['p50_ms']:.1f} ms)")
        check(not o["stable"], "overloaded open loop is reported unstable")
        check(o["server_queue_us"] is not None and o["server_queue_us"] > 10 * service_ms * 1000,
              f"server queue time from the statistics endpoint grows ({o['server_queue_us']})")
        check(o["server_compute_us"] is not None and
              abs(o["server_compute_us"] - service_ms * 1000) < service_ms * 1000,
              f"server compute time near the service time ({o['server_compute_us']})")
        # Closed loop hides the queue (the coordinated-omission contrast): P99 near service time.
        check(c["p99_ms"] < o["p99_ms"] / 4, "closed loop at c=1 does not see the queue")
    finally:
        stub.kill()
        stub.wait()


def write_identity_repo(root):
    import onnx
    from onnx import TensorProto, helper
    os.makedirs(f"{root}/identity/1", exist_ok=True)
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              f"{root}/identity/1/model.onnx")


FIELDS = ["concurrency", "throughput", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms",
          "errors", "server_queue_us", "server_compute_us"]


def sweep_tests(inferd, work):
    repo = f"{work}/repo"
    write_identity_repo(repo)
    server = InferdServer(inferd, repo, f"{work}/server.log", ["--threads", "1"], timeout_s=60)
    try:
        for proto, url in (("http", server.http), ("grpc", server.grpc)):
            base = f"{work}/{proto}"
            args = ["--url", url, "--model", "identity", "--concurrency-range", "1:4:3",
                    "--measurement-interval-ms", "400", "--max-trials", "4",
                    "--metrics-url", server.metrics, "--csv", base + ".csv",
                    "--plot", base + ".svg", "-q"]
            pts = run_json(inferd, args, base + ".json")
            if pts is None:
                continue
            check(isinstance(pts, list) and len(pts) == 2, f"{proto}: two points (c=1, c=4)")
            for p in pts:
                missing = [k for k in FIELDS if k not in p]
                check(not missing, f"{proto}: c={p.get('concurrency')} has every field "
                      f"(missing {missing})")
                check(p["throughput"] > 0 and p["errors"] == 0,
                      f"{proto}: c={p['concurrency']} {p['throughput']:.0f} infer/s, no errors")
                check(0 < p["p50_ms"] <= p["p90_ms"] <= p["p95_ms"] <= p["p99_ms"] <= p["max_ms"],
                      f"{proto}: percentiles ordered")
                check(p["server_compute_us"] is not None and p["server_queue_us"] is not None,
                      f"{proto}: server queue/compute split present")
                check(p["server_cpu_pct"] is not None, f"{proto}: server CPU from the metrics page")
            check([p["concurrency"] for p in pts] == [1, 4], f"{proto}: levels 1 and 4")
            with open(base + ".csv") as f:
                rows = f.read().strip().split("\n")
            check(len(rows) == 3 and rows[0].startswith("mode,level,throughput"), f"{proto}: CSV")
            with open(base + ".svg") as f:
                svg = f.read()
            check(svg.startswith("<svg") and svg.count("<polyline") == 2, f"{proto}: SVG chart")
        streaming_tests(inferd, work, server)
        # A model that does not exist: one error line, exit 1.
        r = bench(inferd, ["--url", server.http, "--model", "nope", "-q"])
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "nope" in r.stderr,
              f"unknown model: exit 1 with one line ({r.returncode}: {r.stderr.strip()})")
    finally:
        rc = server.stop()
    check(rc == 0, f"server shut down cleanly ({rc})")


def streaming_tests(inferd, work, server):
    """gRPC ModelStreamInfer (--streaming, one stream per --grpc-channels connection) and unary
    calls over a chosen number of channels, as bench/serving/run_bench.py drives them."""
    common = ["--url", server.grpc, "--model", "identity", "--concurrency-range", "8",
              "--warmup-ms", "200", "--measurement-interval-ms", "400", "--max-trials", "3", "-q"]
    for name, extra in (("stream", ["--grpc-channels", "2", "--streaming"]),
                        ("unary 4 channels", ["--grpc-channels", "4"])):
        before = server_success(server)
        pts = run_json(inferd, common + extra, f"{work}/grpc_{extra[-1].strip('-')}.json")
        if pts is None:
            continue
        p = pts[0]
        check(p["concurrency"] == 8 and p["throughput"] > 0 and p["errors"] == 0,
              f"gRPC {name}: {p['throughput']:.0f} infer/s, no errors")
        check(0 < p["p50_ms"] <= p["p90_ms"] <= p["p99_ms"] <= p["max_ms"],
              f"gRPC {name}: percentiles ordered")
        check(p["windows"] == 3 and p["requests"] > 0, f"gRPC {name}: three windows merged")
        served = server_success(server) - before
        check(served >= p["requests"], f"gRPC {name}: the server answered every counted request "
              f"({served} >= {p['requests']})")
    r = bench(inferd, ["--url", server.http, "--model", "identity", "--streaming", "-q"])
    check(r.returncode == 1 and "grpc://" in r.stderr, "--streaming over HTTP: exit 1")


def server_success(server):
    import urllib.request
    with urllib.request.urlopen(f"{server.http}/v2/models/identity/stats") as f:
        stats = json.load(f)["model_stats"][0]
    return stats["inference_stats"]["success"]["count"]


def cli_tests(inferd):
    r = bench(inferd, ["--url", "http://127.0.0.1:1"])
    check(r.returncode == 2 and "model" in r.stderr, "missing --model: exit 2")
    r = bench(inferd, ["--url", "http://127.0.0.1:1", "--model", "m", "--timeout-ms", "2000", "-q"])
    check(r.returncode == 1 and r.stderr.count("\n") == 1, f"unreachable server: exit 1, one line "
          f"({r.stderr.strip()})")
    r = bench(inferd, ["--url", "http://127.0.0.1:1", "--model", "m", "--concurrency-range", "4:1"])
    check(r.returncode == 1 and "range" in r.stderr, "bad range: exit 1")
    r = bench(inferd, ["--url", "http://127.0.0.1:1", "--help"])
    check(r.returncode == 0 and "--request-rate-range" in r.stdout, "--help lists the flags")
    check("Engine mode" in r.stdout and "Server mode" in r.stdout and "--iterations" in r.stdout
          and "--streaming" in r.stdout, "--help describes both modes")
    # One command line, two modes: mixing or omitting them is a usage error (one line, exit 2).
    for args, what in (([], "neither --url nor --model"),
                       (["--url", "http://127.0.0.1:1", "--model", "m.onnx"], "--url with a file"),
                       (["--url", "http://127.0.0.1:1", "--model", "m", "--threads", "2"],
                        "--url with an engine-mode flag"),
                       (["--model", "m.onnx", "--concurrency-range", "2"],
                        "a server-mode flag without --url"),
                       (["--url", "http://127.0.0.1:1", "--model", "m", "--json"],
                        "--json without FILE in server mode")):
        r = bench(inferd, args)
        check(r.returncode == 2 and r.stderr.count("\n") == 1,
              f"{what}: exit 2, one line ({r.returncode}: {r.stderr.strip()})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--only", choices=["open", "sweep", "cli"])
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    groups = {"cli": lambda: cli_tests(args.inferd),
              "open": lambda: open_loop_tests(args.inferd, args.work_dir),
              "sweep": lambda: sweep_tests(args.inferd, args.work_dir)}
    for name, fn in groups.items():
        if args.only and name != args.only:
            continue
        try:
            fn()
        except Exception as e:  # one crashing group must not hide the others
            check(False, f"{name} tests raised {type(e).__name__}: {e}")
    if failures:
        print(f"\n{len(failures)} loadgen check(s) failed")
        return 1
    print("all loadgen checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
