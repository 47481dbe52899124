#!/usr/bin/python3
"""Writes the example model repository that `make run` serves (Triton's layout).

    /usr/bin/python3 tests/cli/example_repository.py --models build/models \
        --out build/example_repository [--image mobilenet_v2|resnet50] \
        [--gen-models build/models/gen]

MODELS is the cache written by scripts/export_models.py. The repository gets:

    identity/       FP32 [N, 16] -> [N, 16] (written here), max_batch_size 64, no dynamic batching
    dlrm/           the recommender, max_batch_size 64 with dynamic batching
    bert_base/      BERT-base, ragged batching over the sequence length (padded with 0)
    <image>/        MobileNetV2 (default) or ResNet-50, max_batch_size 8 with dynamic batching
    tiny-llama/     with --gen-models and once scripts/generation/build_models.py built it: the
                    Jane Austen decoder, a generative model (backend "inferd_generate") served on
                    the OpenAI-compatible /v1 routes, with a chat_template.json

Version folders hard-link the exported model files (no 500 MB copies; a symlink out of a model
folder is refused by the server); the config.pbtxt files use
Triton's field names, so the same folder loads in Triton's onnxruntime backend. The script is
idempotent: it rewrites the configs and links every time.
"""
import argparse
import os
import shutil
import sys

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_test import link_decoder_files, link_model_file  # noqa: E402

CONFIGS = {
    "identity": """\
name: "identity"
platform: "onnxruntime_onnx"
max_batch_size: 64
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "dlrm": """\
name: "dlrm"
platform: "onnxruntime_onnx"
max_batch_size: 64
input [
  { name: "dense_features" data_type: TYPE_FP32 dims: [ 13 ] },
  { name: "sparse_ids" data_type: TYPE_INT64 dims: [ 8, 4 ] }
]
output [ { name: "probability" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching {
  preferred_batch_size: [ 64 ]
  max_queue_delay_microseconds: 2000
}
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "bert_base": """\
name: "bert_base"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true },
  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true }
]
output [
  { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 768 ] },
  { name: "pooler_output" data_type: TYPE_FP32 dims: [ 768 ] }
]
dynamic_batching { max_queue_delay_microseconds: 5000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "image": """\
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
dynamic_batching {{ preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 5000 }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
""",
}


GEN_CONFIG = """\
name: "tiny-llama"
backend: "inferd_generate"
parameters { key: "kv_cache_bytes" value: { string_value: "64MiB" } }
parameters { key: "block_size" value: { string_value: "16" } }
parameters { key: "max_num_batched_tokens" value: { string_value: "512" } }
parameters { key: "max_num_seqs" value: { string_value: "16" } }
"""

# server/chat_template.h's format. The model was trained on prose (with straight quotes), not
# dialogue: the template frames the conversation as a novel's, so its answer is the next quoted
# speech, and the closing quote stops it.
GEN_CHAT_TEMPLATE = r"""{
  "roles": {
    "system": {"prefix": "", "suffix": "\n\n"},
    "user": {"prefix": "\"", "suffix": "\" said Elizabeth.\n\n"},
    "assistant": {"prefix": "\"", "suffix": "\" replied Mr. Darcy.\n\n"}
  },
  "generation_prompt": "\"",
  "stop": ["\""]
}
"""


def write_generative(gen_models, out):
    """tiny-llama/ linking the files of GEN_MODELS/tiny-llama; False when it is not built."""
    src = os.path.join(gen_models, "tiny-llama")
    if not os.path.exists(os.path.join(src, "model.onnx")):
        return False
    link_decoder_files(src, os.path.join(out, "tiny-llama", "1"))
    with open(os.path.join(out, "tiny-llama", "config.pbtxt"), "w") as f:
        f.write(GEN_CONFIG)
    with open(os.path.join(out, "tiny-llama", "chat_template.json"), "w") as f:
        f.write(GEN_CHAT_TEMPLATE)
    return True


def write_identity(path):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="scripts/export_models.py output folder")
    ap.add_argument("--out", required=True, help="repository folder to (re)write")
    ap.add_argument("--image", default="mobilenet_v2", choices=["mobilenet_v2", "resnet50"])
    ap.add_argument("--gen-models", help="scripts/generation/build_models.py output folder")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    # Only our own model folders are rewritten; anything else a user put there stays.
    for name in ("identity", "dlrm", "bert_base", "mobilenet_v2", "resnet50", "tiny-llama"):
        shutil.rmtree(os.path.join(args.out, name), ignore_errors=True)

    models = {"identity": None, "dlrm": "dlrm", "bert_base": "bert_base", args.image: args.image}
    for name, exported in models.items():
        version_dir = os.path.join(args.out, name, "1")
        os.makedirs(version_dir)
        if exported is None:
            write_identity(os.path.join(version_dir, "model.onnx"))
        else:
            src = os.path.join(args.models, exported, "model.onnx")
            if not os.path.exists(src):
                sys.exit(f"example_repository: {src} is missing; run scripts/export_models.py")
            link_model_file(src, os.path.join(version_dir, "model.onnx"))
        config = CONFIGS.get(name) or CONFIGS["image"].format(name=name)
        with open(os.path.join(args.out, name, "config.pbtxt"), "w") as f:
            f.write(config)
    names = sorted(models)
    if args.gen_models and write_generative(args.gen_models, args.out):
        names.append("tiny-llama")
    print(f"example repository: {', '.join(names)} in {args.out}")


if __name__ == "__main__":
    main()
