#!/usr/bin/python3
"""End-to-end check of the sequence batcher: `inferd serve` on free loopback ports with the
repository scripts/triton/write_sequence_models.py writes; sequences over HTTP (uint64 and string
correlation IDs, implicit state, START/END, Triton's error text) and over gRPC ModelStreamInfer.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from server_test import Server, check, failures, grpc_client  # noqa: E402


def infer(base, model, x, params):
    body = {"parameters": params,
            "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [x]}]}
    return requests.post(f"{base}/v2/models/{model}/infer", json=body, timeout=30)


def http_tests(base):
    # Two interleaved sequences of the stateful accumulator, one with a string ID.
    steps = [(5, 100), (6, 200), (7, 300)]
    got = {1: [], "s-1": []}
    for i, (a, b) in enumerate(steps):
        last = i == len(steps) - 1
        for sid, x in ((1, a), ("s-1", b)):
            r = infer(base, "simple_accumulator", x,
                      {"sequence_id": sid, "sequence_start": i == 0, "sequence_end": last})
            check(r.status_code == 200, f"accumulator step {i} of {sid}: {r.text}")
            got[sid].append(r.json()["outputs"][0]["data"][0])
            check(len(r.json()["outputs"]) == 1, "the state output is not returned")
    check(got[1] == [5, 11, 18], f"uint64 sequence {got[1]}")
    check(got["s-1"] == [100, 300, 600], f"string sequence {got['s-1']}")
    # END freed sequence 1: a request without START fails with Triton's text.
    r = infer(base, "simple_accumulator", 1, {"sequence_id": 1})
    check(r.status_code == 400 and "inference request for sequence 1 to model "
          "'simple_accumulator' must specify the START flag on the first request of the sequence"
          in r.text, f"no START: {r.status_code} {r.text}")
    r = infer(base, "simple_accumulator", 1, {"sequence_start": True})
    check(r.status_code == 400 and "correlation ID" in r.text, f"no ID: {r.text}")
    r = infer(base, "simple_accumulator", 1, {"sequence_id": 2, "sequence_start": "yes"})
    check(r.status_code == 400, f"bad sequence_start: {r.text}")
    # CORRID and END as controls: the last request adds the correlation ID.
    outs = []
    for i, x in enumerate([0, 11, 1]):
        r = infer(base, "simple_dyna_sequence", x,
                  {"sequence_id": 1000, "sequence_start": i == 0, "sequence_end": i == 2})
        outs.append(r.json()["outputs"][0]["data"][0])
    check(outs == [1, 11, 1001], f"dyna sequence {outs}")


def grpc_stream_tests(target, proto_dir, work):
    pb, ch, _ = grpc_client(target, proto_dir, work)

    def request(sid, x, start, end, rid):
        req = pb.ModelInferRequest(model_name="simple_accumulator", id=rid)
        if isinstance(sid, str):
            req.parameters["sequence_id"].string_param = sid
        else:
            req.parameters["sequence_id"].int64_param = sid
        req.parameters["sequence_start"].bool_param = start
        req.parameters["sequence_end"].bool_param = end
        t = req.inputs.add(name="INPUT", datatype="INT32", shape=[1, 1])
        t.contents.int_contents.append(x)
        return req

    def requests_iter():
        for i, x in enumerate([2, 3, 4]):
            yield request(7, x, i == 0, i == 2, f"a{i}")
            yield request("z", 10 * x, i == 0, i == 2, f"b{i}")

    stream = ch.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=pb.ModelStreamInferResponse.FromString)
    got = {}
    for r in stream(requests_iter(), timeout=30):
        check(not r.error_message, f"stream error {r.error_message}")
        out = r.infer_response
        data = out.raw_output_contents[0] if out.raw_output_contents else None
        value = (int(np.frombuffer(data, dtype=np.int32)[0]) if data is not None
                 else out.outputs[0].contents.int_contents[0])
        got[out.id] = value
    expected = {"a0": 2, "a1": 5, "a2": 9, "b0": 20, "b1": 50, "b2": 90}
    check(got == expected, f"stream results {got}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work_dir, ignore_errors=True)
    os.makedirs(a.work_dir)
    repo = os.path.join(a.work_dir, "repo")
    script = os.path.join(HERE, "..", "..", "scripts", "triton", "write_sequence_models.py")
    subprocess.run([sys.executable, script, repo], check=True)
    server = Server(a.inferd, repo, os.path.join(a.work_dir, "inferd.log"))
    try:
        http_tests(server.http)
        grpc_stream_tests(server.grpc, a.proto_dir, a.work_dir)
    finally:
        server.stop()
    if failures:
        sys.exit(f"sequence e2e: {len(failures)} failure(s)")
    print("sequence e2e: OK")


if __name__ == "__main__":
    main()
