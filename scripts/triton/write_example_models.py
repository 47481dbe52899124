#!/usr/bin/python3
"""Writes the models Triton's Python client examples expect (the non-sequence ones).

    /usr/bin/python3 scripts/triton/write_example_models.py --out REPO [--image-model PATH]

Triton's examples (triton-inference-server/client, src/python/examples) talk to a repository
holding these models; we build them as ONNX with onnx.helper, under Triton's names and config:

    simple                 INT32 INPUT0, INPUT1 [N, 16] -> OUTPUT0 = sum, OUTPUT1 = difference
    simple_int8            the same in INT8
    simple_string          BYTES (decimal strings) [N, 16] -> sum and difference as strings
    simple_identity        BYTES [N, -1] -> the same strings
    custom_identity_int32  INT32 [N, -1] -> the same values
    densenet_onnx          an image classifier (with --image-model: e.g. the exported
                           MobileNetV2) under Triton's tensor names, unbatched [3, 224, 224]
                           reshaped to the model's [1, 3, 224, 224], labels file for the
                           classification extension

Sequence models are written by scripts/triton/write_sequence_models.py. The script is idempotent.
"""
import argparse
import os

import onnx
from onnx import TensorProto, helper

SIMPLE_CONFIG = """\
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: {t} dims: [ 16 ] }},
  {{ name: "INPUT1" data_type: {t} dims: [ 16 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: {t} dims: [ 16 ] }},
  {{ name: "OUTPUT1" data_type: {t} dims: [ 16 ] }}
]
"""

IDENTITY_CONFIG = """\
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: {t} dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: {t} dims: [ -1 ] }} ]
"""


def save(repo, name, model, config):
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(repo, name, "1", "model.onnx"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)


def add_sub_model(elem, compute_elem=None):
    """INPUT0 + INPUT1, INPUT0 - INPUT1; strings are cast to `compute_elem` and back."""
    inputs = [helper.make_tensor_value_info(n, elem, ["N", 16]) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, elem, ["N", 16]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes, a, b = [], "INPUT0", "INPUT1"
    if compute_elem is not None:
        nodes += [helper.make_node("Cast", ["INPUT0"], ["a"], to=compute_elem),
                  helper.make_node("Cast", ["INPUT1"], ["b"], to=compute_elem)]
        a, b = "a", "b"
    s, d = ("sum", "diff") if compute_elem is not None else ("OUTPUT0", "OUTPUT1")
    nodes += [helper.make_node("Add", [a, b], [s]), helper.make_node("Sub", [a, b], [d])]
    if compute_elem is not None:
        nodes += [helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=elem),
                  helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=elem)]
    graph = helper.make_graph(nodes, "add_sub", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def identity_model(elem):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "identity",
        [helper.make_tensor_value_info("INPUT0", elem, ["N", "L"])],
        [helper.make_tensor_value_info("OUTPUT0", elem, ["N", "L"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def write_image_model(repo, model_path):
    """densenet_onnx: Triton's image example model name, here any NCHW ImageNet classifier."""
    model = onnx.load(model_path)
    # Triton's densenet_onnx names its tensors data_0 and fc6_1, and grpc_client.py hard-codes them.
    rename = {model.graph.input[0].name: "data_0", model.graph.output[0].name: "fc6_1"}
    for v in list(model.graph.input[:1]) + list(model.graph.output[:1]):
        v.name = rename[v.name]
    for node in model.graph.node:
        node.input[:] = [rename.get(n, n) for n in node.input]
        node.output[:] = [rename.get(n, n) for n in node.output]
    inp, out = "data_0", "fc6_1"
    dst = os.path.join(repo, "densenet_onnx")
    os.makedirs(os.path.join(dst, "1"), exist_ok=True)
    onnx.save(model, os.path.join(dst, "1", "model.onnx"))
    with open(os.path.join(dst, "densenet_labels.txt"), "w") as f:
        f.writelines(f"CLASS_{i}\n" for i in range(1000))
    with open(os.path.join(dst, "config.pbtxt"), "w") as f:
        f.write(f"""\
name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ {{ name: "{inp}" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ]
          reshape: {{ shape: [ 1, 3, 224, 224 ] }} }} ]
output [ {{ name: "{out}" data_type: TYPE_FP32 dims: [ 1000 ]
           reshape: {{ shape: [ 1, 1000 ] }} label_filename: "densenet_labels.txt" }} ]
""")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="repository folder to (re)write")
    ap.add_argument("--image-model", help="an NCHW [N,3,224,224] -> [N,1000] ONNX classifier")
    args = ap.parse_args()
    repo = args.out
    save(repo, "simple", add_sub_model(TensorProto.INT32),
         SIMPLE_CONFIG.format(name="simple", t="TYPE_INT32"))
    save(repo, "simple_int8", add_sub_model(TensorProto.INT8),
         SIMPLE_CONFIG.format(name="simple_int8", t="TYPE_INT8"))
    save(repo, "simple_string", add_sub_model(TensorProto.STRING, TensorProto.INT32),
         SIMPLE_CONFIG.format(name="simple_string", t="TYPE_STRING"))
    save(repo, "simple_identity", identity_model(TensorProto.STRING),
         IDENTITY_CONFIG.format(name="simple_identity", t="TYPE_STRING"))
    save(repo, "custom_identity_int32", identity_model(TensorProto.INT32),
         IDENTITY_CONFIG.format(name="custom_identity_int32", t="TYPE_INT32"))
    if args.image_model:
        write_image_model(repo, args.image_model)
    print(f"wrote {repo}")


if __name__ == "__main__":
    main()
