#!/usr/bin/python3
"""End-to-end tests of the work queue on Redis Streams: `inferd worker` and `inferd batch --redis`
against a real redis-server started on a free loopback port (no persistence) and stopped at the
end.

    /usr/bin/python3 tests/workqueue/queue_test.py --inferd build/inferd --work-dir /tmp/wq \
        [--only kill,invalid,unreachable] [--items 3000]

Cases:
  kill         a JSONL job of --items requests plus two poison requests (an unknown input, a wrong
               shape) through `inferd batch --redis` on 3 workers; one worker is SIGKILLed while it
               has a batch pending, another gets SIGTERM mid-run. Checks: one record per input
               (zero lost, zero duplicated), outputs equal a local `inferd batch` run's, the
               killed worker's entries reclaimed within --claim-idle-ms + one claim period (plus
               a batch's time), the SIGTERMed worker exits 0 with nothing pending, the poison
               requests are error records and in the dead-letter stream, nothing left pending.
  invalid      stream entries that are not valid requests (no model, malformed JSON, unknown
               model, a file for a numeric input) and one delivered 3 times to a consumer that
               never acks: each dead-lettered with its reason and answered with an error record;
               the worker keeps running.
  unreachable  worker and batch against a port with no Redis, and a bad URL: exit 1 with a clear
               one-line error, no records written.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_util import RedisServer, free_port, write_mlp, write_requests  # noqa: E402

CLAIM_IDLE_MS = 2000
CLAIM_INTERVAL_MS = 1000
SLACK_S = 2.0  # a claiming worker may be mid-batch when its claim pass is due (loaded machine)
TIMEOUT_S = 150


def log_path(args, name):
    return os.path.join(args.work_dir, f"{name}.log")


def start_worker(args, redis, name, stream, group, *extra):
    cmd = [args.inferd, "worker", "--redis", redis.url, "--stream", stream, "--group", group,
           "--model-repository", args.repo, "--consumer", name, "--threads", "1", "--batch", "16",
           "--claim-idle-ms", str(CLAIM_IDLE_MS), "--claim-interval-ms", str(CLAIM_INTERVAL_MS),
           "--model", "mlp"] + list(extra)
    return subprocess.Popen(cmd, stdout=open(log_path(args, name), "w"), stderr=subprocess.STDOUT)


def wait_ready(args, name, proc, timeout=60):
    deadline = time.time() + timeout
    while "consuming" not in open(log_path(args, name)).read():
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"worker {name} did not start:\n{open(log_path(args, name)).read()}")
        time.sleep(0.05)


def pending_by_consumer(r, stream, group):
    reply = r.command("XPENDING", stream, group)
    return {c.decode(): int(n) for c, n in (reply[3] or [])}


def read_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fields_of(flat):
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def case_kill(args, redis):
    r = redis.client()
    req = os.path.join(args.work_dir, "kill.jsonl")
    write_requests(req, args.items)
    with open(req, "a") as f:
        f.write('{"id":"poison-input","inputs":{"bogus":[1]}}\n')
        f.write('{"id":"poison-shape","inputs":{"x":[1,2,3]}}\n')
    total = args.items + 2
    local = os.path.join(args.work_dir, "kill_local.jsonl")
    subprocess.run([args.inferd, "batch", "--model-repository", args.repo, "--model", "mlp",
                    "--input", req, "--output", local, "--threads", "1"], check=True,
                   capture_output=True, timeout=TIMEOUT_S)
    want = {rec["source"]: rec for rec in read_records(local)}
    check(len(want) == total, f"local run: {len(want)} records, want {total}")

    workers = {n: start_worker(args, redis, n, "jobs", "g") for n in ("w0", "w1", "w2")}
    for n, p in workers.items():
        wait_ready(args, n, p)
    out = os.path.join(args.work_dir, "kill_queue.jsonl")
    # Packs of 4 items: a worker's --batch 16 reads 4 entries at a time.
    job = subprocess.Popen([args.inferd, "batch", "--redis", redis.url, "--stream", "jobs",
                            "--group", "g", "--model", "mlp", "--input", req, "--output", out,
                            "--queue-timeout", "60", "--progress-interval", "1", "--pack", "4"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # SIGKILL w0 while it holds a batch it has not acknowledged (half a batch at least, unless
    # that takes long), then SIGTERM w1 at once: it finishes its batch, acks it and exits 0.
    t0 = time.time()
    while pending_by_consumer(r, "jobs", "g").get("w0", 0) < (2 if time.time() - t0 < 10 else 1):
        check(time.time() - t0 < 60 and job.poll() is None, "w0 never had entries pending")
        time.sleep(0.002)
    workers["w0"].send_signal(signal.SIGKILL)
    t_kill = time.time()
    workers["w0"].wait()
    t1 = time.time()
    while pending_by_consumer(r, "jobs", "g").get("w1", 0) == 0 and time.time() - t1 < 5:
        time.sleep(0.002)
    w1_pending = pending_by_consumer(r, "jobs", "g").get("w1", 0)
    workers["w1"].send_signal(signal.SIGTERM)
    victim = [e[0] for e in r.command("XPENDING", "jobs", "g", "-", "+", "1000", "w0")]
    check(victim, "w0 had nothing pending at its death")
    rc = workers["w1"].wait(30)
    check(rc == 0, f"w1 exited {rc} after SIGTERM:\n{open(log_path(args, 'w1')).read()}")
    check(pending_by_consumer(r, "jobs", "g").get("w1", 0) == 0, "w1 left entries pending")
    check('"event":"worker_end"' in open(log_path(args, "w1")).read(), "w1: no summary")
    print(f"  w1 stopped by SIGTERM with {w1_pending} entries pending: exit 0, none left")
    while pending_by_consumer(r, "jobs", "g").get("w0", 0) > 0:
        check(time.time() - t_kill < 30, "w0's entries were never reclaimed")
        time.sleep(0.02)
    reclaim_s = time.time() - t_kill
    bound = (CLAIM_IDLE_MS + CLAIM_INTERVAL_MS) / 1000 + SLACK_S
    print(f"  w0 killed with {len(victim)} entries ({4 * len(victim)} items) pending; reclaimed "
          f"after {reclaim_s:.2f} s "
          f"(bound {bound:.1f} s)")
    check(reclaim_s <= bound, f"reclaim took {reclaim_s:.2f} s > {bound:.1f} s")
    stdout, stderr = job.communicate(timeout=TIMEOUT_S)
    check(job.returncode == 0, f"batch --redis exited {job.returncode}:\n{stderr}")
    check("progress:" in stderr, f"no progress display:\n{stderr}")

    got = read_records(out)
    sources = [rec["source"] for rec in got]
    check(len(got) == total, f"{len(got)} records, want {total} (lost or duplicated)")
    check(len(set(sources)) == total, f"duplicated records: {len(sources) - len(set(sources))}")
    for rec in got:
        w = want[rec["source"]]
        check(rec["id"] == w["id"], f"{rec['source']}: id {rec['id']} != {w['id']}")
        if "error" in w:
            check("error" in rec, f"{rec['source']}: want an error record, got {rec}")
            continue
        check("outputs" in rec, f"{rec['source']}: {rec}")
        a, b = rec["outputs"]["y"]["data"], w["outputs"]["y"]["data"]
        check(rec["outputs"]["y"]["shape"] == w["outputs"]["y"]["shape"], "shape differs")
        check(max(abs(x - y) for x, y in zip(a, b)) <= 1e-5, f"{rec['source']}: outputs differ")
    errors = {rec["id"]: rec["error"] for rec in got if "error" in rec}
    check(set(errors) == {"poison-input", "poison-shape"}, f"error records: {errors}")
    check("bogus" in errors["poison-input"], errors["poison-input"])

    dead = r.command("XRANGE", "jobs:dead", "-", "+")
    dead_sources = sorted(fields_of(e[1])["source"].decode() for e in dead)
    want_dead = sorted(s for s, rec in want.items() if "error" in rec)
    check(dead_sources == want_dead, f"dead letters {dead_sources}, want {want_dead}")
    for e in dead:
        f = fields_of(e[1])
        check(f["reason"] and f["entry"] and f["request"], f"dead letter without reason: {f}")
    check(sum(pending_by_consumer(r, "jobs", "g").values()) == 0, "entries left pending")
    check(r.command("KEYS", "result:jobs:*") == [], "result keys left behind")
    check(r.command("XLEN", "jobs") == 0, "acknowledged entries not trimmed from the stream")
    summaries = []
    for n in ("w1", "w2"):
        if workers[n].poll() is None:
            workers[n].send_signal(signal.SIGTERM)
            check(workers[n].wait(30) == 0, f"{n}: exit after SIGTERM")
        for line in open(log_path(args, n)):
            if '"event":"worker_end"' in line:
                summaries.append(json.loads(line))
    print(f"  {total} records, 0 lost, 0 duplicated; {len(dead)} dead letters; surviving workers: "
          + ", ".join(f"{s['entries']} entries ({s['claimed']} claimed, {s['duplicates']} results "
                      f"already stored)" for s in summaries))
    r.close()


def case_invalid(args, redis):
    r = redis.client()
    r.command("XGROUP", "CREATE", "raw", "g2", "0", "MKSTREAM")
    valid = '{"inputs":{"x":%s}}' % json.dumps([0.5] * 64)
    # An entry a consumer took and never acknowledged, three deliveries so far.
    ghost_id = r.command("XADD", "raw", "*", "model", "mlp", "source", "s5", "request", valid,
                         "reply", "raw:reply:t").decode()
    r.command("XREADGROUP", "GROUP", "g2", "ghost", "COUNT", "1", "STREAMS", "raw", ">")
    for _ in range(2):
        r.command("XCLAIM", "raw", "g2", "ghost", "0", ghost_id)
    # An entry whose first worker stored its result and died before the ack: the redelivery
    # must keep that result (SET NX), not store a second one.
    stored_id = r.command("XADD", "raw", "*", "model", "mlp", "source", "s6", "request", valid,
                          "reply", "raw:reply:t").decode()
    r.command("XREADGROUP", "GROUP", "g2", "ghost", "COUNT", "1", "STREAMS", "raw", ">")
    first = '{"id":"s6","source":"s6","outputs":{"first":true}}\n'
    r.command("SET", f"result:raw:{stored_id}", first)
    ids = {
        "s1": r.command("XADD", "raw", "*", "source", "s1", "request", valid),
        "s2": r.command("XADD", "raw", "*", "model", "mlp", "source", "s2", "request", "not json",
                        "reply", "raw:reply:t"),
        "s3": r.command("XADD", "raw", "*", "model", "nosuch", "source", "s3", "request", valid,
                        "reply", "raw:reply:t"),
        "s4": r.command("XADD", "raw", "*", "model", "mlp", "source", "s4", "file", "abc"),
    }
    # A pack whose second item is not JSON: that item alone is dead-lettered; and a pack whose
    # item count is wrong: one dead letter for the entry, an error record per source.
    ids["p1"] = r.command("XADD", "raw", "*", "model", "mlp", "reply", "raw:reply:t", "items", "2",
                          "source", "p1a", "request", valid, "source", "p1b", "request", "{oops")
    ids["p2"] = r.command("XADD", "raw", "*", "model", "mlp", "items", "3", "source", "p2a",
                          "request", valid, "source", "p2b", "request", valid)
    ids = {k: v.decode() for k, v in ids.items()}
    ids["s5"] = ghost_id
    w = start_worker(args, redis, "v0", "raw", "g2", "--max-deliveries", "3")
    deadline = time.time() + 30
    while r.command("XLEN", "raw:dead") < 7:
        check(time.time() < deadline, f"dead letters: {r.command('XLEN', 'raw:dead')} of 7:\n"
              + open(log_path(args, "v0")).read())
        check(w.poll() is None, "the worker died:\n" + open(log_path(args, "v0")).read())
        time.sleep(0.05)
    reasons = {}
    for e in r.command("XRANGE", "raw:dead", "-", "+"):
        f = fields_of(e[1])
        reasons[f["source"].decode()] = f["reason"].decode()
    want = {"s1": "'model'", "s2": "malformed JSON", "s3": "nosuch", "s4": ".npy",
            "s5": "after 3 deliveries"}
    for s, text in want.items():
        check(text in reasons.get(s, ""), f"{s}: reason {reasons.get(s)!r} lacks {text!r}")
        rec = r.command("GET", f"result:raw:{ids[s]}")
        check(rec is not None and "error" in json.loads(rec), f"{s}: no error record ({rec})")
    check("malformed JSON" in reasons.get("p1b", ""), f"p1b: {reasons.get('p1b')!r}")
    check("p1a" not in reasons, "the pack's valid item was dead-lettered")
    recs = [json.loads(x) for x in r.command("GET", f"result:raw:{ids['p1']}").splitlines()]
    check([x["source"] for x in recs] == ["p1a", "p1b"] and "outputs" in recs[0]
          and "error" in recs[1], f"p1: records {recs}")
    check("says 3" in reasons.get("p2b", ""), f"p2: {reasons.get('p2b')!r}")
    recs = [json.loads(x) for x in r.command("GET", f"result:raw:{ids['p2']}").splitlines()]
    check([x["source"] for x in recs] == ["p2a", "p2b"] and all("error" in x for x in recs),
          f"p2: records {recs}")
    notified = set()
    for e in r.command("XRANGE", "raw:reply:t", "-", "+"):
        notified.update(fields_of(e[1])["ids"].decode().split())
    check({ids["s2"], ids["s3"], ids["s5"], ids["p1"]} <= notified, f"reply stream: {notified}")
    while stored_id not in notified:
        check(time.time() < deadline, "the stored entry was never redelivered")
        time.sleep(0.05)
        for e in r.command("XRANGE", "raw:reply:t", "-", "+"):
            notified.update(fields_of(e[1])["ids"].decode().split())
    check(r.command("GET", f"result:raw:{stored_id}").decode() == first,
          "a redelivery replaced the stored result")
    check(sum(pending_by_consumer(r, "raw", "g2").values()) == 0, "entries left pending")
    check(w.poll() is None, "the worker exited")
    w.send_signal(signal.SIGTERM)
    check(w.wait(30) == 0, "exit after SIGTERM")
    summary = [json.loads(line) for line in open(log_path(args, "v0")) if "worker_end" in line]
    check(summary and summary[0]["duplicates"] == 1, f"summary: {summary}")
    print("  s6: redelivered after its result was stored: the first result kept (1 duplicate)")
    for s in sorted(reasons):
        print(f"  {s}: dead-lettered: {reasons[s]}")
    r.close()


def case_unreachable(args, redis):
    port = free_port()  # nothing listens there
    url = f"redis://127.0.0.1:{port}"
    req = os.path.join(args.work_dir, "small.jsonl")
    write_requests(req, 3)
    out = os.path.join(args.work_dir, "unreachable.jsonl")
    runs = {
        "worker": [args.inferd, "worker", "--redis", url, "--stream", "s", "--group", "g",
                   "--model-repository", args.repo],
        "batch": [args.inferd, "batch", "--redis", url, "--model", "mlp", "--input", req,
                  "--output", out],
    }
    for name, cmd in runs.items():
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        check(p.returncode == 1, f"{name}: exit {p.returncode}, want 1\n{p.stderr}")
        check(f"127.0.0.1:{port}" in p.stderr and "cannot connect" in p.stderr,
              f"{name}: unclear error: {p.stderr}")
        print(f"  {name}: {p.stderr.strip().splitlines()[-1]}")
    check(not os.path.exists(out) or os.path.getsize(out) == 0, "records written")
    p = subprocess.run(runs["batch"][:3] + ["http://127.0.0.1:1"] + runs["batch"][4:],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "redis://" in p.stderr, f"bad URL: {p.returncode} {p.stderr}")


CASES = {"kill": case_kill, "invalid": case_invalid, "unreachable": case_unreachable}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--items", type=int, default=3000)
    args = ap.parse_args()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    args.repo = os.path.join(args.work_dir, "repo")
    write_mlp(args.repo, hidden=1024)
    redis = RedisServer(os.path.join(args.work_dir, "redis"))
    failed = []
    try:
        for name, fn in CASES.items():
            if args.only and name not in args.only.split(","):
                continue
            t0 = time.time()
            try:
                fn(args, redis)
                print(f"PASS {name} ({time.time() - t0:.1f} s)")
            except Exception as e:  # noqa: BLE001 - report every case
                failed.append(name)
                print(f"FAIL {name}: {e}")
    finally:
        redis.stop()
    if failed:
        print("failed:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
