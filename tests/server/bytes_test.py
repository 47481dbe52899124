#!/usr/bin/env python3
"""End-to-end test of BYTES (string) tensors through `inferd serve`.

Writes a repository with three string models built here with onnx.helper:
  str_identity  BYTES [N, -1] -> BYTES, dynamic batching (requests of different lengths are
                batched and padded with empty strings, then cropped back)
  str_to_num    BYTES [-1] -> FP32 (Cast from string), no batching
  num_to_str    FP32 [-1] -> BYTES (Cast to string), no batching
and round-trips strings with the awkward cases (empty, non-ASCII UTF-8, embedded NULs) over
HTTP JSON, the HTTP binary extension (4-byte little-endian length prefixes) and gRPC
(bytes_contents in, raw_output_contents out), plus bad input that must be a clear 400 /
INVALID_ARGUMENT. Reuses server_test.py's Server harness.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import threading

import onnx
from onnx import TensorProto, helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, run_groups, expect_error, failures, grpc_client  # noqa: E402

AWKWARD = ["", "plain", "h\u00e9llo \u20ac \U0001F600", "nul\0inside", "\0"]


def save(root, name, nodes, inputs, outputs, config=None, opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    os.makedirs(f"{root}/{name}/1")
    onnx.save(m, f"{root}/{name}/1/model.onnx")
    if config:
        with open(f"{root}/{name}/config.pbtxt", "w") as f:
            f.write(config)


def write_repository(root):
    if os.path.exists(root):
        shutil.rmtree(root)
    save(root, "str_identity", [helper.make_node("Identity", ["text"], ["same"])],
         [helper.make_tensor_value_info("text", TensorProto.STRING, ["N", "L"])],
         [helper.make_tensor_value_info("same", TensorProto.STRING, ["N", "L"])],
         'name: "str_identity"\nmax_batch_size: 8\n'
         'input [ { name: "text" data_type: TYPE_STRING dims: [ -1 ] allow_ragged_batch: true } ]\n'
         'output [ { name: "same" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
         'dynamic_batching { max_queue_delay_microseconds: 200000 }\n')
    save(root, "str_to_num", [helper.make_node("Cast", ["s"], ["v"], to=TensorProto.FLOAT)],
         [helper.make_tensor_value_info("s", TensorProto.STRING, ["L"])],
         [helper.make_tensor_value_info("v", TensorProto.FLOAT, ["L"])])
    save(root, "num_to_str", [helper.make_node("Cast", ["v"], ["s"], to=TensorProto.STRING)],
         [helper.make_tensor_value_info("v", TensorProto.FLOAT, ["L"])],
         [helper.make_tensor_value_info("s", TensorProto.STRING, ["L"])])


def length_prefixed(strings):
    out = b""
    for s in strings:
        b = s.encode("utf-8") if isinstance(s, str) else s
        out += struct.pack("<I", len(b)) + b
    return out


def parse_length_prefixed(data):
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4:pos + 4 + n].decode("utf-8"))
        pos += 4 + n
    return out


def http_tests(base):
    s = requests.Session()
    md = s.get(f"{base}/v2/models/str_identity").json()
    check(md["inputs"][0]["datatype"] == "BYTES" and md["outputs"][0]["datatype"] == "BYTES",
          f"BYTES in model metadata {md}")

    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1, len(AWKWARD)],
                        "data": AWKWARD}]}
    r = s.post(f"{base}/v2/models/str_identity/infer", json=body)
    out = r.json()["outputs"][0] if r.status_code == 200 else {}
    check(r.status_code == 200 and out.get("datatype") == "BYTES" and out.get("data") == AWKWARD
          and out.get("shape") == [1, len(AWKWARD)], f"JSON BYTES round trip: {r.text[:300]}")

    # Binary extension both ways.
    wire = length_prefixed(AWKWARD)
    header = json.dumps({"inputs": [{"name": "text", "datatype": "BYTES",
                                     "shape": [1, len(AWKWARD)],
                                     "parameters": {"binary_data_size": len(wire)}}],
                         "outputs": [{"name": "same", "parameters": {"binary_data": True}}]})
    r = s.post(f"{base}/v2/models/str_identity/infer", data=header.encode() + wire,
               headers={"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"})
    ok = r.status_code == 200
    if ok:
        n = int(r.headers["Inference-Header-Content-Length"])
        meta = json.loads(r.content[:n])["outputs"][0]
        ok = (meta["parameters"]["binary_data_size"] == len(wire) and
              parse_length_prefixed(r.content[n:]) == AWKWARD)
    check(ok, f"binary BYTES round trip: {r.status_code} {r.content[:300]!r}")

    # Concurrent requests of different lengths are batched (padded with "") and cropped back.
    results = {}

    def send(k):
        words = [f"w{k}-{i}" for i in range(k + 1)]
        rr = requests.post(f"{base}/v2/models/str_identity/infer", json={
            "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1, len(words)],
                        "data": words}]})
        results[k] = (words, rr.status_code, rr.json())

    threads = [threading.Thread(target=send, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (words, code, js) in sorted(results.items()):
        got = js.get("outputs", [{}])[0].get("data") if code == 200 else js
        check(code == 200 and got == words, f"batched ragged request {k}: {code} {got}")

    # Cast from and to string.
    r = s.post(f"{base}/v2/models/str_to_num/infer", json={"inputs": [
        {"name": "s", "datatype": "BYTES", "shape": [3], "data": ["1.5", "-2e3", "INF"]}]})
    check(r.status_code == 200 and r.json()["outputs"][0]["data"][:2] == [1.5, -2000.0],
          f"Cast string -> FP32: {r.text[:200]}")
    r = s.post(f"{base}/v2/models/num_to_str/infer", json={"inputs": [
        {"name": "v", "datatype": "FP32", "shape": [3], "data": [0.25, -3, 1e-5]}]})
    check(r.status_code == 200 and r.json()["outputs"][0]["data"] == ["0.25", "-3", "1e-05"],
          f"Cast FP32 -> string: {r.text[:200]}")

    # Bad input: clear 400s.
    r = s.post(f"{base}/v2/models/str_identity/infer", json={"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [1, 2], "data": ["a", 7]}]})
    expect_error(r, 400, "not a valid BYTES value", "number in BYTES JSON data")
    bad = header.replace(str(len(wire)), "6")
    r = s.post(f"{base}/v2/models/str_identity/infer", data=bad.encode() + wire[:6],
               headers={"Inference-Header-Content-Length": str(len(bad))})
    expect_error(r, 400, "truncated", "truncated BYTES length prefix")
    r = s.post(f"{base}/v2/models/str_to_num/infer", json={"inputs": [
        {"name": "s", "datatype": "BYTES", "shape": [1], "data": ["twelve"]}]})
    expect_error(r, 400, "not a number", "Cast of a non-number string")
    r = s.post(f"{base}/v2/models/str_identity/infer", json={"inputs": [
        {"name": "text", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]})
    expect_error(r, 400, "BYTES", "FP32 sent to a BYTES input")


def grpc_tests(target, proto_dir, work):
    import grpc
    pb, ch, _ = grpc_client(target, proto_dir, work)
    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                           request_serializer=lambda m: m.SerializeToString(),
                           response_deserializer=pb.ModelInferResponse.FromString)
    encoded = [w.encode("utf-8") for w in AWKWARD]
    req = pb.ModelInferRequest(model_name="str_identity")
    t = req.inputs.add(name="text", datatype="BYTES", shape=[1, len(AWKWARD)])
    t.contents.bytes_contents.extend(encoded)
    res = infer(req, timeout=30)
    check(res.outputs[0].datatype == "BYTES" and
          parse_length_prefixed(res.raw_output_contents[0]) == AWKWARD,
          f"grpc bytes_contents round trip: {res}")
    req = pb.ModelInferRequest(model_name="str_identity")
    req.inputs.add(name="text", datatype="BYTES", shape=[1, len(AWKWARD)])
    req.raw_input_contents.append(length_prefixed(AWKWARD))
    res = infer(req, timeout=30)
    check(parse_length_prefixed(res.raw_output_contents[0]) == AWKWARD, "grpc raw BYTES round trip")
    req.raw_input_contents[0] = b"\x05\x00"
    try:
        infer(req, timeout=30)
        check(False, "grpc truncated BYTES: expected INVALID_ARGUMENT")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "truncated" in e.details(),
              f"grpc truncated BYTES: {e.code()} {e.details()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repo")
    write_repository(repo)
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"))
    run_groups(server, (("http", lambda: http_tests(server.http)),
                        ("grpc", lambda: grpc_tests(server.grpc, args.proto_dir, args.work_dir))))
    if failures:
        print(f"\n{len(failures)} BYTES check(s) failed (log: {args.work_dir}/server.log)")
        return 1
    print("all BYTES checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
