#!/usr/bin/python3
"""Bad-input tests for the `inferd` command line.

Every case must end with exit code 1 (never a signal, never a hang) and exactly one line on stderr
starting with "inferd: error: ". Models are generated at test time with onnx.helper under
--work-dir (never committed). A few good-path checks make sure the bad cases fail for the right
reason. Run by ctest (see CMakeLists.txt), or by hand:
    /usr/bin/python3 tests/cli/cli_test.py --inferd build/inferd --work-dir /tmp/cli_test
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

TIMEOUT_S = 60


def make_models(d):
    """Writes the test models into d and returns their paths by key."""
    paths = {}
    # y = Relu(x + b), x: float32[batch, 4]; b an initializer.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y/out:0", TensorProto.FLOAT, ["batch", 4])
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [0.5, -0.5, 1.0, -1.0])
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y/out:0"])],
        "add_relu", [x], [y], [b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    paths["good"] = os.path.join(d, "add_relu.onnx")
    onnx.save(m, paths["good"])

    # An op from an unknown domain: passes the checker, but no kernel exists.
    xu = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    yu = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    gu = helper.make_graph([helper.make_node("FrobnicateOp", ["x"], ["y"], domain="com.example")],
                           "unsupported", [xu], [yu])
    mu = helper.make_model(gu, opset_imports=[helper.make_opsetid("", 13),
                                              helper.make_opsetid("com.example", 1)])
    paths["unsupported"] = os.path.join(d, "unsupported.onnx")
    onnx.save(mu, paths["unsupported"])

    # y = x · W, x: float32[batch, 64], W [64, 32]: 2·batch·64·32 FLOPs for the profiler's roofline.
    xm = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    ym = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 32],
                           np.random.default_rng(1).standard_normal(64 * 32).astype(np.float32))
    gm = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul", [xm], [ym],
                           [w])
    paths["matmul"] = os.path.join(d, "matmul.onnx")
    onnx.save(helper.make_model(gm, opset_imports=[helper.make_opsetid("", 13)]), paths["matmul"])

    data = open(paths["good"], "rb").read()
    paths["truncated"] = os.path.join(d, "truncated.onnx")
    open(paths["truncated"], "wb").write(data[: len(data) // 2])
    paths["random"] = os.path.join(d, "random.onnx")
    open(paths["random"], "wb").write(np.random.default_rng(0).bytes(4096))
    paths["empty"] = os.path.join(d, "empty.onnx")
    open(paths["empty"], "wb").write(b"")

    np.save(os.path.join(d, "x_good.npy"), np.ones((3, 4), np.float32))
    np.save(os.path.join(d, "x_wrong_shape.npy"), np.ones((3, 5), np.float32))
    np.save(os.path.join(d, "x_wrong_rank.npy"), np.ones((12,), np.float32))
    np.save(os.path.join(d, "x_wrong_dtype.npy"), np.ones((3, 4), np.int64))
    np.save(os.path.join(d, "x_fortran.npy"), np.asfortranarray(np.ones((3, 4), np.float32)))
    np.save(os.path.join(d, "x_bigendian.npy"), np.ones((3, 4), ">f4"))
    good_npy = open(os.path.join(d, "x_good.npy"), "rb").read()
    open(os.path.join(d, "x_truncated.npy"), "wb").write(good_npy[:-5])
    open(os.path.join(d, "x_garbage.npy"), "wb").write(b"this is not numpy data\n")
    return paths


def run(inferd, args):
    try:
        p = subprocess.run([inferd] + args, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None
    return p


def check_profile(inferd, matmul, d, expect_ok, failures):
    """bench --profile's roofline (machine peaks, FLOPs per op) and quantize's BF16 note."""
    p = expect_ok("bench --profile --json", ["bench", matmul, "--batch", "8", "--iterations", "3",
                                             "--warmup", "1", "--threads", "1", "--profile",
                                             "--json"])
    if p is not None and p.returncode == 0:
        r = json.loads(p.stdout)
        peaks = r.get("peaks", {})
        ops = {o["op_type"]: o for o in r.get("profile", [])}
        mm = next((o for name, o in ops.items() if "MatMul" in name), None)
        if not (peaks.get("fp32_gflops", 0) > 0 and peaks.get("int8_gops", 0) > 0
                and peaks.get("mem_read_gbps", 0) > 0 and peaks.get("threads") == 1):
            failures.append(f"bench --profile --json: bad peaks {peaks}")
        if mm is None or mm["bound"] != "compute" or mm["peak"] != "FP32" \
                or mm["flop_per_run"] != 2 * 8 * 64 * 32 or mm["rate"] <= 0:
            failures.append(f"bench --profile --json: bad MatMul figures {mm} in {ops}")
        if not r.get("slowest_nodes") or not r.get("cpu", {}).get("dnnl_isa"):
            failures.append("bench --profile --json: no slowest_nodes or cpu.dnnl_isa")
    expect_ok("bench --profile text", ["bench", matmul, "--iterations", "2", "--threads", "1",
                                       "--profile"], "% of FP32 peak")
    # --precision bf16 says that a CPU without native BF16 computes the bf16 layers in FP32.
    flags = open("/proc/cpuinfo").read().split()
    p = expect_ok("quantize --precision bf16", ["quantize", matmul, "-o",
                                                os.path.join(d, "matmul_bf16.onnx"),
                                                "--precision", "bf16"], "wrote")
    if p is not None and p.returncode == 0:
        noted = "no native BF16" in p.stdout
        if noted != ("avx512_bf16" not in flags):
            failures.append(f"quantize bf16 note {'shown' if noted else 'missing'} on a CPU "
                            f"{'with' if 'avx512_bf16' in flags else 'without'} avx512_bf16: "
                            f"{p.stdout!r}")


def check_moe_quantize(moe, d, expect_ok, expect_error, failures):
    """`inferd quantize --precision int8|int4` on a mixture-of-experts folder (issue 16): every
    ai.inferd.MoE node becomes ai.inferd.MoENBits, router float32; experts that cannot be quantized
    fail naming the tensor or the node."""
    for precision, extra, needle in (("int8", [], "MoE down (int8, group 32, 8 experts"),
                                     ("int4", ["--asymmetric", "--group-size", "64"],
                                      "MoE gate (int4, group 64, 8 experts")):
        out = os.path.join(d, f"test-moe-{precision}")
        p = expect_ok(f"quantize an MoE folder to {precision}",
                      ["quantize", moe, "-o", out, "--precision", precision, "--report", "-"]
                      + extra, needle)
        if p is None or p.returncode != 0:
            continue
        m = onnx.load(os.path.join(out, "model.onnx"))
        ops = [n.op_type for n in m.graph.node]
        inits = {t.name: t for t in m.graph.initializer}
        if ops.count("MoENBits") != 2 or "MoE" in ops:
            failures.append(f"{precision}: expected 2 MoENBits and no MoE nodes, got "
                            f"{ops.count('MoENBits')} / {ops.count('MoE')}")
        for n in m.graph.node:
            if n.op_type != "MoENBits":
                continue
            attrs = {x.name: x.i for x in n.attribute}
            if attrs.get("bits") != int(precision[3:]):
                failures.append(f"{precision}: {n.name} has bits {attrs.get('bits')}")
            want = 11 if "--asymmetric" in extra else 8
            if len(n.input) != want:
                failures.append(f"{precision}: {n.name} has {len(n.input)} inputs, want {want}")
            if inits[n.input[1]].data_type != TensorProto.FLOAT:
                failures.append(f"{precision}: the router of {n.name} is not float32")
        with open(os.path.join(out, "config.json")) as f:
            q = json.load(f).get("quantization_config", {})
        if q.get("bits") != int(precision[3:]):
            failures.append(f"{precision}: config.json quantization_config {q}")

    def edited(name, edit):
        """A copy of test-moe whose first MoE node's expert weights `edit` changes."""
        out = os.path.join(d, name)
        os.makedirs(out, exist_ok=True)
        m = onnx.load(os.path.join(moe, "model.onnx"))
        node = next(n for n in m.graph.node if n.op_type == "MoE")
        inits = {t.name: t for t in m.graph.initializer}
        edit(node, inits)
        onnx.save(m, os.path.join(out, "model.onnx"))
        with open(os.path.join(moe, "config.json")) as src, \
                open(os.path.join(out, "config.json"), "w") as dst:
            dst.write(src.read())
        return out, node.name

    def nan_up(node, inits):
        t = inits[node.input[3]]
        w = onnx.numpy_helper.to_array(t).copy()
        w.flat[7] = np.nan
        t.CopyFrom(onnx.numpy_helper.from_array(w, t.name))

    def short_down(node, inits):
        t = inits[node.input[4]]
        w = onnx.numpy_helper.to_array(t)[:, :-1, :].copy()
        t.CopyFrom(onnx.numpy_helper.from_array(w, t.name))

    bad, _ = edited("moe_nan_expert", nan_up)
    expect_error("quantize an MoE folder with a NaN expert weight",
                 ["quantize", bad, "-o", bad + "-q", "--precision", "int8"], "non-finite")
    bad, node = edited("moe_short_down", short_down)
    expect_error("quantize an MoE folder whose experts disagree",
                 ["quantize", bad, "-o", bad + "-q", "--precision", "int4"],
                 f"MoE node '{node}': expert weights")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--gen-models", default=None,
                    help="build/models/gen: with test-moe there, the MoE folder quantize cases")
    a = ap.parse_args()
    d = a.work_dir
    os.makedirs(d, exist_ok=True)
    paths = make_models(d)
    npy = lambda name: os.path.join(d, name)  # noqa: E731
    out_dir = os.path.join(d, "out")

    failures = []

    def expect_error(label, args, needle=None, code=1):
        p = run(a.inferd, args)
        if p is None:
            failures.append(f"{label}: hung (killed after {TIMEOUT_S} s)")
            return
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        problems = []
        if p.returncode < 0:
            problems.append(f"killed by signal {-p.returncode}")
        elif p.returncode not in (code if isinstance(code, tuple) else (code,)):
            problems.append(f"exit code {p.returncode}, expected {code}")
        # Informational "note:" lines may precede the error; the error itself is one line.
        errors = [l for l in lines if not l.startswith("note: ")]
        if len(errors) != 1 or not errors[0].startswith("inferd: error: "):
            problems.append(f"stderr is not one 'inferd: error:' line: {p.stderr!r}")
        elif needle and needle.lower() not in errors[0].lower():
            problems.append(f"message lacks {needle!r}: {errors[0]!r}")
        lines = errors
        status = "ok  " if not problems else "FAIL"
        print(f"{status} {label}: exit {p.returncode}: {lines[0] if lines else ''}")
        if problems:
            failures.append(f"{label}: " + "; ".join(problems))

    def expect_ok(label, args, needle=None):
        p = run(a.inferd, args)
        if p is None or p.returncode != 0 or (needle and needle not in p.stdout):
            failures.append(f"{label}: expected success, got "
                            f"{'a hang' if p is None else (p.returncode, p.stdout, p.stderr)}")
            print(f"FAIL {label}")
        else:
            print(f"ok   {label}")
        return p

    good = paths["good"]
    # Good paths first: the bad cases below must fail for their own reason.
    expect_ok("run with --input", ["run", good, "--input", f"x={npy('x_good.npy')}",
                                    "--output-dir", out_dir], "y/out:0")
    saved = os.path.join(out_dir, "y_out_0.npy")
    if not os.path.exists(saved):
        failures.append("run: output file y_out_0.npy (sanitized name) missing")
    else:
        got = np.load(saved)
        want = np.maximum(np.ones((3, 4), np.float32) + np.array([0.5, -0.5, 1, -1], np.float32), 0)
        if got.shape != want.shape or not np.allclose(got, want):
            failures.append(f"run: wrong output {got}")
    expect_ok("run with random inputs", ["run", good, "--threads", "1"], "float32[1, 4]")
    expect_ok("inspect", ["inspect", good], "every op is supported")
    expect_ok("inspect lists unsupported ops", ["inspect", paths["unsupported"]], "FrobnicateOp")
    expect_ok("inspect names the CPU and its ISA", ["inspect", good], "oneDNN ISA")
    check_profile(a.inferd, paths["matmul"], d, expect_ok, failures)
    for sub in ["run", "inspect", "serve", "optimize", "quantize", "bench"]:
        expect_ok(f"{sub} --help", [sub, "--help"])
    expect_ok("--version", ["--version"], "inferd")

    expect_error("missing model file", ["run", npy("no_such_model.onnx")], "no_such_model")
    expect_error("missing model file (inspect)", ["inspect", npy("no_such_model.onnx")])
    expect_error("model is a folder", ["run", d])
    expect_error("truncated onnx", ["run", paths["truncated"]], "truncated.onnx")
    expect_error("random-bytes onnx", ["run", paths["random"]], "random.onnx")
    expect_error("random-bytes onnx (inspect)", ["inspect", paths["random"]])
    expect_error("empty onnx", ["run", paths["empty"]])
    expect_error("unsupported op", ["run", paths["unsupported"]], "FrobnicateOp")
    expect_error("unknown input name", ["run", good, "--input", f"nope={npy('x_good.npy')}"],
                 "unknown input 'nope'")
    expect_error("input without '='", ["run", good, "--input", npy("x_good.npy")])
    expect_error("input given twice", ["run", good, "--input", f"x={npy('x_good.npy')}",
                                       "--input", f"x={npy('x_good.npy')}"], "twice")
    expect_error("wrong shape", ["run", good, "--input", f"x={npy('x_wrong_shape.npy')}"], "shape")
    expect_error("wrong rank", ["run", good, "--input", f"x={npy('x_wrong_rank.npy')}"], "shape")
    expect_error("wrong dtype", ["run", good, "--input", f"x={npy('x_wrong_dtype.npy')}"], "int64")
    expect_error("missing npy", ["run", good, "--input", f"x={npy('nope.npy')}"], "nope.npy")
    expect_error("truncated npy", ["run", good, "--input", f"x={npy('x_truncated.npy')}"],
                 "x_truncated.npy")
    expect_error("garbage npy", ["run", good, "--input", f"x={npy('x_garbage.npy')}"], "magic")
    expect_error("fortran-order npy", ["run", good, "--input", f"x={npy('x_fortran.npy')}"],
                 "fortran")
    expect_error("big-endian npy", ["run", good, "--input", f"x={npy('x_bigendian.npy')}"],
                 "big-endian")
    expect_error("output dir is a file", ["run", good, "--output-dir", paths["good"]])
    # Subcommands still being written either say "not implemented yet" (exit 1) or, once they
    # exist, reject the missing arguments (exit 2): either way one error line, no crash.
    for sub in ["serve", "optimize", "quantize", "bench"]:
        expect_error(f"{sub} without arguments", [sub], code=(1, 2))
    # Serving limits (issue 15): a bad value is refused before anything starts.
    expect_error("serve --max-load-time-secs 0",
                 ["serve", "--model-repository", d, "--max-load-time-secs", "0"],
                 "--max-load-time-secs", code=2)
    expect_error("serve --max-warmup-bytes 0",
                 ["serve", "--model-repository", d, "--max-warmup-bytes", "0"], "size", code=1)
    # Weight-only int4/int8 of decoder folders (issue 16): a folder that is not a decoder, a
    # precision or group size they do not take, a corrupt config.
    qdir = os.path.join(d, "not_a_decoder")
    os.makedirs(qdir, exist_ok=True)
    for f in ("config.json", "model.onnx"):  # a rerun in the same work dir starts empty
        if os.path.exists(os.path.join(qdir, f)):
            os.remove(os.path.join(qdir, f))
    qout = os.path.join(d, "quantized_out")
    expect_error("quantize a folder without config.json",
                 ["quantize", qdir, "-o", qout, "--precision", "int4"], "not a decoder model folder")
    with open(os.path.join(qdir, "config.json"), "w") as f:
        f.write("{not json")
    with open(os.path.join(qdir, "model.onnx"), "wb") as f:
        f.write(open(paths["good"], "rb").read())
    expect_error("quantize a decoder folder with a corrupt config.json",
                 ["quantize", qdir, "-o", qout, "--precision", "int4"], "not a JSON object")
    with open(os.path.join(qdir, "config.json"), "w") as f:
        f.write("{}")
    expect_error("quantize a decoder folder to bf16", ["quantize", qdir, "-o", qout,
                                                        "--precision", "bf16"], "int4 or int8")
    expect_error("quantize a decoder folder, group size 48",
                 ["quantize", qdir, "-o", qout, "--precision", "int4", "--group-size", "48"],
                 "group size must be 32, 64 or 128")
    expect_error("quantize a folder whose model has no MatMul",
                 ["quantize", qdir, "-o", qout, "--precision", "int8"], "no MatMul")
    expect_error("--asymmetric on a model file",
                 ["quantize", good, "-o", qout + ".onnx", "--precision", "int4", "--asymmetric"],
                 "decoder folders")
    moe = os.path.join(a.gen_models or "", "test-moe")
    if a.gen_models and os.path.isfile(os.path.join(moe, "config.json")):
        check_moe_quantize(moe, d, expect_ok, expect_error, failures)
    else:
        print("skip MoE folder quantize cases (no test-moe; make gen-models)")
    # Usage errors exit with 2.
    expect_error("no subcommand", [], code=2)
    expect_error("unknown subcommand", ["frobnicate"], "frobnicate", code=2)
    expect_error("run without model", ["run"], code=2)
    expect_error("negative threads", ["run", good, "--threads", "-3"], code=2)
    expect_error("zero runs", ["run", good, "--runs", "0"], "--runs", code=2)
    expect_ok("repeated runs on a poisoned arena", ["run", good, "--runs", "3", "--poison-arena"])
    expect_error("unknown flag", ["inspect", good, "--bogus"], code=2)
    # bench --generate (the generation benchmark): usage errors exit 2, bad values 1.
    gen = ["bench", "--generate", "--url", "http://127.0.0.1:1", "--model", "m"]
    expect_error("bench --generate without --url", ["bench", "--generate", "--model", "m"],
                 "--url", code=2)
    expect_error("bench --generate with a KServe flag", gen + ["--grpc-channels", "2"],
                 "--grpc-channels", code=2)
    expect_error("generation flag without --generate",
                 ["bench", "--url", "http://127.0.0.1:1", "--model", "m", "--num-prompts", "3"],
                 "--generate", code=2)
    expect_error("bench --generate bad length range", gen + ["--output-len", "9:2"],
                 "--output-len", code=1)
    expect_error("bench --generate unreachable server", gen + ["--num-prompts", "1"], "warmup",
                 code=1)

    if failures:
        print(f"\n{len(failures)} CLI test(s) failed:")
        for f in failures:
            print("  " + f)
        return 1
    print("\nall CLI tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
