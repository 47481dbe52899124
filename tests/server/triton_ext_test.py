#!/usr/bin/env python3
"""End-to-end test of two Triton HTTP/gRPC extensions in `inferd serve`: compressed HTTP bodies
(Content-Encoding / Accept-Encoding, gzip and deflate, with the request-size limit applied to the
inflated body) and system shared memory (register/status/unregister over HTTP and gRPC, inputs
read from and outputs written into regions created with Python's multiprocessing.shared_memory).

Reuses server_test.py's Server (free ports, 1 MiB request limit) on a repository holding Triton's
"simple" model: INPUT0, INPUT1 INT32 [-1, 16] -> OUTPUT0 = sum, OUTPUT1 = difference.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_test  # noqa: E402
from server_test import Server, check, expect_error, failures  # noqa: E402


def write_repository(root):
    if os.path.exists(root):
        shutil.rmtree(root)
    io = [helper.make_tensor_value_info(n, TensorProto.INT32, ["N", 16])
          for n in ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1")]
    g = helper.make_graph([helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
                           helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
                          "simple", io[:2], io[2:])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(f"{root}/simple/1")
    onnx.save(m, f"{root}/simple/1/model.onnx")
    with open(f"{root}/simple/config.pbtxt", "w") as f:
        f.write('name: "simple"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },\n'
                '        { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },\n'
                '         { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]\n')


A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = np.ones((1, 16), dtype=np.int32)


def infer_body():
    return json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": A.flatten().tolist()},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": B.flatten().tolist()}],
        "outputs": [{"name": "OUTPUT0"}]}).encode()


def compression_tests(base):
    s = requests.Session()
    url = f"{base}/v2/models/simple/infer"
    body = infer_body()
    for name, packed in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
        r = s.post(url, data=packed, headers={"Content-Encoding": name,
                                              "Accept-Encoding": "identity"})
        check(r.status_code == 200 and r.headers.get("Content-Encoding") is None and
              r.json()["outputs"][0]["data"] == (A + B).flatten().tolist(),
              f"{name} request body: {r.status_code} {r.text[:200]}")
        # requests inflates the reply itself; the raw socket bytes must be compressed.
        r = s.post(url, data=body, headers={"Accept-Encoding": name}, stream=True)
        raw = r.raw.read(decode_content=False)
        plain = gzip.decompress(raw) if name == "gzip" else zlib.decompress(raw)
        check(r.status_code == 200 and r.headers.get("Content-Encoding") == name and
              json.loads(plain)["outputs"][0]["data"] == (A + B).flatten().tolist(),
              f"{name} reply: {r.status_code} {r.headers}")
    r = s.post(url, data=b"\x1f\x8b\x08\x00garbage", headers={"Content-Encoding": "gzip"})
    expect_error(r, 400, "corrupt compressed request body", "corrupt gzip body")
    r = s.post(url, data=zlib.compress(body)[:-6], headers={"Content-Encoding": "deflate"})
    expect_error(r, 400, "corrupt compressed request body", "truncated deflate body")
    r = s.post(url, data=body, headers={"Content-Encoding": "br"})
    expect_error(r, 415, "unsupported Content-Encoding 'br'", "unknown coding")
    # 4 MiB of zeros inflates past the server's 1 MiB limit from ~4 KiB on the wire.
    bomb = gzip.compress(b"\0" * (4 << 20))
    r = requests.post(url, data=bomb, headers={"Content-Encoding": "gzip"})
    expect_error(r, 413, "exceeds the limit of 1048576 bytes", "gzip bomb")
    check(s.get(f"{base}/v2/health/live").status_code == 200, "server alive after bad bodies")


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
    try:
        for name, fn in (("compression", lambda: compression_tests(server.http)),):
            try:
                fn()
            except Exception as e:  # a crash in one group should not hide the others
                check(False, f"{name} tests raised {type(e).__name__}: {e}")
        check(server.proc.poll() is None, "server still running after all tests")
    finally:
        rc = server.stop()
    check(rc == 0, f"clean shutdown on SIGTERM (exit code {rc})")
    if failures:
        print(f"\n{len(failures)} check(s) failed (log: {args.work_dir}/server.log)")
        return 1
    print("all Triton extension checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
