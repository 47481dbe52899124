#!/usr/bin/python3
"""Structured search for onnx shape-inference crashes, one operator at a time.

The byte-level `onnx` fuzz target rarely gets a mutated model past the protobuf parser and the
checker, so it reaches few operators' shape inference. This sweep builds one-node models for every
operator schema of Debian's onnx 1.12 (every version), with random input ranks and dims (some
inputs with no known shape, some as int64 initializers holding small, negative or out-of-range
values, which inference functions read as axes, shapes or pads) and random attribute values (0,
negatives, huge, empty lists). Each model runs the onnx checker, then shape inference with data
propagation (what graph/onnx_io does at load), in a forked child; a child killed by a signal is a
crash (SIGALRM: a hang past --timeout), and its model is written to --out as
<op>-<version>-<signal>-<n>.onnx. python3-onnx is built from the same 1.12 sources as libonnx, so
a finding here is checked against inferd's loader (`build-fuzz/fuzz/onnx_fuzz FILE`) and, when it
crashes there too, guarded in graph/shape_inference_guard.cc.

  /usr/bin/python3 fuzz/onnx_schema_sweep.py --minutes 10 --out build-fuzz/sweep
  /usr/bin/python3 fuzz/onnx_schema_sweep.py --ops Conv,MaxPool --minutes 1 --out /tmp/s
"""
import argparse
import collections
import os
import random
import signal
import sys
import time

import onnx
from onnx import TensorProto, checker, defs, helper, shape_inference

INT_VALUES = [0, 1, 1, 2, 3, -1, -2, -5, 7, 2**31, 2**40, -(2**62), 2**63 - 1]
STRINGS = ["", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge",
           "nearest", "linear", "cubic", "DCR", "CRD", "half_pixel", "asymmetric", "x", "ij,jk->ik",
           "...ii->...i", "i,i", "RNN", "forward", "bidirectional"]
ELEM = {"tensor(float)": TensorProto.FLOAT, "tensor(double)": TensorProto.DOUBLE,
        "tensor(float16)": TensorProto.FLOAT16, "tensor(int64)": TensorProto.INT64,
        "tensor(int32)": TensorProto.INT32, "tensor(int8)": TensorProto.INT8,
        "tensor(uint8)": TensorProto.UINT8, "tensor(bool)": TensorProto.BOOL,
        "tensor(string)": TensorProto.STRING, "tensor(int16)": TensorProto.INT16,
        "tensor(uint16)": TensorProto.UINT16, "tensor(uint32)": TensorProto.UINT32,
        "tensor(uint64)": TensorProto.UINT64, "tensor(bfloat16)": TensorProto.BFLOAT16}


def pick_type(schema, param, rng):
    allowed = [param.typeStr]
    for tc in schema.type_constraints:
        if tc.type_param_str == param.typeStr:
            allowed = list(tc.allowed_type_strs)
    tensor_types = [t for t in allowed if t in ELEM]
    return ELEM[rng.choice(tensor_types)] if tensor_types else None


def random_dims(rng):
    rank = rng.choice([0, 1, 1, 2, 2, 3, 4, 4, 5])
    return [rng.choice([1, 1, 2, 3, 4, 5, 0, "n", 2**40]) for _ in range(rank)]


def random_attr(name, attr, rng):
    t = attr.type
    A = defs.OpSchema.AttrType
    if t == A.INT:
        return helper.make_attribute(name, rng.choice(INT_VALUES))
    if t == A.INTS:
        return helper.make_attribute(name, [rng.choice(INT_VALUES[:9]) if rng.random() < 0.9 else
                                            rng.choice(INT_VALUES) for _ in range(rng.randint(0, 6))])
    if t == A.FLOAT:
        return helper.make_attribute(name, rng.choice([0.0, 1.0, -1.0, 0.5, 1e30, float("nan")]))
    if t == A.FLOATS:
        return helper.make_attribute(name, [rng.choice([0.0, 1.0, 2.0, -1.0]) for _ in range(rng.randint(0, 5))])
    if t == A.STRING:
        return helper.make_attribute(name, rng.choice(STRINGS))
    if t == A.STRINGS:
        return helper.make_attribute(name, [rng.choice(STRINGS) for _ in range(rng.randint(0, 3))])
    if t == A.TENSOR:
        dims = [d for d in random_dims(rng) if isinstance(d, int) and d < 10]
        n = 1
        for d in dims:
            n *= d
        return helper.make_attribute(name, helper.make_tensor("t", TensorProto.INT64, dims,
                                                              [rng.choice(INT_VALUES[:9]) for _ in range(n)]))
    return None  # graphs, sparse tensors, type protos: left out


def build_model(schema, rng):
    nodes, inputs, inits = [], [], []
    n_in = rng.randint(schema.min_input, min(schema.max_input, schema.min_input + 2))
    node_inputs = []
    for i in range(n_in):
        param = schema.inputs[min(i, len(schema.inputs) - 1)]
        elem = pick_type(schema, param, rng)
        if elem is None:
            return None
        name = f"in{i}"
        roll = rng.random()
        if param.option == defs.OpSchema.FormalParameterOption.Optional and roll < 0.1:
            node_inputs.append("")
            continue
        if elem == TensorProto.INT64 and roll < 0.45:
            dims = rng.choice([[], [1], [2], [3], [4], [rng.randint(0, 6)]])
            n = 1
            for d in dims:
                n *= d
            inits.append(helper.make_tensor(name, elem, dims, [rng.choice(INT_VALUES[:9]) if rng.random() < 0.85
                                                                else rng.choice(INT_VALUES) for _ in range(n)]))
        elif roll < 0.6:
            # No known shape: the output of a Reshape to a run-time shape.
            inputs.append(helper.make_tensor_value_info(f"{name}_flat", elem, ["f"]))
            inputs.append(helper.make_tensor_value_info(f"{name}_shape", TensorProto.INT64, ["r"]))
            nodes.append(helper.make_node("Reshape", [f"{name}_flat", f"{name}_shape"], [name]))
        else:
            inputs.append(helper.make_tensor_value_info(name, elem, random_dims(rng)))
        node_inputs.append(name)
    attrs = []
    for aname, attr in schema.attributes.items():
        if attr.required or rng.random() < 0.5:
            a = random_attr(aname, attr, rng)
            if a is None and attr.required:
                return None
            if a is not None:
                attrs.append(a)
    n_out = rng.randint(schema.min_output, min(schema.max_output, schema.min_output + 1))
    node = helper.make_node(schema.name, node_inputs, [f"out{i}" for i in range(n_out)],
                            domain=schema.domain)
    node.attribute.extend(attrs)
    nodes.append(node)
    # The graph's output is a pass-through input, so the node's outputs are free intermediates.
    keep = helper.make_tensor_value_info("keep", TensorProto.FLOAT, [1])
    graph = helper.make_graph(nodes, "g", inputs + [keep], [keep], initializer=inits)
    opsets = [helper.make_opsetid(schema.domain, schema.since_version)]
    if schema.domain != "":
        opsets.append(helper.make_opsetid("", 13))
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def run_child(model, timeout):
    pid = os.fork()
    if pid == 0:
        signal.alarm(timeout)
        try:
            checker.check_model(model)
            shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
        except Exception:
            pass
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=5, help="seconds per model before SIGALRM")
    ap.add_argument("--keep", type=int, default=3, help="models kept per (op, version, signal)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    wanted = set(filter(None, args.ops.split(",")))
    schemas = [s for s in defs.get_all_schemas_with_history()
               if s.domain in ("", "ai.onnx.ml") and not s.deprecated and (not wanted or s.name in wanted)]
    os.makedirs(args.out, exist_ok=True)
    found = collections.Counter()
    runs = 0
    end = time.time() + args.minutes * 60
    while time.time() < end:
        for schema in schemas:
            model = build_model(schema, rng)
            if model is None:
                continue
            runs += 1
            sig = run_child(model, args.timeout)
            if sig:
                key = (schema.name, schema.since_version, signal.Signals(sig).name)
                found[key] += 1
                if found[key] <= args.keep:
                    path = os.path.join(args.out, f"{key[0]}-{key[1]}-{key[2]}-{found[key]}.onnx")
                    onnx.save(model, path)
            if time.time() >= end:
                break
    print(f"onnx_schema_sweep: {runs} models over {len(schemas)} schemas, {sum(found.values())} crashes")
    for (op, ver, sig), n in sorted(found.items()):
        print(f"  {op}-{ver} {sig}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
