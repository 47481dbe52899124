#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (committed; a few KiB
each). Seeds are real inputs: the request bodies, configs and models the server tests send and
load (tests/server/server_test.py, src/server/http_codec_test.cc, Triton's examples), so the
fuzzers start from inputs that reach deep into each decoder rather than from random bytes.

    /usr/bin/python3 fuzz/make_corpus.py            # rewrites the seed_* files, keeps the rest
    /usr/bin/python3 fuzz/make_corpus.py --check    # exits 1 if a seed is missing or stale

Files not named seed_* (inputs of past crashes, crash_*, and inputs the fuzzers found worth
keeping) are left alone. Needs python3-numpy, python3-onnx and protoc (all in
scripts/install_deps.sh).
"""
import argparse
import io
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def http_seed(body, header_length=None):
    """The http_codec target's layout: flag byte, 4-byte header length, body."""
    if isinstance(body, str):
        body = body.encode()
    flag = 0 if header_length is None else 1
    return bytes([flag]) + struct.pack("<I", header_length or 0) + body


def http_seeds():
    seeds = {}
    seeds["json_fp32"] = http_seed(json.dumps({
        "id": "r1", "parameters": {"priority": 2, "timeout": 1500},
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]}],
        "outputs": [{"name": "y", "parameters": {"binary_data": False}}]}))
    seeds["json_int64_two_inputs"] = http_seed(json.dumps({
        "inputs": [{"name": "a", "datatype": "INT64", "shape": [1, 4], "data": [1, 2, 3, 4]},
                   {"name": "b", "datatype": "INT64", "shape": [1, 4], "data": [5, 6, 7, 8]}]}))
    seeds["json_bytes"] = http_seed(json.dumps({
        "inputs": [{"name": "s", "datatype": "BYTES", "shape": [2], "data": ["hello", "wörld"]}],
        "parameters": {"binary_data_output": True}}))
    seeds["json_types"] = http_seed(json.dumps({"inputs": [
        {"name": n, "datatype": t, "shape": [2], "data": d} for n, t, d in [
            ("b", "BOOL", [True, False]), ("u8", "UINT8", [0, 255]), ("i8", "INT8", [-128, 127]),
            ("u16", "UINT16", [0, 65535]), ("i32", "INT32", [-1, 1]), ("u64", "UINT64", [0, 1]),
            ("h", "FP16", [0.5, -2]), ("bf", "BF16", [1.5, 3]), ("d", "FP64", [1e300, -1e-300])]]}))
    seeds["json_sequence_classification"] = http_seed(json.dumps({
        "id": "seq", "parameters": {"sequence_id": 42, "sequence_start": True,
                                    "sequence_end": False},
        "inputs": [{"name": "x", "datatype": "INT32", "shape": [1, 1], "data": [7]}],
        "outputs": [{"name": "y", "parameters": {"classification": 2}}]}))
    seeds["json_shared_memory"] = http_seed(json.dumps({
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [4],
                    "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 16,
                                   "shared_memory_offset": 0}}],
        "outputs": [{"name": "y", "parameters": {"shared_memory_region": "o",
                                                  "shared_memory_byte_size": 16}}]}))
    header = json.dumps({
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [4],
                    "parameters": {"binary_data_size": 16}},
                   {"name": "s", "datatype": "BYTES", "shape": [2],
                    "parameters": {"binary_data_size": 14}}],
        "parameters": {"binary_data_output": True}}).encode()
    raw = np.arange(4, dtype=np.float32).tobytes()
    strings = b"".join(struct.pack("<I", len(s)) + s for s in (b"abcd", b"ef"))
    seeds["binary_fp32_bytes"] = http_seed(header + raw + strings, len(header))
    return seeds


def grpc_seeds(work):
    subprocess.run(["protoc", f"-I{ROOT}/proto", f"--python_out={work}",
                    f"{ROOT}/proto/model_config.proto", f"{ROOT}/proto/grpc_service.proto"],
                   check=True)
    sys.path.insert(0, work)
    import grpc_service_pb2 as pb
    seeds = {}
    r = pb.ModelInferRequest(model_name="add", model_version="2", id="g1")
    for name in ("a", "b"):
        t = r.inputs.add(name=name, datatype="INT64", shape=[1, 4])
        t.contents.int64_contents.extend([1, 2, 3, 4])
    r.outputs.add(name="sum")
    seeds["typed_int64"] = r.SerializeToString(deterministic=True)
    r = pb.ModelInferRequest(model_name="identity", id="g2")
    r.inputs.add(name="x", datatype="FP32", shape=[1, 16])
    r.raw_input_contents.append(np.arange(16, dtype=np.float32).tobytes())
    r.parameters["priority"].int64_param = 1
    r.parameters["timeout"].int64_param = 1000
    seeds["raw_fp32"] = r.SerializeToString(deterministic=True)
    r = pb.ModelInferRequest(model_name="strings", id="g3")
    t = r.inputs.add(name="s", datatype="BYTES", shape=[2])
    t.contents.bytes_contents.extend([b"hello", b"w\xc3\xb6rld"])
    r.parameters["sequence_id"].string_param = "corr"
    r.parameters["sequence_start"].bool_param = True
    o = r.outputs.add(name="y")
    o.parameters["classification"].int64_param = 3
    seeds["bytes_sequence"] = r.SerializeToString(deterministic=True)
    r = pb.ModelInferRequest(model_name="types")
    for name, dt, field, vals in [("b", "BOOL", "bool_contents", [True]),
                                  ("i", "INT32", "int_contents", [-5]),
                                  ("u", "UINT64", "uint64_contents", [5]),
                                  ("f", "FP32", "fp32_contents", [0.25]),
                                  ("d", "FP64", "fp64_contents", [2.5])]:
        t = r.inputs.add(name=name, datatype=dt, shape=[1])
        getattr(t.contents, field).extend(vals)
    seeds["typed_all"] = r.SerializeToString(deterministic=True)
    return seeds


def openai_seeds():
    # The target's layout: byte 0 % 3 = API (0 completions, 1 chat, 2 Triton generate).
    def s(api, body):
        return bytes([api]) + json.dumps(body).encode()
    return {
        "completion": s(0, {"model": "tiny-llama", "prompt": "It is a truth", "max_tokens": 8,
                            "temperature": 0.7, "top_p": 0.9, "seed": 1, "stop": ["\n"],
                            "logprobs": 2}),
        "completion_tokens_stream": s(0, {"model": "m", "prompt": [1, 2, 3], "stream": True,
                                          "stream_options": {"include_usage": True},
                                          "max_tokens": 4}),
        "chat": s(1, {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hello"}],
                      "max_tokens": 16, "frequency_penalty": 0.5, "presence_penalty": 0.1,
                      "top_k": 20, "n": 1}),
        "triton_generate": s(2, {"text_input": "Once upon", "parameters": {"max_tokens": 5,
                                                                        "temperature": 0}}),
    }


def config_seeds():
    # The target's layout: byte 0 bit 0 = strict parsing; the rest is config.pbtxt.
    configs = {
        "add_dynamic": 'name: "add"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                       'input [ { name: "a" data_type: TYPE_INT64 dims: [ 4 ] },\n'
                       '        { name: "b" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
                       'output [ { name: "sum" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
                       'dynamic_batching { max_queue_delay_microseconds: 500 }\n',
        "full": 'name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 16\n'
                'version_policy { latest { num_versions: 2 } }\n'
                'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]\n'
                'output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "l.txt" } ]\n'
                'instance_group [ { count: 2 kind: KIND_CPU } ]\n'
                'dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100\n'
                '  priority_levels: 2 default_priority_level: 1\n'
                '  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 5000\n'
                '    allow_timeout_override: true max_queue_size: 64 }\n'
                '  priority_queue_policy { key: 1 value { max_queue_size: 8 } } }\n'
                'model_warmup [ { name: "w" batch_size: 2 count: 1\n'
                '  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } } ]\n'
                'parameters { key: "k" value { string_value: "v" } }\n'
                'default_model_filename: "model.onnx"\n',
        "sequence": 'name: "seq"\nmax_batch_size: 4\n'
                    'input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                    'output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                    'sequence_batching { max_sequence_idle_microseconds: 5000000\n'
                    '  direct { }\n'
                    '  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START\n'
                    '    int32_false_true: [ 0, 1 ] } ] },\n'
                    '    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID\n'
                    '    data_type: TYPE_UINT64 } ] } ]\n'
                    '  state [ { input_name: "s_in" output_name: "s_out" data_type: TYPE_FP32\n'
                    '    dims: [ 2 ] } ] }\n',
        "ensemble": 'name: "ens"\nplatform: "ensemble"\nmax_batch_size: 8\n'
                    'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                    'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                    'ensemble_scheduling { step [ { model_name: "a" model_version: -1\n'
                    '  input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } } ] }\n',
        "generate": 'name: "gen"\nbackend: "inferd_generate"\n'
                    'parameters { key: "max_num_seqs" value { string_value: "16" } }\n',
        "empty": '',
    }
    seeds = {}
    for name, text in configs.items():
        seeds[name + "_strict"] = b"\x01" + text.encode()
        seeds[name + "_lenient"] = b"\x00" + text.encode()
    return seeds


def onnx_seeds():
    def model(nodes, inputs, outputs, inits=(), opset=13):
        g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m.SerializeToString()
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    w = helper.make_tensor("w", f, [4, 2], np.arange(8, dtype=np.float32).tobytes(), raw=True)
    b = helper.make_tensor("b", f, [2], [0.5, -0.5])
    return {
        "identity": model([helper.make_node("Identity", ["x"], ["y"])],
                          [vi("x", f, ["N", 16])], [vi("y", f, ["N", 16])]),
        "add_int64": model([helper.make_node("Add", ["a", "b"], ["sum"])],
                           [vi("a", TensorProto.INT64, ["N", 4]),
                            vi("b", TensorProto.INT64, ["N", 4])],
                           [vi("sum", TensorProto.INT64, ["N", 4])]),
        "gemm_relu": model([helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=0),
                            helper.make_node("Relu", ["h"], ["y"])],
                           [vi("x", f, ["N", 4])], [vi("y", f, ["N", 2])], [w, b]),
        "conv_pool": model([helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
                            helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2])],
                           [vi("x", f, [1, 1, 4, 4])], [vi("y", f, None)],
                           [helper.make_tensor("k", f, [1, 1, 3, 3], [1.0] * 9)]),
        "external_data_ref": external_model(),
    }


def external_model():
    """A model whose initializer points at external data: the loader must refuse to read it
    (the fuzz target's folder does not exist) without crashing."""
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "8")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def npy_seeds():
    seeds = {}
    for name, arr in [("f32_2x3", np.arange(6, dtype=np.float32).reshape(2, 3)),
                      ("i64_scalar", np.array(7, dtype=np.int64)),
                      ("u8_empty", np.zeros((0, 4), dtype=np.uint8)),
                      ("f16_fortran", np.asfortranarray(np.ones((2, 2), dtype=np.float16))),
                      ("bool_be_i32", np.array([1, 2], dtype=">i4")),
                      ("f64_3d", np.linspace(0, 1, 8).reshape(2, 2, 2))]:
        buf = io.BytesIO()
        np.save(buf, arr)
        seeds[name] = buf.getvalue()
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3, dtype=np.int32), version=(2, 0))
    seeds["i32_v2"] = buf.getvalue()
    return seeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a seed is missing or stale")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        targets = {"http_codec": http_seeds(), "grpc_codec": grpc_seeds(work),
                   "openai_codec": openai_seeds(), "model_config": config_seeds(),
                   "onnx": onnx_seeds(), "npy": npy_seeds()}
    stale = []
    for target, seeds in targets.items():
        folder = os.path.join(CORPUS, target)
        os.makedirs(folder, exist_ok=True)
        for name, data in seeds.items():
            path = os.path.join(folder, "seed_" + name)
            old = open(path, "rb").read() if os.path.exists(path) else None
            if old != data:
                stale.append(path)
                if not args.check:
                    with open(path, "wb") as f:
                        f.write(data)
        total = sum(len(d) for d in seeds.values())
        print(f"{target}: {len(seeds)} seeds, {total} bytes")
    if args.check and stale:
        print("stale or missing seeds:", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
