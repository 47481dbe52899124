"""A compute-bound model with small inputs for fleet benchmarks: x FP32 [N, 256] is broadcast to
[N, 128, 256], goes through LAYERS x (MatMul by one shared 256x256 weight + Relu), and is averaged
back to [N, 256] (about 16.8 MFLOP per layer and row, 256 KiB of weights)."""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def write_mlp_repository(root, layers=8, name="mlp"):
    if os.path.exists(root):
        shutil.rmtree(root)
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array([1, 128, 256], np.int64), "shape"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [helper.make_node("Unsqueeze", ["x", "axis1"], ["x3"]),
             helper.make_node("Expand", ["x3", "shape"], ["h0"])]
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", [f"h{i}", "w"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"h{i + 1}"]))
    nodes.append(helper.make_node("ReduceMean", [f"h{layers}"], ["y"], axes=[1], keepdims=0))
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 256])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(f"{root}/{name}/1")
    onnx.save(m, f"{root}/{name}/1/model.onnx")
    with open(f"{root}/{name}/config.pbtxt", "w") as f:
        f.write(f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                'input [ { name: "x" data_type: TYPE_FP32 dims: [ 256 ] } ]\n'
                'output [ { name: "y" data_type: TYPE_FP32 dims: [ 256 ] } ]\n')
    return f"{root}/{name}/1/model.onnx"
