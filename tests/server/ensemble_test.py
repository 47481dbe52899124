#!/usr/bin/env python3
"""End-to-end test of ensembles (Triton's platform "ensemble") through `inferd serve`.

Writes a repository of small ONNX models built here with onnx.helper and ensembles over them:
  chain     IN -> double -> neg -> OUT (OUT = -2 IN), FP32, batching
  fan       IN -> double (A) and neg (B) in parallel -> sum -> OUT (= IN); A is an output too
  text      TEXT (BYTES) -> str_to_num -> V (FP32) -> num_to_str -> OUT (BYTES), no batching
  text_classify  RAW (BYTES) -> str_to_num -> neg_flat -> SCORES with labels: the classification
            extension on an ensemble output (raw bytes in, "score:index:label" strings out)
  bad_cycle two steps feeding each other (must fail its load, naming the steps)
and drives them over HTTP (JSON and the binary extension) and gRPC: metadata, config,
inference, a failing step (400 naming the step), statistics (the ensemble's own entry and each
composing model's), metrics (promtool). A second server in explicit model-control mode checks that
loading an ensemble loads its composing models and that unloading one of them makes the
ensemble's requests fail clearly (503 naming the step) while the server keeps serving.
Reuses server_test.py's Server harness.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys
import threading

import onnx
from onnx import TensorProto, helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, run_groups, expect_error, failures, grpc_client  # noqa: E402

F = TensorProto.FLOAT


def save(root, name, nodes, inputs, outputs, config=None):
    g = helper.make_graph(nodes, name, inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(f"{root}/{name}/1")
    onnx.save(m, f"{root}/{name}/1/model.onnx")
    if config:
        with open(f"{root}/{name}/config.pbtxt", "w") as f:
            f.write(config)


def vi(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


def step(model, inputs, outputs):
    ins = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    outs = " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1 {ins} {outs} }}'


def ensemble(root, name, header, steps):
    os.makedirs(f"{root}/{name}/1")  # Triton wants a version folder, empty for an ensemble
    with open(f"{root}/{name}/config.pbtxt", "w") as f:
        f.write(f'name: "{name}"\nplatform: "ensemble"\n{header}\n'
                f'ensemble_scheduling {{ step [ {", ".join(steps)} ] }}\n')


FP32_IO = ('max_batch_size: 8\n'
           'input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')


def write_models(root):
    """The composing models only."""
    if os.path.exists(root):
        shutil.rmtree(root)
    batched = ('max_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
               'output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
               'dynamic_batching { max_queue_delay_microseconds: 100 }\n')
    save(root, "double", [helper.make_node("Add", ["x", "x"], ["y"])],
         [vi("x", F, ["N", "L"])], [vi("y", F, ["N", "L"])], batched)
    save(root, "neg", [helper.make_node("Neg", ["x"], ["y"])],
         [vi("x", F, ["N", "L"])], [vi("y", F, ["N", "L"])], batched)
    save(root, "sum", [helper.make_node("Add", ["a", "b"], ["sum"])],
         [vi("a", F, ["N", "L"]), vi("b", F, ["N", "L"])], [vi("sum", F, ["N", "L"])])
    save(root, "neg_flat", [helper.make_node("Neg", ["x"], ["y"])],
         [vi("x", F, ["L"])], [vi("y", F, ["L"])], "max_batch_size: 0\n")
    save(root, "str_to_num", [helper.make_node("Cast", ["s"], ["v"], to=F)],
         [vi("s", TensorProto.STRING, ["L"])], [vi("v", F, ["L"])])
    save(root, "num_to_str", [helper.make_node("Cast", ["v"], ["s"], to=TensorProto.STRING)],
         [vi("v", F, ["L"])], [vi("s", TensorProto.STRING, ["L"])])


def write_repository(root, bad=True):
    write_models(root)
    ensemble(root, "chain", FP32_IO + 'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]',
             [step("double", {"x": "IN"}, {"y": "t"}), step("neg", {"x": "t"}, {"y": "OUT"})])
    ensemble(root, "fan", FP32_IO + 'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] },'
             ' { name: "A" data_type: TYPE_FP32 dims: [ -1 ] } ]',
             [step("double", {"x": "IN"}, {"y": "A"}), step("neg", {"x": "IN"}, {"y": "B"}),
              step("sum", {"a": "A", "b": "B"}, {"sum": "OUT"})])
    ensemble(root, "text", 'max_batch_size: 0\n'
             'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
             'output [ { name: "V" data_type: TYPE_FP32 dims: [ -1 ] },'
             ' { name: "OUT" data_type: TYPE_STRING dims: [ -1 ] } ]',
             [step("str_to_num", {"s": "TEXT"}, {"v": "V"}),
              step("num_to_str", {"v": "V"}, {"s": "OUT"})])
    # Raw bytes in, classification strings out (ensemble_image_client.py's request shape, with a
    # plain chain instead of image decoding): labels on the ensemble's own output.
    ensemble(root, "text_classify", 'max_batch_size: 0\n'
             'input [ { name: "RAW" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
             'output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ -1 ] '
             'label_filename: "labels.txt" } ]',
             [step("str_to_num", {"s": "RAW"}, {"v": "V"}), step("neg_flat", {"x": "V"}, {"y": "SCORES"})])
    with open(f"{root}/text_classify/labels.txt", "w") as f:
        f.write("cat\ndog\nbird\n")
    if bad:
        ensemble(root, "bad_cycle", FP32_IO + 'output [ { name: "OUT" data_type: TYPE_FP32 '
                 'dims: [ -1 ] } ]',
                 [step("double", {"x": "t2"}, {"y": "t1"}), step("neg", {"x": "t1"}, {"y": "t2"}),
                  step("neg", {"x": "IN"}, {"y": "OUT"})])


def infer_json(s, base, model, inputs, outputs=None):
    body = {"inputs": inputs}
    if outputs:
        body["outputs"] = [{"name": n} for n in outputs]
    return s.post(f"{base}/v2/models/{model}/infer", json=body)


def out(resp, name):
    for o in resp.json().get("outputs", []):
        if o["name"] == name:
            return o
    return None


def http_tests(base):
    s = requests.Session()
    md = s.get(f"{base}/v2/models/chain").json()
    check(md.get("platform") == "ensemble" and md["inputs"][0]["name"] == "IN" and
          md["inputs"][0]["shape"] == [-1, -1] and md["outputs"][0]["datatype"] == "FP32",
          f"ensemble metadata {md}")
    check(s.get(f"{base}/v2/models/chain/ready").status_code == 200, "ensemble ready")
    cfg = s.get(f"{base}/v2/models/chain/config").json()
    check(cfg.get("platform") == "ensemble" and
          [st["model_name"] for st in cfg["ensemble_scheduling"]["step"]] == ["double", "neg"],
          f"ensemble config {cfg}")

    r = infer_json(s, base, "chain", [{"name": "IN", "datatype": "FP32", "shape": [2, 3],
                                       "data": [1, 2, 3, 4, 5, 6]}])
    o = out(r, "OUT") if r.status_code == 200 else None
    check(o is not None and o["shape"] == [2, 3] and o["data"] == [-2, -4, -6, -8, -10, -12] and
          r.json().get("model_name") == "chain", f"chain infer: {r.status_code} {r.text[:300]}")

    r = infer_json(s, base, "fan", [{"name": "IN", "datatype": "FP32", "shape": [1, 2],
                                     "data": [1.5, -4]}])
    check(r.status_code == 200 and out(r, "OUT")["data"] == [1.5, -4] and
          out(r, "A")["data"] == [3, -8], f"fan-out/fan-in: {r.status_code} {r.text[:300]}")
    r = infer_json(s, base, "fan", [{"name": "IN", "datatype": "FP32", "shape": [1, 1],
                                     "data": [2]}], outputs=["A"])
    check(r.status_code == 200 and [o["name"] for o in r.json()["outputs"]] == ["A"],
          f"requested output only: {r.text[:300]}")

    # Concurrent requests through the ensemble (the steps batch in their own models).
    results = {}

    def send(k):
        rr = requests.post(f"{base}/v2/models/chain/infer", json={"inputs": [
            {"name": "IN", "datatype": "FP32", "shape": [1, k + 1], "data": [k] * (k + 1)}]})
        results[k] = (rr.status_code, rr.json())

    threads = [threading.Thread(target=send, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (code, js) in sorted(results.items()):
        got = js.get("outputs", [{}])[0].get("data") if code == 200 else js
        check(code == 200 and got == [-2 * k] * (k + 1), f"concurrent chain request {k}: {got}")

    # Binary extension in and out.
    raw = struct.pack("<3f", 1, 2, 3)
    header = json.dumps({"inputs": [{"name": "IN", "datatype": "FP32", "shape": [1, 3],
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}]})
    r = s.post(f"{base}/v2/models/chain/infer", data=header.encode() + raw,
               headers={"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"})
    ok = r.status_code == 200
    if ok:
        n = int(r.headers["Inference-Header-Content-Length"])
        ok = struct.unpack("<3f", r.content[n:n + 12]) == (-2, -4, -6)
    check(ok, f"binary chain infer: {r.status_code} {r.content[:200]!r}")

    # BYTES in, BYTES out, through a numeric tensor.
    r = infer_json(s, base, "text", [{"name": "TEXT", "datatype": "BYTES", "shape": [3],
                                      "data": ["1.5", "-2", "0.25"]}])
    check(r.status_code == 200 and out(r, "V")["data"] == [1.5, -2, 0.25] and
          out(r, "OUT")["datatype"] == "BYTES" and out(r, "OUT")["data"] == ["1.5", "-2", "0.25"],
          f"BYTES ensemble: {r.status_code} {r.text[:300]}")
    # A failing step: 400 naming the step; the next request is fine.
    r = infer_json(s, base, "text", [{"name": "TEXT", "datatype": "BYTES", "shape": [1],
                                      "data": ["twelve"]}])
    expect_error(r, 400, "ensemble 'text' step 0 ('str_to_num')", "failing step named")
    r = infer_json(s, base, "text", [{"name": "TEXT", "datatype": "BYTES", "shape": [1],
                                      "data": ["7"]}])
    check(r.status_code == 200, f"request after a failed one: {r.status_code}")
    # A request that does not fit the ensemble.
    r = infer_json(s, base, "chain", [{"name": "x", "datatype": "FP32", "shape": [1, 1],
                                       "data": [1]}])
    expect_error(r, 400, "unexpected input 'x'", "wrong ensemble input name")

    # Classification extension on an ensemble output, binary BYTES in and out.
    wire = b"".join(struct.pack("<I", len(v)) + v for v in (b"3", b"-1", b"0.5"))
    header = json.dumps({"inputs": [{"name": "RAW", "datatype": "BYTES", "shape": [3],
                                     "parameters": {"binary_data_size": len(wire)}}],
                         "outputs": [{"name": "SCORES", "parameters": {"binary_data": True,
                                                                        "classification": 2}}]})
    r = s.post(f"{base}/v2/models/text_classify/infer", data=header.encode() + wire,
               headers={"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"})
    got = []
    if r.status_code == 200:
        n = int(r.headers["Inference-Header-Content-Length"])
        meta = json.loads(r.content[:n])["outputs"][0]
        data, pos = r.content[n:], 0
        while pos < len(data):
            (k,) = struct.unpack_from("<I", data, pos)
            got.append(data[pos + 4:pos + 4 + k].decode())
            pos += 4 + k
        check(meta["datatype"] == "BYTES" and meta["shape"] == [2], f"classified meta {meta}")
    check(got == ["1.000000:1:dog", "-0.500000:2:bird"],
          f"classification of an ensemble output: {r.status_code} {got} {r.content[:200]!r}")

    # The bad ensemble failed its load with a message naming the steps; the others serve.
    r = s.post(f"{base}/v2/repository/index", json={})
    rows = {(e["name"], e.get("reason", "")) for e in r.json()} if r.status_code == 200 else set()
    check(any(n == "bad_cycle" and "cycle: step 0 ('double') needs step 1 ('neg')" in why
              for n, why in rows), f"bad ensemble in the index: {rows}")
    check(s.get(f"{base}/v2/models/bad_cycle/ready").status_code != 200, "bad ensemble not ready")

    # Statistics: the ensemble's own entry, and each composing model's separately.
    st = s.get(f"{base}/v2/models/chain/stats").json()["model_stats"]
    check(len(st) == 1 and st[0]["name"] == "chain" and st[0]["inference_count"] >= 10 and
          st[0]["inference_stats"]["success"]["count"] >= 10 and
          st[0]["inference_stats"]["fail"]["count"] >= 1, f"ensemble statistics {st}")
    st = s.get(f"{base}/v2/models/neg/stats").json()["model_stats"]
    check(st[0]["inference_stats"]["success"]["count"] >= 12, f"composing model statistics {st}")


def metrics_tests(metrics_url):
    text = requests.get(f"{metrics_url}/metrics").text
    check(re.search(r'inferd_request_success_total\{model="chain",version="1"\} [1-9]', text)
          is not None, "ensemble success counter")
    check(re.search(r'inferd_request_success_total\{model="double",version="1"\} [1-9]', text)
          is not None, "composing model success counter")
    if shutil.which("promtool"):
        import subprocess
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
        check(p.returncode == 0, f"promtool: {p.stdout} {p.stderr}")


def grpc_tests(target, proto_dir, work):
    import grpc
    pb, ch, unary = grpc_client(target, proto_dir, work)
    md = unary("ModelMetadata", pb.ModelMetadataRequest(name="chain"), pb.ModelMetadataResponse)
    check(md.platform == "ensemble" and md.inputs[0].name == "IN", f"grpc ensemble metadata {md}")
    cfg = unary("ModelConfig", pb.ModelConfigRequest(name="fan"), pb.ModelConfigResponse)
    check(len(cfg.config.ensemble_scheduling.step) == 3, "grpc ensemble config")
    req = pb.ModelInferRequest(model_name="chain", id="g1")
    req.inputs.add(name="IN", datatype="FP32", shape=[1, 2])
    req.raw_input_contents.append(struct.pack("<2f", 0.5, -1))
    res = unary("ModelInfer", req, pb.ModelInferResponse)
    check(res.id == "g1" and res.model_name == "chain" and
          struct.unpack("<2f", res.raw_output_contents[0]) == (-1, 2), f"grpc chain infer {res}")
    req = pb.ModelInferRequest(model_name="text")
    req.inputs.add(name="TEXT", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(
        [b"3", b"-0.5"])
    res = unary("ModelInfer", req, pb.ModelInferResponse)
    names = [o.name for o in res.outputs]
    raw = res.raw_output_contents[names.index("OUT")] if "OUT" in names else b""
    check(raw == struct.pack("<I", 1) + b"3" + struct.pack("<I", 4) + b"-0.5",
          f"grpc BYTES ensemble {res}")
    req = pb.ModelInferRequest(model_name="text")
    req.inputs.add(name="TEXT", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
    try:
        unary("ModelInfer", req, pb.ModelInferResponse)
        check(False, "grpc failing step: expected INVALID_ARGUMENT")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "step 0 ('str_to_num')" in e.details(),
              f"grpc failing step: {e.code()} {e.details()}")
    st = unary("ModelStatistics", pb.ModelStatisticsRequest(name="chain"),
               pb.ModelStatisticsResponse)
    check(st.model_stats[0].inference_stats.success.count >= 1, f"grpc ensemble statistics {st}")


def explicit_tests(inferd, work):
    repo = os.path.join(work, "explicit_repo")
    write_repository(repo, bad=False)
    server = Server(inferd, repo, os.path.join(work, "explicit.log"), grpc=False,
                    args=["--threads", "1", "--model-control-mode", "explicit"])
    try:
        s = requests.Session()
        base = server.http
        check(s.get(f"{base}/v2/models/double/ready").status_code != 200, "nothing loaded yet")
        r = s.post(f"{base}/v2/repository/models/chain/load", json={})
        check(r.status_code == 200, f"load ensemble: {r.status_code} {r.text}")
        for m in ("chain", "double", "neg"):
            check(s.get(f"{base}/v2/models/{m}/ready").status_code == 200,
                  f"{m} ready after loading the ensemble")
        check(s.get(f"{base}/v2/models/sum/ready").status_code != 200, "sum is not a step")
        body = [{"name": "IN", "datatype": "FP32", "shape": [1, 1], "data": [1]}]
        check(infer_json(s, base, "chain", body).status_code == 200, "chain after load")
        r = s.post(f"{base}/v2/repository/models/neg/unload", json={})
        check(r.status_code == 200, f"unload composing model: {r.status_code} {r.text}")
        r = infer_json(s, base, "chain", body)
        expect_error(r, 503, "ensemble 'chain' step 1 ('neg')", "composing model unloaded")
        check(s.get(f"{base}/v2/health/live").status_code == 200, "server alive after that")
        r = s.post(f"{base}/v2/repository/models/neg/load", json={})
        check(r.status_code == 200 and infer_json(s, base, "chain", body).status_code == 200,
              "chain serves again once its model is back")
    finally:
        rc = server.stop()
    check(rc == 0, f"explicit-mode server: clean shutdown (exit code {rc})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repo")
    write_repository(repo)
    # bad_cycle is unavailable (so /v2/health/ready is false); the others serve.
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"))
    run_groups(server, (("http", lambda: http_tests(server.http)),
                        ("metrics", lambda: metrics_tests(server.metrics)),
                        ("grpc", lambda: grpc_tests(server.grpc, args.proto_dir, args.work_dir))))
    try:
        explicit_tests(args.inferd, args.work_dir)
    except Exception as e:
        check(False, f"explicit-mode tests raised {type(e).__name__}: {e}")
    if failures:
        print(f"\n{len(failures)} ensemble check(s) failed (logs in {args.work_dir})")
        return 1
    print("all ensemble checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
