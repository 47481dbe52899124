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
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_test  # noqa: E402
from server_test import Server, check, run_groups, expect_error, failures  # noqa: E402


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


def shm_http_tests(base):
    from multiprocessing import shared_memory
    s = requests.Session()
    sm = f"{base}/v2/systemsharedmemory"
    check(s.post(f"{sm}/unregister").status_code == 200, "unregister all")
    check(s.post(f"{base}/v2/cudasharedmemory/unregister").status_code == 200, "cuda unregister")
    check(s.get(f"{base}/v2/cudasharedmemory/status").json() == [], "cuda status")
    r = s.post(f"{base}/v2/cudasharedmemory/region/c/register",
               json={"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 64})
    expect_error(r, 400, "CUDA shared memory is not supported by inferd (CPU only)", "cuda register")
    ins = shared_memory.SharedMemory(create=True, size=128)
    outs = shared_memory.SharedMemory(create=True, size=128)
    try:
        np.ndarray((2, 16), np.int32, buffer=ins.buf)[:] = np.concatenate([A, B])
        for name, shm in (("in", ins), ("out", outs)):
            r = s.post(f"{sm}/region/{name}/register",
                       json={"key": "/" + shm.name, "offset": 0, "byte_size": 128})
            check(r.status_code == 200, f"register {name}: {r.status_code} {r.text}")
        r = s.post(f"{sm}/region/in/register", json={"key": "/" + ins.name, "byte_size": 128})
        expect_error(r, 409, "already registered", "register twice")
        r = s.post(f"{sm}/region/x/register", json={"key": "/" + ins.name, "byte_size": 4096})
        expect_error(r, 400, "exceeds the 128 bytes", "register beyond the object")
        r = s.post(f"{sm}/region/x/register", json={"key": "/inferd_no_such_key", "byte_size": 4})
        expect_error(r, 400, "cannot open key", "register unknown key")
        st = s.get(f"{sm}/status").json()
        check(sorted(x["name"] for x in st) == ["in", "out"] and st[0]["byte_size"] == 128,
              f"status {st}")
        st = s.get(f"{sm}/region/in/status").json()
        check(len(st) == 1 and st[0]["key"] == "/" + ins.name, f"region status {st}")
        expect_error(s.get(f"{sm}/region/zz/status"), 400, "'zz'", "status of unknown region")

        def shm_param(region, offset, size):
            return {"shared_memory_region": region, "shared_memory_offset": offset,
                    "shared_memory_byte_size": size}
        req = {"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": shm_param("in", 0, 64)},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "parameters": shm_param("in", 64, 64)}],
            "outputs": [{"name": "OUTPUT0", "parameters": shm_param("out", 0, 64)},
                        {"name": "OUTPUT1", "parameters": shm_param("out", 64, 64)}]}
        r = s.post(f"{base}/v2/models/simple/infer", json=req)
        out = np.ndarray((2, 16), np.int32, buffer=outs.buf)
        check(r.status_code == 200 and all("data" not in o for o in r.json()["outputs"]) and
              np.array_equal(out[0], (A + B)[0]) and np.array_equal(out[1], (A - B)[0]),
              f"shm infer: {r.status_code} {r.text[:300]} {out}")
        # a mix: inputs from shared memory, one output in the JSON reply
        req2 = json.loads(json.dumps(req))
        req2["outputs"] = [{"name": "OUTPUT1"}]
        r = s.post(f"{base}/v2/models/simple/infer", json=req2)
        check(r.status_code == 200 and r.json()["outputs"][0]["data"] == (A - B).flatten().tolist(),
              f"shm inputs, json output: {r.text[:200]}")
        for what, mutate, needle in (
                ("unknown region", lambda q: q["inputs"][0]["parameters"].update(shared_memory_region="zz"),
                 "unknown shared memory region 'zz'"),
                ("beyond the region", lambda q: q["inputs"][1]["parameters"].update(shared_memory_offset=100),
                 "exceeds the 128 bytes of region 'in'"),
                ("size mismatch", lambda q: q["inputs"][0]["parameters"].update(shared_memory_byte_size=60),
                 "needs 64"),
                ("output too small", lambda q: q["outputs"][0]["parameters"].update(shared_memory_byte_size=32),
                 "too small"),
                ("output beyond", lambda q: q["outputs"][1]["parameters"].update(shared_memory_offset=96),
                 "exceeds the 128 bytes of region 'out'")):
            bad = json.loads(json.dumps(req))
            mutate(bad)
            expect_error(s.post(f"{base}/v2/models/simple/infer", json=bad), 400, needle, f"shm {what}")
        check(s.post(f"{sm}/region/in/unregister").status_code == 200, "unregister one")
        check([x["name"] for x in s.get(f"{sm}/status").json()] == ["out"], "status after unregister")
        expect_error(s.post(f"{base}/v2/models/simple/infer", json=req), 400,
                     "unknown shared memory region 'in'", "infer after unregister")
        check(s.post(f"{sm}/unregister").status_code == 200 and s.get(f"{sm}/status").json() == [],
              "unregister all at the end")
    finally:
        for shm in (ins, outs):
            shm.close()
            shm.unlink()


def shm_grpc_tests(target, proto_dir, work):
    import grpc
    from multiprocessing import shared_memory
    pb, ch, unary = server_test.grpc_client(target, proto_dir, work)

    def expect_code(fn, code, needle, what):
        try:
            fn()
            check(False, f"grpc {what}: expected {code}, got OK")
        except grpc.RpcError as e:
            check(e.code() == code and needle in e.details(),
                  f"grpc {what}: expected {code} '{needle}', got {e.code()} '{e.details()}'")

    expect_code(lambda: unary("CudaSharedMemoryRegister", pb.CudaSharedMemoryRegisterRequest(
        name="c", byte_size=4), pb.CudaSharedMemoryRegisterResponse), grpc.StatusCode.UNIMPLEMENTED,
        "CUDA shared memory is not supported by inferd (CPU only)", "cuda register")
    unary("CudaSharedMemoryUnregister", pb.CudaSharedMemoryUnregisterRequest(),
          pb.CudaSharedMemoryUnregisterResponse)
    unary("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(),
          pb.SystemSharedMemoryUnregisterResponse)
    ins = shared_memory.SharedMemory(create=True, size=128)
    outs = shared_memory.SharedMemory(create=True, size=64)
    try:
        np.ndarray((2, 16), np.int32, buffer=ins.buf)[:] = np.concatenate([A, B])
        for name, shm, size in (("gin", ins, 128), ("gout", outs, 64)):
            unary("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterRequest(
                name=name, key="/" + shm.name, offset=0, byte_size=size),
                pb.SystemSharedMemoryRegisterResponse)
        st = unary("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(),
                   pb.SystemSharedMemoryStatusResponse)
        check(sorted(st.regions) == ["gin", "gout"] and st.regions["gin"].byte_size == 128,
              f"grpc status {st}")
        expect_code(lambda: unary("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterRequest(
            name="gin", key="/" + ins.name, byte_size=8), pb.SystemSharedMemoryRegisterResponse),
            grpc.StatusCode.ALREADY_EXISTS, "already registered", "register twice")

        def request(in1_offset=64, out_region="gout"):
            req = pb.ModelInferRequest(model_name="simple")
            for name, off in (("INPUT0", 0), ("INPUT1", in1_offset)):
                t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
                t.parameters["shared_memory_region"].string_param = "gin"
                t.parameters["shared_memory_byte_size"].int64_param = 64
                t.parameters["shared_memory_offset"].int64_param = off
            o = req.outputs.add(name="OUTPUT0")
            o.parameters["shared_memory_region"].string_param = out_region
            o.parameters["shared_memory_byte_size"].int64_param = 64
            req.outputs.add(name="OUTPUT1")
            return req
        res = unary("ModelInfer", request(), pb.ModelInferResponse)
        out = np.ndarray((16,), np.int32, buffer=outs.buf)
        check(np.array_equal(out, (A + B)[0]) and len(res.raw_output_contents) == 2 and
              res.raw_output_contents[0] == b"" and
              np.array_equal(np.frombuffer(res.raw_output_contents[1], np.int32), (A - B)[0]),
              f"grpc shm infer {res} {out}")
        expect_code(lambda: unary("ModelInfer", request(in1_offset=96), pb.ModelInferResponse),
                    grpc.StatusCode.INVALID_ARGUMENT, "exceeds the 128 bytes of region 'gin'",
                    "input beyond the region")
        expect_code(lambda: unary("ModelInfer", request(out_region="zz"), pb.ModelInferResponse),
                    grpc.StatusCode.INVALID_ARGUMENT, "unknown shared memory region 'zz'",
                    "unknown output region")
        # streaming: outputs into shared memory too
        out[:] = 0
        stream = ch.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                  request_serializer=lambda m: m.SerializeToString(),
                                  response_deserializer=pb.ModelStreamInferResponse.FromString)
        got = list(stream(iter([request()]), timeout=30))
        check(len(got) == 1 and not got[0].error_message and np.array_equal(out, (A + B)[0]),
              f"grpc shm stream {got}")
        unary("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name="gin"),
              pb.SystemSharedMemoryUnregisterResponse)
        st = unary("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(),
                   pb.SystemSharedMemoryStatusResponse)
        check(sorted(st.regions) == ["gout"], f"grpc status after unregister {st}")
        expect_code(lambda: unary("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(
            name="gin"), pb.SystemSharedMemoryStatusResponse), grpc.StatusCode.INVALID_ARGUMENT,
            "'gin'", "status of unregistered region")
        unary("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(),
              pb.SystemSharedMemoryUnregisterResponse)
    finally:
        for shm in (ins, outs):
            shm.close()
            shm.unlink()


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
    run_groups(server, (("compression", lambda: compression_tests(server.http)),
                        ("shm http", lambda: shm_http_tests(server.http)),
                        ("shm grpc", lambda: shm_grpc_tests(server.grpc, args.proto_dir,
                                                            args.work_dir))))
    if failures:
        print(f"\n{len(failures)} check(s) failed (log: {args.work_dir}/server.log)")
        return 1
    print("all Triton extension checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
