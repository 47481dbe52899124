#!/usr/bin/python3
"""The work queue's benchmark and kill test (docs/fleet.md, "Work queue on Redis Streams").

    /usr/bin/python3 bench/fleet/queue_bench.py --inferd build/inferd --work-dir /tmp/queue_bench \
        [--items 10000] [--rounds 3] [--hidden 512] [--threads 1] [--workers 3] [--batch 64] \
        [--pack 64] [--variant LABEL=INFERD[:PACK[:BATCH]] ...]

A redis-server is started on a free loopback port (no persistence) and stopped at the end.

1. Queue cost, alternating in one run: the same --items JSONL requests run (a) in process by
   `inferd batch --threads T` and (b) through the queue by `inferd batch --redis` on ONE
   `inferd worker --threads T` (started and warm before the clock starts), --rounds times each,
   a then b. With --variant (repeatable), (b) is run once per variant in each round: LABEL's
   worker and submitter are INFERD, with `--pack PACK` (no --pack flag when PACK is omitted or
   0: an older inferd without packing) and worker `--batch BATCH` (default --batch), so two
   builds or configurations are compared in the same run. Reported per round: wall time, items/s and CPU seconds (wait4 of the local job; the
   worker + submitter + redis-server for the queue, from wait4 and /proc). The queue's cost is
   (queue - local) / local, on the medians, in wall time and in CPU; and the worker's own split
   of its time (Redis round trips vs decoding + engine + formatting) from its exit summary.
2. Kill run: the items on --workers workers; once a third of the records are written, one worker
   is SIGKILLed while it holds a batch. Checked: one record per input (zero lost, zero
   duplicated), nothing left pending, the killed worker's entries reclaimed within
   --claim-idle-ms + one claim period. The model is tests/workqueue's MLP (x[N, 64] -> tanh
   layers of --hidden -> y[N, 16]).
Prints a JSON summary at the end (also written to WORK_DIR/summary.json).
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "workqueue"))
from redis_util import RedisServer, write_mlp, write_requests  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def run_timed(cmd, **kw):
    """Runs an `inferd batch`; returns (job_s, cpu_s, returncode, stderr): job_s is the job's own
    time from its summary line (without process start and model load), cpu_s the process's."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kw)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    m = re.search(r"records \(\d+ errors\) in ([0-9.]+) s", err)
    return (float(m.group(1)) if m else float("nan")), ru.ru_utime + ru.ru_stime, rc, err


class Worker:
    def __init__(self, args, redis, name, stream, group, inferd=None, batch=None):
        self.name = name
        self.log = os.path.join(args.work_dir, f"{name}.log")
        cmd = [inferd or args.inferd, "worker", "--redis", redis.url, "--stream", stream, "--group", group,
               "--model-repository", args.repo, "--model", "mlp", "--consumer", name,
               "--threads", str(args.threads), "--batch", str(batch or args.batch),
               "--batch-size", str(args.batch_size),
               "--claim-idle-ms", str(args.claim_idle_ms),
               "--claim-interval-ms", str(args.claim_interval_ms)]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while "consuming" not in open(self.log).read():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"worker {name} did not start: {open(self.log).read()}")
            time.sleep(0.05)

    def stop(self):
        """SIGTERM; returns (cpu_s, summary dict or None)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, status, ru = os.wait4(self.proc.pid, 0)
        summary = None
        for line in open(self.log):
            if '"event":"worker_end"' in line:
                summary = json.loads(line)
        return ru.ru_utime + ru.ru_stime, summary


def batch_cmd(args, out, *extra, requests=None):
    return [args.inferd, "batch", "--model", "mlp", "--input", requests or args.requests,
            "--output", out, "--batch-size", str(args.batch_size), "--progress-interval",
            "60"] + list(extra)


def local_cmd(args, out, requests=None):
    return batch_cmd(args, out, "--model-repository", args.repo, "--threads", str(args.threads),
                     requests=requests)


def queue_cmd(args, out, stream, requests=None, variant=None):
    v = variant or args.variants[0]
    extra = [] if v["pack"] is None else ["--pack", str(v["pack"])]
    cmd = batch_cmd(args, out, "--redis", args.redis_url, "--stream", stream, "--group", "g",
                    "--queue-timeout", "120", *extra, requests=requests)
    return [v["inferd"]] + cmd[1:]


def fixed_costs(args, redis):
    """CPU of a 1-item job, local (process start + model load) and submitted (process start, per
    variant): subtracted from every round so the comparison is per-entry work, not start-up."""
    one = os.path.join(args.work_dir, "one.jsonl")
    with open(args.requests) as f, open(one, "w") as g:
        g.write(f.readline())
    local = statistics.median(
        run_timed(local_cmd(args, os.path.join(args.work_dir, f"l1_{i}"), one))[1]
        for i in range(3))
    for v in args.variants:
        stream = f"fixed_{v['label']}"
        w = Worker(args, redis, stream, stream, "g", v["inferd"], v["batch"])
        v["fixed_submit"] = statistics.median(
            run_timed(queue_cmd(args, os.path.join(args.work_dir, f"q1_{v['label']}_{i}"),
                                stream, one, v))[1] for i in range(3))
        w.stop()
    return local


def command_stats(redis):
    c = redis.client()
    stats = c.command("INFO", "commandstats").decode()
    c.close()
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"cmdstat_(\w+):calls=(\d+),usec=(\d+)", stats)}


def queue_round(args, redis, r, v):
    stream = f"cost{r}_{v['label']}"
    w = Worker(args, redis, stream, stream, "g", v["inferd"], v["batch"])
    c = redis.client()
    c.command("CONFIG", "RESETSTAT")  # INFO commandstats from here: this round's commands
    c.close()
    redis_cpu0 = proc_cpu(redis.proc.pid)
    worker_cpu0 = proc_cpu(w.proc.pid)  # after its start and model load
    out = os.path.join(args.work_dir, f"queue{r}_{v['label']}.jsonl")
    wall, cpu, rc, err = run_timed(queue_cmd(args, out, stream, variant=v))
    cpu -= v["fixed_submit"]
    redis_cpu = proc_cpu(redis.proc.pid) - redis_cpu0
    worker_cpu = proc_cpu(w.proc.pid) - worker_cpu0
    for name, (calls, usec) in command_stats(redis).items():
        total = v["redis_commands"].setdefault(name, [0, 0])
        total[0] += calls
        total[1] += usec
    _, summary = w.stop()
    if rc != 0:
        raise RuntimeError(f"queue batch failed: {err}")
    n = sum(1 for _ in open(out))
    if n != args.items:
        raise RuntimeError(f"queue round {r} ({v['label']}): {n} records of {args.items}")
    return {"wall_s": wall, "cpu_s": cpu + worker_cpu + redis_cpu, "submitter_cpu_s": cpu,
            "worker_cpu_s": worker_cpu, "redis_cpu_s": redis_cpu, "worker": summary}


def cost_rounds(args, redis):
    rounds = []
    args.redis_url = redis.url
    fixed_local = fixed_costs(args, redis)
    print(f"fixed CPU of a 1-item job: local {fixed_local:.3f} s, submitter "
          + ", ".join(f"{v['label']} {v['fixed_submit']:.3f} s" for v in args.variants))
    for r in range(args.rounds):
        out = os.path.join(args.work_dir, f"local{r}.jsonl")
        wall, cpu, rc, err = run_timed(local_cmd(args, out))
        if rc != 0:
            raise RuntimeError(f"local batch failed: {err}")
        local = {"wall_s": wall, "cpu_s": cpu - fixed_local}
        line = (f"round {r}: local {local['wall_s']:.2f} s ({args.items / local['wall_s']:.0f}/s,"
                f" cpu {local['cpu_s']:.2f} s)")
        entry = {"local": local}
        for v in args.variants:
            q = queue_round(args, redis, r, v)
            entry[v["label"]] = q
            extra_us = 1e6 * (q["cpu_s"] - local["cpu_s"]) / args.items
            line += (f" | {v['label']} {q['wall_s']:.2f} s ({args.items / q['wall_s']:.0f}/s, cpu "
                     f"{q['cpu_s']:.2f} s = worker {q['worker_cpu_s']:.2f} + submitter "
                     f"{q['submitter_cpu_s']:.2f} + redis {q['redis_cpu_s']:.2f}; +{extra_us:.1f}"
                     f" us/entry)")
        rounds.append(entry)
        print(line, flush=True)
    return rounds


def pending_by_consumer(r, stream, group):
    reply = r.command("XPENDING", stream, group)
    return {c.decode(): int(n) for c, n in (reply[3] or [])}


def kill_run(args, redis):
    r = redis.client()
    workers = [Worker(args, redis, f"k{i}", "kill", "g", args.variants[0]["inferd"],
                      args.variants[0]["batch"])
               for i in range(args.workers)]
    out = os.path.join(args.work_dir, "kill.jsonl")
    t0 = time.time()
    job = subprocess.Popen(queue_cmd(args, out, "kill"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    victim = workers[0]
    while (not os.path.exists(out) or sum(1 for _ in open(out)) < args.items // 3 or
           pending_by_consumer(r, "kill", "g").get(victim.name, 0) < 2):
        if job.poll() is not None:
            raise RuntimeError("the job finished before the kill: use more --items")
        time.sleep(0.002)
    victim.proc.send_signal(signal.SIGKILL)
    t_kill = time.time()
    victim.proc.wait()
    held = pending_by_consumer(r, "kill", "g").get(victim.name, 0)
    while pending_by_consumer(r, "kill", "g").get(victim.name, 0) > 0:
        if time.time() - t_kill > 60:
            raise RuntimeError("the killed worker's entries were never reclaimed")
        time.sleep(0.01)
    reclaim_s = time.time() - t_kill
    _, err = job.communicate(timeout=600)
    wall = time.time() - t0
    summaries = [w.stop()[1] for w in workers[1:]]
    recs = [json.loads(line) for line in open(out)]
    sources = [x["source"] for x in recs]
    result = {
        "items": args.items, "records": len(recs), "unique_sources": len(set(sources)),
        "lost": args.items - len(set(sources)), "duplicated": len(sources) - len(set(sources)),
        "error_records": sum(1 for x in recs if "error" in x),
        "killed_with_pending": held, "reclaim_s": reclaim_s,
        "reclaim_bound_s": (args.claim_idle_ms + args.claim_interval_ms) / 1000,
        "left_pending": sum(pending_by_consumer(r, "kill", "g").values()),
        "wall_s": wall, "exit": job.returncode,
        "duplicate_results_refused": sum(s["duplicates"] for s in summaries if s),
    }
    print(f"kill run: {json.dumps(result)}", flush=True)
    r.close()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256, help="worker --batch (items per read)")
    ap.add_argument("--pack", type=int, default=64, help="batch --pack (items per stream entry)")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=INFERD[:PACK[:BATCH]]: a queue configuration run in every round")
    ap.add_argument("--batch-size", type=int, default=32, help="the model's preferred batch")
    ap.add_argument("--claim-idle-ms", type=int, default=2000)
    ap.add_argument("--claim-interval-ms", type=int, default=1000)
    ap.add_argument("--skip-kill", action="store_true")
    args = ap.parse_args()
    args.variants = []
    for spec in args.variant or [f"queue={args.inferd}:{args.pack}"]:
        label, _, rest = spec.partition("=")
        inferd, _, rest = rest.partition(":")
        pack, _, batch = rest.partition(":")
        args.variants.append({"label": label, "inferd": os.path.abspath(inferd),
                              "pack": int(pack) if pack and pack != "0" else None,
                              "batch": int(batch) if batch else None, "redis_commands": {}})
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    args.repo = os.path.join(args.work_dir, "repo")
    args.requests = os.path.join(args.work_dir, "requests.jsonl")
    write_mlp(args.repo, hidden=args.hidden)
    write_requests(args.requests, args.items)
    redis = RedisServer(os.path.join(args.work_dir, "redis"))
    try:
        rounds = cost_rounds(args, redis)
        kill = None if args.skip_kill else kill_run(args, redis)
    finally:
        redis.stop()
    med = lambda side, key: statistics.median(x[side][key] for x in rounds)  # noqa: E731
    summary = {
        "items": args.items, "rounds": args.rounds, "hidden": args.hidden,
        "threads": args.threads, "batch": args.batch, "batch_size": args.batch_size,
        "local_wall_s": med("local", "wall_s"), "local_cpu_s": med("local", "cpu_s"),
        "local_items_per_s": args.items / med("local", "wall_s"),
        "work_cpu_us_per_entry": 1e6 * med("local", "cpu_s") / args.items,
        "variants": {},
        "rounds_detail": rounds, "kill": kill, "load_average": os.getloadavg(),
    }
    for v in args.variants:
        label = v["label"]
        w = [x[label]["worker"] for x in rounds]
        q = {
            "inferd": v["inferd"], "pack": v["pack"], "batch": v["batch"] or args.batch,
            "wall_s": med(label, "wall_s"), "cpu_s": med(label, "cpu_s"),
            "items_per_s": args.items / med(label, "wall_s"),
            "worker_cpu_s": med(label, "worker_cpu_s"),
            "submitter_cpu_s": med(label, "submitter_cpu_s"),
            "redis_cpu_s": med(label, "redis_cpu_s"),
            "worker_store_share": statistics.median(
                s["store_s"] / max(1e-9, s["store_s"] + s["work_s"]) for s in w),
            # CPU the queue adds per entry (per round, then the median), and its share of the
            # work per entry.
            "extra_cpu_us_per_entry": statistics.median(
                1e6 * (x[label]["cpu_s"] - x["local"]["cpu_s"]) / args.items for x in rounds),
        }
        # Redis's own time per item and command over this variant's rounds (INFO commandstats).
        q["redis_calls"] = {k: c for k, (c, _) in v["redis_commands"].items()}
        q["redis_usec_per_item"] = {k: round(u / (args.rounds * args.items), 3)
                                    for k, (_, u) in v["redis_commands"].items()}
        q["redis_usec_per_item_total"] = round(sum(q["redis_usec_per_item"].values()), 3)
        q["queue_cost_cpu"] = q["extra_cpu_us_per_entry"] / summary["work_cpu_us_per_entry"]
        q["queue_cost_wall"] = q["wall_s"] / summary["local_wall_s"] - 1
        summary["variants"][label] = q
    with open(os.path.join(args.work_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    brief = {k: v for k, v in summary.items() if k != "rounds_detail"}
    print(json.dumps(brief, indent=1))
    ok = kill is None or (kill["lost"] == 0 and kill["duplicated"] == 0 and kill["exit"] == 0
                          and kill["left_pending"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
