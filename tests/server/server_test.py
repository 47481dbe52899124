#!/usr/bin/env python3
"""End-to-end test of `inferd serve`: every KServe v2 HTTP and gRPC endpoint, the binary tensor
extension, the error paths, metrics (checked with promtool) and clean shutdown on SIGTERM.

Writes a small repository (an Identity model with a symbolic batch dim, an Add model with a
config.pbtxt), starts the server on free ports (port 0; the log names the real ones), and drives it
with python3-requests, curl and python3-grpcio (stubs generated at test time with protoc).
"""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper
import requests

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run_groups(server, groups):
    """Runs each (name, fn) test group against `server`, a crash in one recorded as a failure so
    it does not hide the others; then checks the server is still up, stops it and checks that
    SIGTERM shut it down cleanly (exit code 0)."""
    try:
        for name, fn in groups:
            try:
                fn()
            except Exception as e:  # a crash in one group should not hide the others
                check(False, f"{name} tests raised {type(e).__name__}: {e}")
        check(server.proc.poll() is None, "server still running after all tests")
    finally:
        rc = server.stop()
    check(rc == 0, f"clean shutdown on SIGTERM (exit code {rc})")


def write_repository(root):
    if os.path.exists(root):
        shutil.rmtree(root)
    # identity: x FP32 [N, 16] -> y; no config.pbtxt (auto-completed).
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(f"{root}/identity/1")
    onnx.save(m, f"{root}/identity/1/model.onnx")
    # add: a, b INT64 [N, 4] -> sum; Triton config with dynamic batching.
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"])], "add",
                          [helper.make_tensor_value_info("a", TensorProto.INT64, ["N", 4]),
                           helper.make_tensor_value_info("b", TensorProto.INT64, ["N", 4])],
                          [helper.make_tensor_value_info("sum", TensorProto.INT64, ["N", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(f"{root}/add/2")
    onnx.save(m, f"{root}/add/2/model.onnx")
    with open(f"{root}/add/config.pbtxt", "w") as f:
        f.write('name: "add"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                'input [ { name: "a" data_type: TYPE_INT64 dims: [ 4 ] },\n'
                '        { name: "b" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
                'output [ { name: "sum" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
                'dynamic_batching { max_queue_delay_microseconds: 500 }\n')


def link_model_file(src, dst):
    """Puts the file `src` at `dst` in a model folder without copying it: a hard link (the server
    refuses symlinks leading out of a model folder, repository.h's ResolveModelFile), or a copy
    when `src` is on another filesystem. Replaces `dst`."""
    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def link_decoder_files(src_dir, version_dir):
    """Links a decoder folder's files (model.onnx and its external data, config.json,
    tokenizer.model) into `version_dir`, created if missing, with link_model_file."""
    os.makedirs(version_dir, exist_ok=True)
    for f in sorted(os.listdir(src_dir)):
        if f.startswith("model.onnx") or f in ("config.json", "tokenizer.model"):
            link_model_file(os.path.join(src_dir, f), os.path.join(version_dir, f))


class Server:
    """`inferd serve` on free loopback ports; `http`, `grpc` and `metrics` are its addresses.

    The defaults are the KServe tests' server; `args` replaces the flags after the ports, and
    grpc=False turns the gRPC port off (then `grpc` stays None); preexec_fn runs in the child
    before exec (e.g. to lower its descriptor limit)."""

    KSERVE_ARGS = ["--max-request-bytes", "1MiB", "--threads", "1", "--id", "triton"]

    def __init__(self, inferd, repo, log_path, args=None, grpc=True, start_timeout=60,
                 stop_timeout=20, preexec_fn=None):
        self.log = open(log_path, "w")
        self.stop_timeout = stop_timeout
        self.proc = subprocess.Popen(
            [inferd, "serve", "--model-repository", repo, "--http-port", "0",
             "--grpc-port", "0" if grpc else "-1", "--metrics-port", "0"] +
            (self.KSERVE_ARGS if args is None else args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=preexec_fn)
        self.http = self.grpc = self.metrics = None
        deadline = time.time() + start_timeout
        lines = []

        def started():
            return self.http and self.metrics and (self.grpc or not grpc)

        while time.time() < deadline and not started():
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            self.log.write(line)
            if (m := re.search(r"HTTP KServe v2 listening on (http://\S+)", line)):
                self.http = m.group(1)
            if (m := re.search(r"gRPC KServe v2 listening on (\S+)", line)):
                self.grpc = m.group(1)
            if (m := re.search(r"metrics listening on (http://[^/\s]+:\d+)/metrics", line)):
                self.metrics = m.group(1)
        if not started():
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + "".join(lines))
        self.startup_log = "".join(lines)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.log.write(line)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def expect_error(resp, code, needle, what):
    ok = resp.status_code == code
    try:
        body = resp.json()
        ok = ok and isinstance(body.get("error"), str) and needle.lower() in body["error"].lower()
    except ValueError:
        ok = False
        body = resp.text[:200]
    check(ok, f"{what}: expected {code} with '{needle}', got {resp.status_code} {body}")


def http_tests(base, inferd_log):
    s = requests.Session()
    check("model 'identity' version 1 is READY" in inferd_log, "log names loaded models")
    check(s.get(f"{base}/v2/health/live").status_code == 200, "live")
    check(s.get(f"{base}/v2/health/ready").status_code == 200, "ready")
    md = s.get(f"{base}/v2").json()
    check(md.get("name") == "triton" and "binary_tensor_data" in md.get("extensions", []),
          f"server metadata {md}")
    md = s.get(f"{base}/v2/models/identity").json()
    check(md["inputs"][0]["name"] == "x" and md["inputs"][0]["datatype"] == "FP32" and
          md["inputs"][0]["shape"][-1] == 16, f"model metadata {md}")
    check(s.get(f"{base}/v2/models/add/versions/2").status_code == 200, "versioned metadata")
    check(s.get(f"{base}/v2/models/identity/ready").status_code == 200, "model ready")
    check(s.get(f"{base}/v2/models/add/versions/2/ready").status_code == 200, "version ready")
    cfg = s.get(f"{base}/v2/models/add/config")
    check(cfg.status_code == 200 and cfg.json().get("name") == "add", f"config {cfg.text[:200]}")

    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    body = {"id": "q1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 16],
                                    "data": x.tolist()}]}
    r = s.post(f"{base}/v2/models/identity/infer", json=body)
    check(r.status_code == 200, f"json infer: {r.status_code} {r.text[:200]}")
    if r.status_code == 200:
        out = r.json()
        check(out["id"] == "q1" and out["model_name"] == "identity" and
              out["model_version"] == "1", f"infer response header {out}")
        got = np.array(out["outputs"][0]["data"], np.float32).reshape(out["outputs"][0]["shape"])
        check(np.array_equal(got, x), "json infer output")

    a = np.array([[1, 2, 3, 4]], np.int64)
    b = np.array([[10, 20, 30, 40]], np.int64)
    body = {"parameters": {"priority": 1, "timeout": 1000000},
            "inputs": [{"name": "a", "datatype": "INT64", "shape": [1, 4], "data": a.flatten().tolist()},
                       {"name": "b", "datatype": "INT64", "shape": [1, 4], "data": b.tolist()}],
            "outputs": [{"name": "sum"}]}
    r = s.post(f"{base}/v2/models/add/versions/2/infer", json=body)
    check(r.status_code == 200 and r.json()["outputs"][0]["data"] == [11, 22, 33, 44],
          f"add infer {r.status_code} {r.text[:200]}")

    # Binary extension: binary input, binary output.
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 16],
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    r = s.post(f"{base}/v2/models/identity/infer", data=header + x.tobytes(),
               headers={"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"})
    check(r.status_code == 200, f"binary infer {r.status_code} {r.text[:200]}")
    if r.status_code == 200:
        n = int(r.headers.get("Inference-Header-Content-Length", "-1"))
        check(n > 0, "binary response header length")
        meta = json.loads(r.content[:n])
        check(meta["outputs"][0]["parameters"]["binary_data_size"] == x.nbytes, f"binary meta {meta}")
        check(np.array_equal(np.frombuffer(r.content[n:], np.float32).reshape(2, 16), x),
              "binary output bytes")
    # binary_data_output for every output, JSON input.
    r = s.post(f"{base}/v2/models/identity/infer",
               json={"parameters": {"binary_data_output": True},
                     "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                 "data": list(range(16))}]})
    check(r.status_code == 200 and "Inference-Header-Content-Length" in r.headers,
          "binary_data_output")

    # Statistics after traffic.
    st = s.get(f"{base}/v2/models/identity/stats").json()
    check(st["model_stats"][0]["name"] == "identity" and
          st["model_stats"][0]["inference_count"] >= 1, f"stats {st}")
    check(s.get(f"{base}/v2/models/stats").status_code == 200, "all stats")
    check(s.get(f"{base}/v2/models/add/versions/2/stats").status_code == 200, "version stats")

    # Error paths.
    url = f"{base}/v2/models/identity/infer"
    expect_error(s.post(url, data=b"{not json"), 400, "malformed JSON", "malformed JSON")
    expect_error(s.post(url, json={"inputs": [{"name": "nope", "datatype": "FP32", "shape": [1, 16],
                                               "data": [0] * 16}]}), 400, "nope", "unknown input")
    expect_error(s.post(url, json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 15],
                                               "data": [0] * 15}]}), 400, "x", "wrong shape")
    expect_error(s.post(url, json={"inputs": [{"name": "x", "datatype": "INT32", "shape": [1, 16],
                                               "data": [0] * 16}]}), 400, "x", "wrong dtype")
    expect_error(s.post(url, json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                               "data": [0] * 15}]}), 400, "elements", "data size")
    expect_error(s.post(url, json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                               "data": [0] * 16}], "outputs": [{"name": "zz"}]}),
                 400, "zz", "unknown output")
    expect_error(s.post(f"{base}/v2/models/nosuch/infer", json={"inputs": []}), 400, "empty",
                 "empty inputs")
    expect_error(s.post(f"{base}/v2/models/nosuch/infer",
                        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]}),
                 404, "nosuch", "unknown model")
    expect_error(s.post(f"{base}/v2/models/identity/versions/7/infer",
                        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                          "data": [0] * 16}]}), 404, "7", "unknown version")
    expect_error(s.get(f"{base}/v2/models/identity/versions/abc"), 400, "version", "bad version")
    expect_error(s.get(f"{base}/v2/models/nosuch"), 404, "nosuch", "unknown model metadata")
    expect_error(s.get(f"{base}/v2/models/nosuch/ready"), 404, "nosuch", "unknown model ready")
    expect_error(s.get(f"{base}/v2/models/nosuch/config"), 404, "nosuch", "unknown model config")
    expect_error(s.get(f"{base}/v2/models/nosuch/stats"), 404, "nosuch", "unknown model stats")
    expect_error(s.post(url, data=header + x.tobytes()[:40],
                        headers={"Inference-Header-Content-Length": str(len(header))}),
                 400, "truncated", "truncated binary")
    expect_error(s.post(url, data=header, headers={"Inference-Header-Content-Length": "abc"}),
                 400, "Inference-Header-Content-Length", "bad header length")
    expect_error(s.post(url, data=b"x" * ((1 << 20) + 1)), 413, "limit", "oversized body")
    expect_error(s.get(f"{base}/v3/foo"), 404, "unknown path", "unknown path")
    expect_error(s.get(url), 405, "not allowed", "GET on infer")
    # The server is still fine after all of that.
    check(s.get(f"{base}/v2/health/live").status_code == 200, "live after errors")

    # curl, as the docs show it.
    out = subprocess.run(["curl", "-s", "-X", "POST", f"{base}/v2/models/identity/infer", "-d",
                          json.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                                  "shape": [1, 16], "data": [1.5] * 16}]})],
                         capture_output=True, text=True, timeout=30)
    check(out.returncode == 0 and '"data":[1.5,' in out.stdout, f"curl infer: {out.stdout[:200]}")


def extension_tests(base, work):
    """Triton's extensions: logging, trace, classification, config JSON, error texts, stats."""
    s = requests.Session()
    log = s.get(f"{base}/v2/logging").json()
    check(log.get("log_info") is True and log.get("log_verbose_level") == 0, f"logging {log}")
    r = s.post(f"{base}/v2/logging", json={"log_verbose_level": 1})
    check(r.status_code == 200 and r.json()["log_verbose_level"] == 1, f"set logging {r.text}")
    expect_error(s.post(f"{base}/v2/logging", json={"log_colour": True}), 400, "log_colour",
                 "unknown log setting")
    s.post(f"{base}/v2/logging", json={"log_verbose_level": 0})
    trace_file = os.path.join(work, "trace.jsonl")
    if os.path.exists(trace_file):
        os.remove(trace_file)
    r = s.post(f"{base}/v2/models/identity/trace/setting",
               json={"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "1",
                     "trace_file": trace_file})
    check(r.status_code == 200 and r.json()["trace_level"] == ["TIMESTAMPS"], f"trace {r.text}")
    check(s.get(f"{base}/v2/trace/setting").json()["trace_level"] == ["OFF"], "global trace off")
    expect_error(s.post(f"{base}/v2/trace/setting", json={"trace_rate": "0"}), 400, "trace_rate",
                 "bad trace rate")
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": x.tolist()}],
            "outputs": [{"name": "y", "parameters": {"classification": 2}}]}
    for _ in range(2):
        r = s.post(f"{base}/v2/models/identity/infer", json=body)
    out = r.json()["outputs"][0] if r.status_code == 200 else {}
    check(out.get("datatype") == "BYTES" and out.get("shape") == [1, 2] and
          out.get("data") == ["15.000000:15", "14.000000:14"], f"classification {r.text[:300]}")
    lines = open(trace_file).read().splitlines() if os.path.exists(trace_file) else []
    check(len(lines) == 1 and json.loads(lines[0])["model_name"] == "identity",
          f"one trace line (trace_count 1): {lines}")
    cfg = s.get(f"{base}/v2/models/add/config").json()
    check(cfg["input"][0]["dims"] == [4] and
          cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 500,
          f"config int64 fields are numbers: {cfg.get('input')}")
    r = s.get(f"{base}/v2/models/nosuch")
    check(r.json().get("error") == "Request for unknown model: 'nosuch' is not found",
          f"Triton's unknown-model text: {r.text}")
    stats = s.get(f"{base}/v2/models/identity/stats").json()["model_stats"][0]
    check("cache_hit" in stats["inference_stats"] and "memory_usage" in stats and
          "response_stats" in stats, f"Triton's statistics schema: {list(stats)}")


def metrics_tests(metrics_url, work):
    r = requests.get(f"{metrics_url}/metrics")
    check(r.status_code == 200, "metrics status")
    text = r.text
    check(re.search(r'inferd_request_success_total\{model="identity",version="1"\} [1-9]', text)
          is not None, "success counter after traffic")
    check("inferd_request_failure_total{" in text, "failure counter")
    check("process_resident_memory_bytes" in text and "process_cpu_seconds_total" in text,
          "process metrics")
    check('inferd_batch_size_bucket{model="identity"' in text, "batch size histogram")
    check(re.search(r'inferd_model_instances\{model="identity",version="1"\} [1-9]', text)
          is not None, "instance count gauge")
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
        check(p.returncode == 0, f"promtool: {p.stdout} {p.stderr}")
    else:
        print("note: promtool not installed; skipped the lint")


def grpc_client(target, proto_dir, work):
    """Generates the Python messages of our protos into WORK/pb and opens a ready channel to
    TARGET. Returns (pb, channel, unary): the grpc_service_pb2 module, the channel, and
    unary(method, request, response_class), which calls one RPC of the KServe service."""
    import grpc
    gen = os.path.join(work, "pb")
    os.makedirs(gen, exist_ok=True)
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={gen}",
                    os.path.join(proto_dir, "model_config.proto"),
                    os.path.join(proto_dir, "grpc_service.proto")], check=True)
    sys.path.insert(0, gen)
    import grpc_service_pb2 as pb
    ch = grpc.insecure_channel(target)
    grpc.channel_ready_future(ch).result(timeout=10)

    def unary(method, req, resp_cls):
        return ch.unary_unary(f"/inference.GRPCInferenceService/{method}",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=resp_cls.FromString)(req, timeout=30)

    return pb, ch, unary


def grpc_tests(target, proto_dir, work):
    import grpc
    pb, ch, unary = grpc_client(target, proto_dir, work)

    def expect_code(fn, code, what):
        try:
            fn()
            check(False, f"grpc {what}: expected {code}, got OK")
        except grpc.RpcError as e:
            check(e.code() == code and e.details(), f"grpc {what}: expected {code}, got {e.code()}")

    check(unary("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse).live, "grpc live")
    check(unary("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse).ready, "grpc ready")
    check(unary("ModelReady", pb.ModelReadyRequest(name="identity"), pb.ModelReadyResponse).ready,
          "grpc model ready")
    check(not unary("ModelReady", pb.ModelReadyRequest(name="nosuch"), pb.ModelReadyResponse).ready,
          "grpc unknown model not ready")
    md = unary("ServerMetadata", pb.ServerMetadataRequest(), pb.ServerMetadataResponse)
    check(md.name == "triton", "grpc server metadata (--id)")
    log = unary("LogSettings", pb.LogSettingsRequest(), pb.LogSettingsResponse)
    check(log.settings["log_info"].bool_param, f"grpc log settings {log}")
    req = pb.TraceSettingRequest(model_name="add")
    req.settings["trace_rate"].value.append("7")
    tr = unary("TraceSetting", req, pb.TraceSettingResponse)
    check(list(tr.settings["trace_rate"].value) == ["7"], f"grpc trace setting {tr}")
    md = unary("ModelMetadata", pb.ModelMetadataRequest(name="add", version="2"),
               pb.ModelMetadataResponse)
    check([t.name for t in md.inputs] == ["a", "b"] and md.inputs[0].datatype == "INT64",
          f"grpc model metadata {md}")
    cfg = unary("ModelConfig", pb.ModelConfigRequest(name="add"), pb.ModelConfigResponse)
    check(cfg.config.name == "add" and cfg.config.max_batch_size == 8, f"grpc config {cfg}")

    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    req = pb.ModelInferRequest(model_name="identity", id="g1")
    t = req.inputs.add(name="x", datatype="FP32", shape=[1, 16])
    req.raw_input_contents.append(x.tobytes())
    res = unary("ModelInfer", req, pb.ModelInferResponse)
    check(res.id == "g1" and res.outputs[0].name == "y" and
          np.array_equal(np.frombuffer(res.raw_output_contents[0], np.float32), x.flatten()),
          "grpc raw infer")
    req = pb.ModelInferRequest(model_name="add", model_version="2")
    req.parameters["priority"].int64_param = 1
    for name, v in (("a", [1, 2, 3, 4]), ("b", [5, 6, 7, 8])):
        t = req.inputs.add(name=name, datatype="INT64", shape=[1, 4])
        t.contents.int64_contents.extend(v)
    res = unary("ModelInfer", req, pb.ModelInferResponse)
    check(list(np.frombuffer(res.raw_output_contents[0], np.int64)) == [6, 8, 10, 12],
          "grpc typed infer")

    bad = pb.ModelInferRequest(model_name="nosuch")
    bad.inputs.add(name="x", datatype="FP32", shape=[1]).contents.fp32_contents.append(1)
    expect_code(lambda: unary("ModelInfer", bad, pb.ModelInferResponse), grpc.StatusCode.NOT_FOUND,
                "unknown model")
    bad = pb.ModelInferRequest(model_name="identity")
    bad.inputs.add(name="x", datatype="FP32", shape=[1, 16])
    bad.raw_input_contents.append(b"1234")
    expect_code(lambda: unary("ModelInfer", bad, pb.ModelInferResponse),
                grpc.StatusCode.INVALID_ARGUMENT, "raw size mismatch")
    bad = pb.ModelInferRequest(model_name="identity")
    bad.inputs.add(name="x", datatype="FP32", shape=[1, 8]).contents.fp32_contents.extend([0] * 8)
    expect_code(lambda: unary("ModelInfer", bad, pb.ModelInferResponse),
                grpc.StatusCode.INVALID_ARGUMENT, "wrong shape")
    bad.model_version = "zz"
    expect_code(lambda: unary("ModelInfer", bad, pb.ModelInferResponse),
                grpc.StatusCode.INVALID_ARGUMENT, "bad version")
    expect_code(lambda: unary("ModelMetadata", pb.ModelMetadataRequest(name="nosuch"),
                              pb.ModelMetadataResponse), grpc.StatusCode.NOT_FOUND, "metadata")

    # Streaming: several requests, one bad; every one answered, errors in-band.
    def requests_iter():
        for i in range(5):
            r = pb.ModelInferRequest(model_name="identity", id=f"s{i}")
            r.inputs.add(name="x", datatype="FP32", shape=[1, 16])
            r.raw_input_contents.append(x.tobytes() if i != 3 else b"bad")
            yield r
    stream = ch.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=pb.ModelStreamInferResponse.FromString)
    got = {r.infer_response.id: r.error_message for r in stream(requests_iter(), timeout=30)}
    check(sorted(got) == [f"s{i}" for i in range(5)], f"stream ids {sorted(got)}")
    check(got.get("s3") and not got.get("s0"), f"stream errors {got}")

    st = unary("ModelStatistics", pb.ModelStatisticsRequest(name="identity"),
               pb.ModelStatisticsResponse)
    check(st.model_stats[0].inference_count >= 1, "grpc statistics")
    expect_code(lambda: unary("ModelStatistics", pb.ModelStatisticsRequest(name="nosuch"),
                              pb.ModelStatisticsResponse), grpc.StatusCode.NOT_FOUND, "stats")


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
    run_groups(server, (("http", lambda: http_tests(server.http, server.startup_log)),
                        ("extensions", lambda: extension_tests(server.http, args.work_dir)),
                        ("metrics", lambda: metrics_tests(server.metrics, args.work_dir)),
                        ("grpc", lambda: grpc_tests(server.grpc, args.proto_dir, args.work_dir))))
    if failures:
        print(f"\n{len(failures)} server check(s) failed (log: {args.work_dir}/server.log)")
        return 1
    print("all server checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
