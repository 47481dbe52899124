#!/usr/bin/python3
"""End-to-end tests of `inferd batch` (no server): outputs, error records, resume.

    /usr/bin/python3 tests/batch/batch_test.py --inferd build/inferd --work-dir /tmp/batch_test \
        [--only NAME,...] [--kills 20] [--seed 1]

The model is written here with onnx.helper: a small CNN, x float32[N, 8, 32, 32] -> four 3x3
convolutions -> mean over H, W -> y float32[N, 48], about 130 MFLOP per item, so a job over a few
hundred items lasts seconds on one core (the resume test needs a job long enough to kill at 20
points). Its config has no dynamic_batching: the job adds it (preferred batch = --batch-size).

Cases:
  outputs     records equal `inferd run`'s outputs on the same .npy inputs; timeline SVG, stats
  errors      a folder with a dangling link (and, unless root, a mode-000 file) and a corrupt
              .npy, a JSONL file with a malformed line, an unknown input and a wrong shape: error
              records, the job goes on; --max-errors stops it with exit 1
  existing    an output with records is refused without --resume
  bad         unknown model, missing input, no glob match, unwritable output, bad flag
  jpeg        JPEG/PNG files through an ensemble (ai.inferd.DecodeResizeCrop pre-processor ->
              a mean): exact outputs for solid colours, a corrupt JPEG is an error record
  sigterm     SIGTERM mid-job: exit 1 with a --resume hint, whole records; --resume finishes
  resume      SIGKILL at --kills random points, resuming each time: the final records equal an
              uninterrupted run's (same sources, one each, same outputs) and each kill redid at
              most one batch (engine answers per run, from --stats, minus records it wrote)
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BATCH = 8
TIMEOUT_S = 120


def write_model(repo):
    d = os.path.join(repo, "cnn", "1")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    prev, ch = "x", 8
    for i in range(4):
        w = (rng.standard_normal((48, ch, 3, 3)) / np.sqrt(ch * 9)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Tanh", [f"c{i}"], [f"t{i}"]))
        prev, ch = f"t{i}", 48
    nodes.append(helper.make_node("ReduceMean", [prev], ["y"], axes=[2, 3], keepdims=0))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 48])
    g = helper.make_graph(nodes, "cnn", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "model.onnx"))
    return os.path.join(d, "model.onnx")


def write_inputs(d, n, seed):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        np.save(os.path.join(d, f"item{i:04d}.npy"),
                rng.standard_normal((8, 32, 32)).astype(np.float32))


def run_batch(args, *extra, check=None, timeout=TIMEOUT_S):
    cmd = [args.inferd, "batch", "--model-repository", args.repo, "--model", "cnn",
           "--threads", "1", "--readers", "1", "--batch-size", str(BATCH)] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check is not None and p.returncode != check:
        raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}, want {check}\n{p.stderr}")
    return p


def read_records(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == "" or text.endswith("\n"), f"{path} ends in a torn line"
    return [json.loads(line) for line in text.splitlines()]


def by_source(records):
    out = {}
    for r in records:
        assert r["source"] not in out, f"two records for {r['source']}"
        out[r["source"]] = r
    return out


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


def case_outputs(args):
    inputs = os.path.join(args.work, "out_inputs")
    write_inputs(inputs, 20, seed=1)
    out = os.path.join(args.work, "outputs.jsonl")
    svg = os.path.join(args.work, "outputs.svg")
    stats = os.path.join(args.work, "outputs_stats.jsonl")
    p = run_batch(args, "--input", inputs, "--output", out, "--timeline", svg, "--stats", stats,
                  check=0)
    expect("adds one (preferred batch size 8" in p.stderr, p.stderr)
    expect("20 records (0 errors)" in p.stderr, p.stderr)
    recs = by_source(read_records(out))
    expect(len(recs) == 20, f"{len(recs)} records")
    model = os.path.join(args.repo, "cnn", "1", "model.onnx")
    for name in ("item0000.npy", "item0007.npy", "item0019.npy"):
        od = os.path.join(args.work, "run_" + name)
        batched = os.path.join(args.work, "batched_" + name)  # `inferd run` wants [1, 8, 32, 32]
        np.save(batched, np.load(os.path.join(inputs, name))[None])
        subprocess.run([args.inferd, "run", model, "--threads", "1", "--input",
                        "x=" + batched, "-o", od], check=True,
                       capture_output=True, timeout=TIMEOUT_S)
        want = np.load(os.path.join(od, "y.npy"))
        rec = recs[os.path.join(inputs, name)]
        expect(rec["id"] == name, rec["id"])
        got = np.array(rec["outputs"]["y"]["data"], dtype=np.float32).reshape(
            rec["outputs"]["y"]["shape"])
        expect(got.shape == (1, 48) and want.shape == (1, 48), f"{got.shape} {want.shape}")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    import xml.etree.ElementTree as ET
    ET.parse(svg)  # well-formed
    with open(svg) as f:
        text = f.read()
    for lane in (">reader 0<", ">engine 0<", ">writer<"):
        expect(lane in text, f"timeline lacks {lane}")
    events = [json.loads(line) for line in open(stats)]
    expect(events[0]["event"] == "start" and events[-1]["event"] == "end", str(events[-1]))
    expect(sum(e["event"] == "inferred" for e in events) == 20, "inferred events")
    expect(events[-1]["records"] == 20 and events[-1]["stop"] == "finished", str(events[-1]))


def case_errors(args):
    d = os.path.join(args.work, "err_inputs")
    write_inputs(d, 4, seed=2)
    os.symlink(os.path.join(d, "gone.npy"), os.path.join(d, "dangling.npy"))
    with open(os.path.join(d, "corrupt.npy"), "wb") as f:
        f.write(b"\x93NUMPY garbage")
    bad = {"dangling.npy": "No such file", "corrupt.npy": "corrupt.npy"}
    if os.geteuid() != 0:
        locked = os.path.join(d, "locked.npy")
        shutil.copy(os.path.join(d, "item0000.npy"), locked)
        os.chmod(locked, 0)
        bad["locked.npy"] = "Permission denied"
    out = os.path.join(args.work, "errors.jsonl")
    p = run_batch(args, "--input", d, "--output", out, check=0)
    recs = {r["id"]: r for r in read_records(out)}
    expect(len(recs) == 4 + len(bad), f"{len(recs)} records: {p.stderr}")
    for name, reason in bad.items():
        expect(reason in recs[name].get("error", ""), f"{name}: {recs[name]}")
    expect(all("outputs" in recs[f"item{i:04d}.npy"] for i in range(4)), "good items")

    jl = os.path.join(args.work, "req.jsonl")
    row = np.zeros((8, 32, 32), dtype=np.float32).tolist()
    with open(jl, "w") as f:
        f.write(json.dumps({"id": "ok1", "inputs": {"x": row}}) + "\n")
        f.write('{"id": "torn", "inputs": {"x": [[1, 2\n')
        f.write(json.dumps({"id": "unknown", "inputs": {"z": 1}}) + "\n")
        f.write(json.dumps({"id": 4, "inputs": {"x": [[1.0, 2.0]]}}) + "\n")
        f.write("\n")
        f.write(json.dumps({"inputs": {"x": [row]}}) + "\n")
    out = os.path.join(args.work, "req_out.jsonl")
    run_batch(args, "--input", jl, "--output", out, check=0)
    recs = by_source(read_records(out))
    expect(len(recs) == 5, f"{len(recs)} records")
    expect("outputs" in recs[jl + ":1"] and recs[jl + ":1"]["id"] == "ok1", "line 1")
    expect("malformed JSON" in recs[jl + ":2"]["error"], recs[jl + ":2"])
    expect("unknown input 'z'" in recs[jl + ":3"]["error"], recs[jl + ":3"])
    expect(recs[jl + ":4"]["id"] == 4 and "shape" in recs[jl + ":4"]["error"], recs[jl + ":4"])
    expect(recs[jl + ":6"]["id"] == "line 6" and "outputs" in recs[jl + ":6"], "line 6")

    out = os.path.join(args.work, "max_errors.jsonl")
    p = run_batch(args, "--input", d, "--output", out, "--max-errors", "1", check=1)
    expect("stopped after" in p.stderr and "--max-errors 1" in p.stderr, p.stderr)
    expect(p.stderr.strip().splitlines()[-1].startswith("inferd: error: "), p.stderr)


def case_existing(args):
    d = os.path.join(args.work, "out_inputs")
    out = os.path.join(args.work, "outputs.jsonl")
    if not os.path.exists(out):
        case_outputs(args)
    p = run_batch(args, "--input", d, "--output", out, check=1)
    expect("pass --resume" in p.stderr, p.stderr)
    p = run_batch(args, "--input", d, "--output", out, "--resume", check=0)
    expect("nothing to do: all 20 inputs have records" in p.stderr, p.stderr)


def case_bad(args):
    """Usage and set-up errors: one line on stderr, exit 1 (2 for usage), no output written."""
    d = os.path.join(args.work, "bad_inputs")
    write_inputs(d, 2, seed=4)
    out = os.path.join(args.work, "bad.jsonl")
    cases = [
        (["--model", "nope"], 1, "model 'nope'"),
        (["--input", os.path.join(args.work, "missing")], 1, "does not exist"),
        (["--input", os.path.join(args.work, "nothing*.npy")], 1, "no input file matches"),
        (["--output", os.path.join(args.work, "no", "dir", "o.jsonl")], 1, "cannot open output"),
        (["--batch-size", "0"], 2, "--batch-size"),
    ]
    for extra, code, text in cases:
        argv = {"--model": "cnn", "--input": d, "--output": out}
        argv.update(dict(zip(extra[::2], extra[1::2])))
        cmd = [args.inferd, "batch", "--model-repository", args.repo]
        for k, v in argv.items():
            cmd += [k, v]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        lines = p.stderr.strip().splitlines()
        expect(p.returncode == code, f"{extra}: exit {p.returncode}: {p.stderr}")
        expect(lines and lines[-1].startswith("inferd: error: ") and text in lines[-1],
               f"{extra}: {p.stderr}")
        if os.path.exists(out):
            expect(os.path.getsize(out) == 0, f"{extra}: wrote records")


def write_image_models(repo):
    """pre: JPEG/PNG bytes -> ai.inferd.DecodeResizeCrop (resize 40, crop 32x32, ImageNet
    mean/std) -> [N, 3, 32, 32]; mean: ReduceMean over H, W -> [N, 3]; the ensemble `colors`
    chains them. No config has dynamic_batching: the job adds it to both steps."""
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    node = helper.make_node("DecodeResizeCrop", ["image"], ["pixels"], domain="ai.inferd",
                            resize=40, crop=[32, 32], mean=mean, std=std, layout="NCHW")
    g = helper.make_graph([node], "pre",
                          [helper.make_tensor_value_info("image", TensorProto.STRING, ["N", 1])],
                          [helper.make_tensor_value_info("pixels", TensorProto.FLOAT,
                                                         ["N", 3, 32, 32])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("ai.inferd", 1)])
    os.makedirs(os.path.join(repo, "pre", "1"), exist_ok=True)
    onnx.save(m, os.path.join(repo, "pre", "1", "model.onnx"))
    g = helper.make_graph([helper.make_node("ReduceMean", ["p"], ["rgb"], axes=[2, 3],
                                            keepdims=0)], "mean",
                          [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 3, 32, 32])],
                          [helper.make_tensor_value_info("rgb", TensorProto.FLOAT, ["N", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    os.makedirs(os.path.join(repo, "mean", "1"), exist_ok=True)
    onnx.save(m, os.path.join(repo, "mean", "1", "model.onnx"))
    os.makedirs(os.path.join(repo, "colors", "1"), exist_ok=True)
    open(os.path.join(repo, "colors", "1", "model.onnx"), "ab").close()  # see run_bench.py
    with open(os.path.join(repo, "colors", "config.pbtxt"), "w") as f:
        f.write("""name: "colors"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "RGB" data_type: TYPE_FP32 dims: [ 3 ] } ]
ensemble_scheduling { step [
  { model_name: "pre" input_map { key: "image" value: "IMAGE" }
    output_map { key: "pixels" value: "PIXELS" } },
  { model_name: "mean" input_map { key: "p" value: "PIXELS" }
    output_map { key: "rgb" value: "RGB" } }
] }
""")
    return mean, std


def case_jpeg(args):
    """Real JPEG and PNG files through an image pre-processor ensemble; a corrupt file is an
    error record. Solid-colour images make the expected outputs exact: (c/255 - mean) / std."""
    from PIL import Image
    repo = os.path.join(args.work, "image_repo")
    mean, std = write_image_models(repo)
    d = os.path.join(args.work, "images")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(5)
    colors = {}
    for i in range(10):
        c = tuple(int(v) for v in rng.integers(0, 256, 3))
        name = f"good{i:02d}." + ("png" if i % 3 == 0 else "jpg")
        Image.new("RGB", (int(rng.integers(40, 90)), int(rng.integers(40, 90))), c).save(
            os.path.join(d, name), quality=95)
        colors[name] = c
    with open(os.path.join(d, "corrupt.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 this is not really a JPEG")

    def run(inputs, out, batch):
        cmd = [args.inferd, "batch", "--model-repository", repo, "--model", "colors",
               "--threads", "1", "--batch-size", str(batch), "--input", inputs, "--output", out]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        expect(p.returncode == 0, f"{cmd}: {p.stderr}")
        return {r["id"]: r for r in read_records(out)}, p.stderr

    recs, log = run(os.path.join(d, "good*"), os.path.join(args.work, "jpeg_good.jsonl"), 4)
    expect("model 'pre' has no dynamic_batching" in log and "model 'mean' has no" in log, log)
    expect(len(recs) == 10, f"{len(recs)} records")
    for name, c in colors.items():
        got = np.array(recs[os.path.join(d, name)]["outputs"]["RGB"]["data"])
        want = (np.array(c) / 255.0 - mean) / std
        np.testing.assert_allclose(got, want, atol=0.05, err_msg=name)
    recs, _ = run(d, os.path.join(args.work, "jpeg_all.jsonl"), 1)
    expect(len(recs) == 11, f"{len(recs)} records")
    err = recs["corrupt.jpg"].get("error", "")  # e.g. "... truncated JPEG: the data ends ..."
    expect("step 0 ('pre')" in err and "JPEG" in err, str(recs["corrupt.jpg"]))
    expect(all("outputs" in recs[n] for n in colors), "good images next to a corrupt one")


def start_batch(args, inputs, out, stats):
    cmd = [args.inferd, "batch", "--model-repository", args.repo, "--model", "cnn",
           "--threads", "1", "--readers", "1", "--batch-size", str(BATCH), "--input", inputs,
           "--output", out, "--resume", "--stats", stats]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def whole_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def case_sigterm(args):
    inputs = os.path.join(args.work, "resume_inputs")
    if not os.path.isdir(inputs):
        write_inputs(inputs, args.items, seed=3)
    out = os.path.join(args.work, "sigterm.jsonl")
    stats = os.path.join(args.work, "sigterm_stats.jsonl")
    for f in (out, stats):
        if os.path.exists(f):
            os.remove(f)
    proc = start_batch(args, inputs, out, stats)
    deadline = time.time() + TIMEOUT_S
    while whole_lines(out) < 2 * BATCH and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    expect(proc.returncode == 1, f"exit {proc.returncode}: {err}")
    expect("interrupted by SIGTERM" in err and "--resume" in err, err)
    n = len(read_records(out))  # whole lines only
    expect(0 < n < args.items, f"{n} records after SIGTERM")
    proc = start_batch(args, inputs, out, stats)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    expect(proc.returncode == 0, err)
    expect(len(by_source(read_records(out))) == args.items, "records after resume")


def resume_reference(args, inputs, n):
    """Writes n inputs and runs them uninterrupted; returns (records by source, seconds, rate)."""
    if os.path.isdir(inputs):
        shutil.rmtree(inputs)
    write_inputs(inputs, n, seed=3)
    ref = os.path.join(args.work, "resume_ref.jsonl")
    ref_stats = os.path.join(args.work, "resume_ref_stats.jsonl")
    for f in (ref, ref_stats):
        if os.path.exists(f):
            os.remove(f)
    t0 = time.time()
    run_batch(args, "--input", inputs, "--output", ref, "--stats", ref_stats, check=0)
    full_s = time.time() - t0
    rate = json.loads(open(ref_stats).read().splitlines()[-1])["items_per_s"]
    reference = by_source(read_records(ref))
    expect(len(reference) == n, "reference run")
    return reference, full_s, rate


def case_resume(args):
    inputs = os.path.join(args.work, "resume_inputs")
    # The job must last long enough to be killed at 20 points: on a fast or quiet machine the
    # input count grows until the kill points leave at least 0.5 s (and 3 batches) of work.
    items = args.items
    reference, full_s, rate = resume_reference(args, inputs, items)
    for _ in range(3):
        if max(3 * BATCH, int(0.5 * rate)) < items / 2:
            break
        items = int(rate * 2.5) + 4 * BATCH
        reference, full_s, rate = resume_reference(args, inputs, items)
    args.items = items

    out = os.path.join(args.work, "resume.jsonl")
    stats = os.path.join(args.work, "resume_stats.jsonl")
    for f in (out, stats):
        if os.path.exists(f):
            os.remove(f)
    rng = random.Random(args.seed)
    batch_s = BATCH / rate
    # Kill points are progress points; the last ones leave at least 0.5 s of work (and 3
    # batches), so no job finishes before its kill.
    reserve = max(3 * BATCH, int(0.5 * rate))
    expect(reserve < args.items / 2, f"the model runs too fast here ({rate:.0f} items/s): "
           f"raise --items")
    targets = sorted(rng.uniform(0, args.items - reserve) for _ in range(args.kills))
    runs = []  # (pid, whole lines before, whole lines after)
    for target in targets:
        before = whole_lines(out)
        proc = start_batch(args, inputs, out, stats)
        if before >= target:
            # Kill during start-up, model load or the first batch: at the first new record at
            # the latest, so a fast machine cannot finish the little work left before the kill
            # (a blind sleep let one CI run finish its last 40 inputs first).
            deadline = time.time() + rng.uniform(0, 0.3)
            while (time.time() < deadline and whole_lines(out) == before
                   and proc.poll() is None):
                time.sleep(0.002)
        else:
            deadline = time.time() + TIMEOUT_S
            while whole_lines(out) < target and proc.poll() is None and time.time() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, batch_s))
        if proc.poll() is not None:
            raise AssertionError(f"the job finished before kill {len(runs) + 1}; exit "
                                 f"{proc.returncode}: {proc.stderr.read()}")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=TIMEOUT_S)
        runs.append((proc.pid, before, whole_lines(out)))
        if args.verbose:
            print(f"kill {len(runs)}: target {target:.0f}, lines {before} -> {runs[-1][2]}")
    proc = start_batch(args, inputs, out, stats)
    _, err = proc.communicate(timeout=TIMEOUT_S)
    expect(proc.returncode == 0, err)

    final = by_source(read_records(out))  # also asserts one record per source
    expect(set(final) == set(reference), "final sources differ from the uninterrupted run's")
    for source, rec in final.items():
        expect("outputs" in rec, f"{source}: {rec}")
        np.testing.assert_allclose(rec["outputs"]["y"]["data"],
                                   reference[source]["outputs"]["y"]["data"],
                                   rtol=1e-4, atol=1e-5)
    inferred = {}
    for line in open(stats):
        e = json.loads(line)
        if e["event"] == "start":
            pid = e["pid"]
        elif e["event"] == "inferred":
            inferred[pid] = inferred.get(pid, 0) + 1
    total = sum(inferred.values())
    worst = 0
    for pid, before, after in runs:
        redone = inferred.get(pid, 0) - (after - before)
        expect(redone <= BATCH, f"run {pid} lost {redone} answered items (> one batch of {BATCH})")
        worst = max(worst, redone)
    expect(total - args.items <= args.kills * BATCH, "total redone")
    print(f"resume: {args.kills} kills, {args.items} inputs, {total} engine answers in all "
          f"({total - args.items} redone, at most {worst} per kill; batch {BATCH}); "
          f"an uninterrupted run took {full_s:.1f} s ({rate:.0f} items/s)")


CASES = {"outputs": case_outputs, "errors": case_errors, "existing": case_existing,
         "bad": case_bad, "jpeg": case_jpeg,
         "sigterm": case_sigterm, "resume": case_resume}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--items", type=int, default=240)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    args.work = os.path.abspath(args.work_dir)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    args.repo = os.path.join(args.work, "repo")
    write_model(args.repo)
    print(f"seed {args.seed}")
    names = args.only.split(",") if args.only else list(CASES)
    failed = 0
    for name in names:
        t0 = time.time()
        try:
            CASES[name](args)
            print(f"ok   {name} ({time.time() - t0:.1f} s)")
        except Exception as e:  # report every case, then fail
            failed += 1
            print(f"FAIL {name}: {e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
