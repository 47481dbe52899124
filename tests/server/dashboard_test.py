#!/usr/bin/env python3
"""The live dashboard (server/dashboard.h) in headless Chromium against a server under load.

Starts `inferd serve` on loopback with server_test's repository (identity, add with dynamic
batching) and, when --gen-models holds test-llama (or tiny-llama), a generative model; checks the
dashboard's routes (200, 404, 405, the CSP header); puts the models under closed-loop load (add
also gets malformed requests, so errors by reason are non-zero); opens /dashboard in Chromium
through puppeteer-core (tests/server/dashboard_browser.cjs) and checks what the page shows:

  under load   figures update and charts gain points; add's request rate matches the rate the
               load clients saw in the page's window (within 25%), its P50/P99 match
               histogram_quantile() over /metrics (within a bucket's factor of 2), the instance
               gauge matches /metrics (or shows "–" while no such family exists), the generative
               card's rates, TTFT/TPOT and KV usage are present;
  after load   the page's totals (requests, errors by reason, generation requests) equal /metrics
               exactly and the rates fall to 0;
  always       the page fetched nothing but its own origin, and logged no errors.

    dashboard_test.py --inferd build/inferd [--gen-models build/models/gen] [--screenshot PNG]

puppeteer-core is installed with npm into --npm-dir (under build/) on first use.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, failures, link_decoder_files, write_repository  # noqa: E402

PUPPETEER = "puppeteer-core@24.43.1"  # the last major that runs on Debian's Node.js 18/20
HERE = os.path.dirname(os.path.abspath(__file__))
INTERVAL_MS = 500
WINDOW_S = 4
GEN_CONFIG = ('backend: "inferd_generate"\n'
              'parameters { key: "kv_cache_bytes" value: { string_value: "4MiB" } }\n'
              'parameters { key: "max_num_seqs" value: { string_value: "4" } }\n')


def install_puppeteer(npm_dir):
    if os.path.isdir(os.path.join(npm_dir, "node_modules", "puppeteer-core")):
        return
    if not shutil.which("npm"):
        raise SystemExit("dashboard_test: npm is missing (scripts/install_deps.sh installs it)")
    os.makedirs(npm_dir, exist_ok=True)
    r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save", "-E", PUPPETEER],
                       cwd=npm_dir)
    if r.returncode != 0:
        raise SystemExit(f"dashboard_test: npm install {PUPPETEER} into {npm_dir} failed "
                         f"(exit {r.returncode}; it needs the npm registry once)")


def add_generative_model(repo, gen_models):
    """Links the smallest built decoder into the repository; returns its name or None."""
    for name in ("test-llama", "tiny-llama"):
        src = os.path.join(gen_models or "", name)
        if gen_models and os.path.exists(os.path.join(src, "model.onnx")):
            link_decoder_files(src, f"{repo}/{name}/1")
            with open(f"{repo}/{name}/config.pbtxt", "w") as out:
                out.write(GEN_CONFIG)
            return name
    return None


# ---- /metrics, read independently of the page's parser ----
def scrape(server):
    return requests.get(server.metrics + "/metrics", timeout=10).text


def samples(text, name, **labels):
    """[(labels dict, value)] of `name` whose labels include `labels`."""
    out = []
    for m in re.finditer(rf"^{name}(?:{{(.*)}})? (\S+)$", text, re.M):
        ls = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        if all(ls.get(k) == v for k, v in labels.items()):
            out.append((ls, float(m.group(2))))
    return out


def total(text, name, **labels):
    return sum(v for _, v in samples(text, name, **labels))


def window_quantile(q, before, after, name, **labels):
    """histogram_quantile(q) of the bucket increases from scrape `before` to `after`."""
    def cum(text):
        return {float(ls["le"]): v for ls, v in samples(text, name + "_bucket", **labels)}
    a, b = cum(after), cum(before)
    bounds = sorted(a)
    counts = [a[le] - b.get(le, 0) for le in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    prev_le, prev = 0.0, 0.0
    for le, c in zip(bounds, counts):
        if c >= rank:
            return prev_le if le == float("inf") else prev_le + (le - prev_le) * (rank - prev) / (c - prev)
        prev_le, prev = le, c
    return prev_le


# ---- load ----
class Load:
    """Closed-loop clients; `times` holds (completion time, ok) of every add request."""

    def __init__(self, server, gen_model):
        self.server, self.gen_model = server, gen_model
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.times = []
        self.bad_sent = 0
        self.gen_done = 0
        self.errors = []
        self.threads = [threading.Thread(target=self._add, daemon=True) for _ in range(3)]
        self.threads.append(threading.Thread(target=self._bad, daemon=True))
        if gen_model:
            self.threads += [threading.Thread(target=self._gen, daemon=True) for _ in range(2)]
        for t in self.threads:
            t.start()

    def _run(self, fn):
        s = requests.Session()
        while not self.stop_flag.is_set():
            try:
                fn(s)
            except requests.RequestException as e:
                with self.lock:
                    self.errors.append(str(e))
                time.sleep(0.1)

    def _add(self):
        body = {"inputs": [{"name": n, "shape": [1, 4], "datatype": "INT64", "data": [1, 2, 3, 4]}
                           for n in ("a", "b")]}

        def one(s):
            r = s.post(self.server.http + "/v2/models/add/infer", json=body, timeout=30)
            with self.lock:
                self.times.append((time.time(), r.status_code == 200))
            time.sleep(0.01)
        self._run(one)

    def _bad(self):
        # A shape the model does not take: 400, counted as invalid_argument.
        body = {"inputs": [{"name": n, "shape": [1, 3], "datatype": "INT64", "data": [1, 2, 3]}
                           for n in ("a", "b")]}

        def one(s):
            r = s.post(self.server.http + "/v2/models/add/infer", json=body, timeout=30)
            with self.lock:
                self.times.append((time.time(), False))
                self.bad_sent += 1
                if r.status_code != 400:
                    self.errors.append(f"bad request got {r.status_code}")
            time.sleep(0.25)
        self._run(one)

    def _gen(self):
        body = {"model": self.gen_model, "prompt": "It is a truth universally acknowledged",
                "max_tokens": 12, "temperature": 0}

        def one(s):
            r = s.post(self.server.http + "/v1/completions", json=body, timeout=60)
            with self.lock:
                self.gen_done += 1
                if r.status_code != 200:
                    self.errors.append(f"completion got {r.status_code}: {r.text[:200]}")
        self._run(one)

    def rate_between(self, t0, t1):
        with self.lock:
            n = sum(1 for t, _ in self.times if t0 < t <= t1)
        return n / (t1 - t0)

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=60)


# ---- the browser ----
class Browser:
    def __init__(self, url, chromium, npm_dir):
        env = dict(os.environ, NODE_PATH=os.path.join(npm_dir, "node_modules"))
        self.proc = subprocess.Popen(
            ["node", os.path.join(HERE, "dashboard_browser.cjs"), "--url", url,
             "--chromium", chromium],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline()
        if not out:
            raise RuntimeError(f"browser driver exited ({self.proc.wait()}) on '{line}'")
        reply = json.loads(out)
        if "driver_error" in reply:
            raise RuntimeError(f"browser driver: {reply['driver_error']}")
        return reply

    def close(self):
        try:
            return self.ask("quit")
        finally:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def fig(view, model, stat):
    return view["models"].get(model, {}).get("figures", {}).get(stat, {}).get("value")


def route_checks(server):
    base = server.metrics
    r = requests.get(base + "/dashboard", timeout=10)
    check(r.status_code == 200 and "text/html" in r.headers.get("Content-Type", ""),
          f"GET /dashboard: {r.status_code} {r.headers}")
    check("default-src 'self'" in r.headers.get("Content-Security-Policy", ""),
          f"CSP header: {r.headers}")
    js = requests.get(base + "/dashboard/chart.js", timeout=10)
    check(js.status_code == 200 and js.text.startswith("/*!\n * Chart.js v3."), "chart.js served")
    for method, path, code in [("POST", "/dashboard", 405), ("DELETE", "/dashboard/chart.js", 405),
                               ("GET", "/dashboard/nope", 404), ("GET", "/dashboard/" + "x" * 4000, 404),
                               ("GET", "/dashboard/%2e%2e/metrics", 404),
                               ("PUT", "/dashboard/nope", 404)]:
        r = requests.request(method, base + path, data=b"x" * 100, timeout=10)
        check(r.status_code == code and "error" in r.json(),
              f"{method} {path[:40]}: expected {code}, got {r.status_code} {r.text[:100]}")
    check(requests.get(base + "/metrics", timeout=10).status_code == 200, "/metrics still served")


def page_functions(browser):
    """The page's exposition parser and histogram_quantile() on hand-made input."""
    def ev(expr):
        return browser.ask("eval " + expr)["value"]
    # Exposition text; json.dumps makes it a JS string literal.
    text = ('# HELP m A metric.\n# TYPE m counter\n'
            'm{model="a\\\\b\\"}c",version="1"} 3\n'  # label value a\b"}c, escaped
            'm{model="c"} +Inf 1700000000\n'          # a timestamp after the value
            'n 4\nnot a sample line\n\n')
    parsed = ev(f"inferdDashboard.parseMetrics({json.dumps(text)})")
    check(parsed == {"m": [{"labels": {"model": 'a\\b"}c', "version": "1"}, "value": 3},
                           {"labels": {"model": "c"}, "value": "+Inf"}],
                     "n": [{"labels": {}, "value": 4}]}, f"parseMetrics: {parsed}")
    q = "inferdDashboard.quantile"
    b = "[{le: 1, count: 0}, {le: 2, count: 10}, {le: 4, count: 20}, {le: Infinity, count: 20}]"
    for expr, want in [(f"{q}(0.5, {b})", 2.0), (f"{q}(0.25, {b})", 1.5), (f"{q}(0.75, {b})", 3.0),
                       (f"{q}(0.5, [{{le: 0.1, count: 4}}, {{le: Infinity, count: 4}}])", 0.05),
                       (f"{q}(0.99, [{{le: 1, count: 0}}, {{le: Infinity, count: 5}}])", 1.0),
                       (f"{q}(0.5, [{{le: 1, count: 0}}, {{le: Infinity, count: 0}}])", None),
                       (f"{q}(0.5, [])", None)]:
        got = ev(expr)
        check(got == want, f"{expr} = {got}, expected {want}")


def under_load(server, browser, load, gen_model, screenshot):
    browser.ask(f"wait {WINDOW_S * 1000 // INTERVAL_MS + 2}")  # a full window of scrapes
    first = browser.ask("read")
    t_before, before = time.time(), scrape(server)
    browser.ask(f"wait {WINDOW_S * 1000 // INTERVAL_MS}")
    view = browser.ask("read")
    t_after, after = time.time(), scrape(server)
    if screenshot:
        browser.ask("screenshot " + screenshot)
    check(view["error"] is None, f"no error banner: {view['error']}")
    check(view["updates"] > first["updates"], f"page updates: {first['updates']} -> {view['updates']}")
    expect = {"add:2", "identity:1"} | ({gen_model} if gen_model else set())
    check(expect <= set(view["models"]), f"cards {sorted(view['models'])}, expected {sorted(expect)}")
    add = view["models"].get("add:2", {})
    thr = add.get("charts", {}).get("throughput", {"points": [0]})
    thr0 = first["models"].get("add:2", {}).get("charts", {}).get("throughput", {"points": [0]})
    check(thr["points"][0] > thr0["points"][0] >= 1, f"throughput chart gains points: {thr0} -> {thr}")
    for chart in ("latency", "queue"):
        pts = add.get("charts", {}).get(chart, {}).get("points", [0])
        check(pts[0] >= 3, f"add {chart} chart has points: {pts}")

    # Rate: what the clients completed in the page's window [updated - window, updated].
    t1, dt = view["server"]["updated"]["value"], view["server"]["window"]["value"]
    client = load.rate_between(t1 - dt, t1)
    shown = fig(view, "add:2", "rate")
    check(shown is not None and abs(shown - client) <= 0.25 * client + 2,
          f"add rate shown {shown} vs clients' {client:.1f} req/s over {dt:.1f} s")
    text = add.get("figures", {}).get("rate", {}).get("text", "")
    check(shown is not None and abs(float(text.replace(",", "")) - shown) < 0.051,
          f"rate text '{text}' shows the value {shown}")
    p50, p99 = fig(view, "add:2", "p50"), fig(view, "add:2", "p99")
    # Percentiles: recomputed here, with this file's own parser and histogram_quantile(), from the
    # two /metrics texts the page's window spans (its own scrapes: a window of our scrapes would
    # differ by a poll or more, and a tail percentile moves with it on a loaded machine).
    page_from, page_to = view["scrapes"]["from"], view["scrapes"]["to"]
    ref50 = window_quantile(0.5, page_from, page_to, "inferd_request_duration_seconds", model="add")
    ref99 = window_quantile(0.99, page_from, page_to, "inferd_request_duration_seconds", model="add")
    check(p50 is not None and ref50 and abs(p50 - ref50 * 1000) <= 1e-6 * ref50 * 1000 + 0.001,
          f"add P50 {p50} ms vs histogram_quantile {ref50 and ref50 * 1000} ms")
    check(p99 is not None and p50 is not None and p99 >= p50 and ref99 and
          abs(p99 - ref99 * 1000) <= 1e-6 * ref99 * 1000 + 0.001,
          f"add P99 {p99} ms vs histogram_quantile {ref99 and ref99 * 1000} ms")
    util = fig(view, "add:2", "utilization")
    if samples(after, "inferd_model_busy_seconds_total", model="add"):
        busy = [total(t, "inferd_model_busy_seconds_total", model="add") for t in (before, after)]
        n = total(after, "inferd_model_instances", model="add")
        ref = 100 * (busy[1] - busy[0]) / n / (t_after - t_before) if n else None
        check(util is not None and 0 <= util <= 100 and ref is not None and
              abs(util - ref) <= max(0.5 * ref, 5), f"add utilization {util}% vs /metrics ~{ref}%")
    else:
        check(util is None, f"utilization without inferd_model_busy_seconds_total: {util}")
    batch = add.get("charts", {}).get("batch", {})
    check(batch.get("labels", [""])[0] == "≤1" and sum(batch.get("values", [[0]])[0]) > 0,
          f"batch-size bars: {batch}")
    check((fig(view, "add:2", "mean_batch") or 0) >= 1, "mean batch size >= 1")
    queue = fig(view, "add:2", "queue")
    check(queue is not None and queue >= 0 and queue == int(queue), f"queue depth {queue}")
    check((fig(view, "add:2", "error_rate") or 0) > 0, "add errors/s > 0 under malformed load")
    check((view["server"]["cpu"]["value"] or 0) > 0 and (view["server"]["rss"]["value"] or 0) > 0,
          f"server CPU and RSS: {view['server']}")
    if gen_model:
        g = view["models"].get(gen_model, {})
        for stat in ("rate", "tokens_rate", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
            check((fig(view, gen_model, stat) or 0) > 0, f"{gen_model} {stat} > 0: "
                  f"{g.get('figures', {}).get(stat)}")
        kv = fig(view, gen_model, "kv_pct")
        check(kv is not None and 0 <= kv <= 100, f"{gen_model} KV cache % {kv}")
        for chart in ("ttft", "tpot", "kv", "queue"):
            pts = g.get("charts", {}).get(chart, {}).get("points", [0])
            check(pts[0] >= 2, f"{gen_model} {chart} chart has points: {pts}")
    return view


def after_load(server, browser, gen_model):
    """With the load stopped, the page's totals must equal /metrics exactly."""
    browser.ask(f"wait {WINDOW_S * 1000 // INTERVAL_MS + 3}")  # past a whole window
    text = scrape(server)
    view = browser.ask("read")
    failures_by_reason = {ls["reason"]: v for ls, v in
                          samples(text, "inferd_request_failure_total", model="add")}
    want = total(text, "inferd_request_success_total", model="add") + sum(failures_by_reason.values())
    check(fig(view, "add:2", "requests") == want,
          f"add requests shown {fig(view, 'add:2', 'requests')} == /metrics {want}")
    shown_errors = view["models"].get("add:2", {}).get("errors")
    check(shown_errors == failures_by_reason and failures_by_reason.get("invalid_argument", 0) > 0,
          f"errors by reason shown {shown_errors} == /metrics {failures_by_reason}")
    bars = view["models"].get("add:2", {}).get("charts", {}).get("errors", {})
    check(dict(zip(bars.get("labels", []), bars.get("values", [[]])[0])) == failures_by_reason,
          f"error bars {bars} == /metrics {failures_by_reason}")
    check(fig(view, "add:2", "rate") == 0, f"add rate after the load: {fig(view, 'add:2', 'rate')}")
    inst = samples(text, "inferd_model_instances", model="add")
    shown = fig(view, "add:2", "instances")
    if inst:
        check(shown == inst[0][1], f"instances shown {shown} == /metrics {inst[0][1]}")
    else:
        check(shown is None and view["models"]["add:2"]["figures"]["instances"]["text"] == "–",
              f"no inferd_model_instances in /metrics: instances shows '–', got {shown}")
    events = samples(text, "inferd_model_scale_events_total", model="add")
    shown = fig(view, "add:2", "scale_events")
    check(shown == (sum(v for _, v in events) if events else None),
          f"scale events shown {shown} vs /metrics {events}")
    if gen_model:
        want = total(text, "inferd_generation_requests_total", model=gen_model)
        check(fig(view, gen_model, "requests") == want and want > 0,
              f"{gen_model} requests shown {fig(view, gen_model, 'requests')} == /metrics {want}")
        check(fig(view, gen_model, "running") == 0, f"{gen_model} running after the load")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--gen-models", default="")
    ap.add_argument("--work-dir", default="/tmp/inferd_dashboard_test")
    ap.add_argument("--npm-dir", default="", help="where puppeteer-core is installed "
                    "(default: WORK_DIR/npm)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshot", default="", help="write a PNG of the page under load here")
    args = ap.parse_args()
    if not os.access(args.chromium, os.X_OK):
        raise SystemExit(f"dashboard_test: no Chromium at {args.chromium} "
                         "(scripts/install_deps.sh installs Debian's chromium)")
    os.makedirs(args.work_dir, exist_ok=True)
    npm_dir = args.npm_dir or os.path.join(args.work_dir, "npm")
    install_puppeteer(npm_dir)
    repo = os.path.join(args.work_dir, "repository")
    write_repository(repo)
    gen_model = add_generative_model(repo, args.gen_models)
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"),
                    args=["--threads", "2"], grpc=False, start_timeout=300, stop_timeout=30)
    load = browser = None
    t0 = time.time()
    try:
        route_checks(server)
        load = Load(server, gen_model)
        url = f"{server.metrics}/dashboard?interval={INTERVAL_MS}&window={WINDOW_S}"
        browser = Browser(url, args.chromium, npm_dir)
        page_functions(browser)
        under_load(server, browser, load, gen_model, args.screenshot)
        load.stop()
        check(not load.errors, f"load clients saw errors: {load.errors[:5]}")
        after_load(server, browser, gen_model)
        report = browser.close()
        browser = None
        origin = server.metrics + "/"
        foreign = [u for u in report["requests"] if not u.startswith(origin)]
        check(not foreign, f"the page fetched only its own origin: {foreign[:5]}")
        check(not report["problems"], f"page problems: {report['problems'][:5]}")
    except Exception as e:  # a crash in a step is a failure, the server still gets stopped
        check(False, f"dashboard test raised {type(e).__name__}: {e}")
    finally:
        if load:
            load.stop()
        if browser:
            browser.proc.kill()
        check(server.proc.poll() is None, "server still running after the test")
        rc = server.stop()
        check(rc == 0, f"server exit code {rc}")
    print(f"dashboard_test: {gen_model or 'no generative model'}; {time.time() - t0:.1f} s; "
          f"{len(failures)} failure(s)" + (f"; screenshot {args.screenshot}" if args.screenshot else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
