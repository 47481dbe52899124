#!/usr/bin/python3
"""Exports the real-model test set to ONNX, with reference inputs and PyTorch's outputs.

    /usr/bin/python3 scripts/export_models.py --out build/models [--only NAME] [--force]

For each model NAME it writes (weights are random with fixed seeds; nothing is downloaded):

    OUT/NAME/model.onnx            torch.onnx.export, opset 17, dynamic batch (and seq for BERT)
    OUT/NAME/inputs/<input>.npy    the reference inputs (fixed seed)
    OUT/NAME/expected/<output>.npy PyTorch's outputs for them
    OUT/NAME/cases/<case>/{inputs,expected}/...  extra shapes (BERT: another batch and seq length)
    OUT/NAME/manifest.json         inputs, outputs, opset and cases; written last

A model whose manifest.json exists is skipped (the script is idempotent and cheap to re-run)
unless the model's build recipe (manifest "recipe", e.g. ResNet-50's residual BN scale) changed;
--force re-exports. Each model is built in OUT/NAME.tmp and renamed, so an interrupted run leaves
no half-written cache. Must run under Debian's /usr/bin/python3 (python3-torch, -torchvision,
-onnx, -numpy).
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import bert, dlrm  # noqa: E402

OPSET = 17
SEED = 20261130


def _generator(offset):
    return torch.Generator().manual_seed(SEED + offset)


def _calibrate_batch_norm(model, shape, batches=4):
    """Gives BatchNorm layers realistic running statistics (random-weight torchvision models have
    mean 0 / var 1, which lets activations grow layer after layer)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    g = _generator(100)
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape, generator=g))
    model.eval()


# Scale of the last BatchNorm in each ResNet-50 bottleneck (torchvision initializes it to 1).
RESIDUAL_BN_GAMMA = 0.2


def build_resnet50():
    """Random ResNet-50 with data-estimated BN statistics and small residual-branch scales.

    With gamma = 1 on every bottleneck's last BN, a random network with data-estimated BN
    statistics is chaotic: 50 dB of input noise comes out as 22 dB logits SQNR, so no 8-bit model
    of it can agree with FP32 (docs/quantization.md, "ResNet-50 test model"). Trained ResNets
    have small gammas there (zero-gamma init; the branches stay small next to the identity path),
    so the exported network uses RESIDUAL_BN_GAMMA: same architecture, weights shape and FLOPs.
    """
    import torchvision
    torch.manual_seed(SEED)
    model = torchvision.models.resnet50(weights=None)
    for m in model.modules():
        if isinstance(m, torchvision.models.resnet.Bottleneck):
            torch.nn.init.constant_(m.bn3.weight, RESIDUAL_BN_GAMMA)
    _calibrate_batch_norm(model, (8, 3, 224, 224))
    return model


def build_mobilenet_v2():
    import torchvision
    torch.manual_seed(SEED + 1)
    model = torchvision.models.mobilenet_v2(weights=None)
    _calibrate_batch_norm(model, (8, 3, 224, 224))
    return model


def build_bert_base():
    torch.manual_seed(SEED + 2)
    return bert.BertModel(bert.BertConfig()).eval()


def build_dlrm():
    torch.manual_seed(SEED + 3)
    return dlrm.Dlrm().eval()


def image_inputs(batch, seed_offset):
    return {"input": torch.randn(batch, 3, 224, 224, generator=_generator(seed_offset))}


def bert_inputs(batch, seq, seed_offset):
    g = _generator(seed_offset)
    ids = torch.randint(0, bert.BertConfig().vocab_size, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    # Row 0 is unpadded; later rows end in progressively more padding (at least one kept token).
    for row in range(1, batch):
        pad = min(seq - 1, row * max(1, seq // 4))
        mask[row, seq - pad:] = 0
    ids[mask == 0] = 0  # [PAD]
    return {"input_ids": ids, "attention_mask": mask}


def dlrm_inputs(batch, seed_offset):
    dense, ids = dlrm.random_inputs(batch, _generator(seed_offset))
    return {"dense_features": dense, "sparse_ids": ids}


# name -> (builder, input names, output names, dynamic axes, {case: inputs factory}).
# The case named "default" is stored at OUT/NAME/{inputs,expected}; others under cases/<case>/.
MODELS = {
    "resnet50": dict(
        build=build_resnet50, inputs=["input"], outputs=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        cases={"default": lambda: image_inputs(2, 10)},
        recipe={"residual_bn_gamma": RESIDUAL_BN_GAMMA}),
    "mobilenet_v2": dict(
        build=build_mobilenet_v2, inputs=["input"], outputs=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        cases={"default": lambda: image_inputs(2, 11)}),
    "bert_base": dict(
        build=build_bert_base, inputs=["input_ids", "attention_mask"],
        outputs=["last_hidden_state", "pooler_output"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                      "attention_mask": {0: "batch", 1: "seq"},
                      "last_hidden_state": {0: "batch", 1: "seq"},
                      "pooler_output": {0: "batch"}},
        cases={"default": lambda: bert_inputs(2, 16, 12),
               "b3_s40": lambda: bert_inputs(3, 40, 13)}),
    "dlrm": dict(
        build=build_dlrm, inputs=["dense_features", "sparse_ids"], outputs=["probability"],
        dynamic_axes={"dense_features": {0: "batch"}, "sparse_ids": {0: "batch"},
                      "probability": {0: "batch"}},
        cases={"default": lambda: dlrm_inputs(2, 14),
               "b16": lambda: dlrm_inputs(16, 15)}),
}


def _save_case(model, spec, inputs, case_dir):
    os.makedirs(os.path.join(case_dir, "inputs"))
    os.makedirs(os.path.join(case_dir, "expected"))
    with torch.inference_mode():
        outs = model(*[inputs[n] for n in spec["inputs"]])
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    for name in spec["inputs"]:
        np.save(os.path.join(case_dir, "inputs", name + ".npy"), inputs[name].numpy())
    for name, t in zip(spec["outputs"], outs):
        np.save(os.path.join(case_dir, "expected", name + ".npy"), t.numpy())
    return {n: list(inputs[n].shape) for n in spec["inputs"]}


def _value_info(v):
    t = v.type.tensor_type
    dims = [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]
    return {"name": v.name, "dtype": onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.elem_type].name,
            "shape": dims}


def export(name, out_dir, force):
    spec = MODELS[name]
    final = os.path.join(out_dir, name)
    manifest_path = os.path.join(final, "manifest.json")
    if os.path.exists(manifest_path) and not force:
        with open(manifest_path) as f:
            cached_recipe = json.load(f).get("recipe")
        if cached_recipe == spec.get("recipe"):
            print(f"{name}: cached in {final}")
            return
        print(f"{name}: cached export was built with recipe {cached_recipe}, now "
              f"{spec.get('recipe')}: re-exporting")
    start = time.time()
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    model = spec["build"]()
    model.eval()
    cases = {case: make() for case, make in spec["cases"].items()}
    default = cases["default"]
    onnx_path = os.path.join(tmp, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, tuple(default[n] for n in spec["inputs"]), onnx_path,
                          input_names=spec["inputs"], output_names=spec["outputs"],
                          dynamic_axes=spec["dynamic_axes"], opset_version=OPSET,
                          do_constant_folding=True)
    onnx.checker.check_model(onnx_path)
    proto = onnx.load(onnx_path, load_external_data=False)
    export_s = time.time() - start

    manifest = {
        "name": name, "opset": OPSET, "seed": SEED, "torch": torch.__version__,
        "inputs": [_value_info(v) for v in proto.graph.input],
        "outputs": [_value_info(v) for v in proto.graph.output],
        "ops": sorted({n.op_type for n in proto.graph.node}),
        "cases": [],
    }
    if "recipe" in spec:  # build choices that change the weights (checked by tests/quantize/)
        manifest["recipe"] = spec["recipe"]
    for case, inputs in cases.items():
        rel = "." if case == "default" else os.path.join("cases", case)
        shapes = _save_case(model, spec, inputs, os.path.join(tmp, rel))
        manifest["cases"].append({"name": case, "dir": rel, "shapes": shapes})
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    size_mb = os.path.getsize(os.path.join(final, "model.onnx")) / 2**20
    print(f"{name}: exported {size_mb:.0f} MiB (opset {OPSET}, ops: {', '.join(manifest['ops'])}) "
          f"and {len(cases)} reference case(s) to {final} in {time.time() - start:.1f} s "
          f"(export {export_s:.1f} s)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="build/models", help="output folder (default build/models)")
    p.add_argument("--only", action="append", choices=sorted(MODELS),
                   help="export only this model (repeatable)")
    p.add_argument("--force", action="store_true", help="re-export even when cached")
    args = p.parse_args()
    start = time.time()
    names = args.only or list(MODELS)
    for name in names:
        export(name, args.out, args.force)
    print(f"done: {len(names)} model(s) in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
