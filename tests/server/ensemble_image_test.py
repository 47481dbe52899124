#!/usr/bin/env python3
"""End-to-end test of an image-classification ensemble: raw JPEG bytes in, classification strings
out, as Triton's `ensemble_image_client.py` sends and reads them, over HTTP with the binary tensor
extension (our own client code: python3-requests).

The repository (write_image_repository, also used by bench/serving/ensemble_pipeline.py):
  preprocess       backend "inferd_image": BYTES [1] JPEG/PNG -> FP32 [3, 224, 224] (resize 256,
                   centre crop 224, ImageNet mean/std), dynamic batching
  resnet50         the ONNX model given (--model; build/models/resnet50/model.onnx), batching
  postprocess      backend "inferd_classify": FP32 scores -> BYTES top-5 "score:index:label"
  image_classify   ensemble: IMAGE -> preprocess -> resnet50 -> postprocess -> CLASSIFICATION
  preprocess_resnet50_ensemble
                   ensemble: IMAGE -> preprocess -> resnet50 -> OUTPUT (FP32 with label_filename),
                   classified by the request's class_count (the classification extension), which
                   is what ensemble_image_client.py asks for
Checks: both ensembles give the classes of the same chain called step by step; a batch of two
images; a corrupt JPEG fails only its request with a 400 naming the pre-processing step; the
ensemble's statistics and the steps' are separate. With --tritonclient DIR (Triton's Python client
sources, not committed), also runs ensemble_image_client.py unchanged against the server.
Skips (exit 0) when the model file is missing.
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, failures  # noqa: E402

LABELS = [f"class_{i}" for i in range(1000)]


def write_image_repository(root, model_path, max_batch=8, delay_us=2000):
    if os.path.exists(root):
        shutil.rmtree(root)
    batching = f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}\n"

    def folder(name, config, files=None):
        os.makedirs(f"{root}/{name}/1")
        with open(f"{root}/{name}/config.pbtxt", "w") as f:
            f.write(f'name: "{name}"\n{config}')
        for fname, text in (files or {}).items():
            with open(f"{root}/{name}/{fname}", "w") as f:
                f.write(text)

    def param(key, value):
        return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'

    folder("preprocess", f'backend: "inferd_image"\nmax_batch_size: {max_batch}\n' +
           'input [ { name: "INPUT" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
           'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n' +
           param("resize", "256") + param("crop", "224") +
           param("mean", "0.485,0.456,0.406") + param("std", "0.229,0.224,0.225") + batching)
    folder("resnet50", f'platform: "onnxruntime_onnx"\nmax_batch_size: {max_batch}\n' + batching)
    try:  # the loader refuses symlinks leading out of the model folder: a hard link, or a copy
        os.link(model_path, f"{root}/resnet50/1/model.onnx")
    except OSError:
        shutil.copyfile(model_path, f"{root}/resnet50/1/model.onnx")
    labels = "\n".join(LABELS) + "\n"
    folder("postprocess", f'backend: "inferd_classify"\nmax_batch_size: {max_batch}\n'
           'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n'
           'output [ { name: "OUTPUT" data_type: TYPE_STRING dims: [ 5 ] } ]\n' +
           param("k", "5") + param("softmax", "true") + param("labels", "labels.txt") + batching,
           {"labels.txt": labels})

    def step(model, inputs, outputs):
        ins = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
        outs = " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
        return f'{{ model_name: "{model}" model_version: -1 {ins} {outs} }}'

    image_in = (f'platform: "ensemble"\nmax_batch_size: {max_batch}\n'
                'input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]\n')
    pre = step("preprocess", {"INPUT": "IMAGE"}, {"OUTPUT": "pixels"})
    folder("image_classify", image_in +
           'output [ { name: "CLASSIFICATION" data_type: TYPE_STRING dims: [ 5 ] } ]\n'
           f'ensemble_scheduling {{ step [ {pre}, '
           f'{step("resnet50", {"input": "pixels"}, {"logits": "logits"})}, '
           f'{step("postprocess", {"INPUT": "logits"}, {"OUTPUT": "CLASSIFICATION"})} ] }}\n')
    folder("preprocess_resnet50_ensemble", image_in +
           'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1000 ] '
           'label_filename: "labels.txt" } ]\n'
           f'ensemble_scheduling {{ step [ {pre}, '
           f'{step("resnet50", {"input": "pixels"}, {"logits": "OUTPUT"})} ] }}\n',
           {"labels.txt": labels})


def test_jpegs(n=2):
    """JPEGs of ordinary photo size made from scikit-image's sample photographs."""
    from PIL import Image
    import skimage.data
    out = []
    for i, img in enumerate([skimage.data.astronaut(), skimage.data.coffee(),
                             skimage.data.chelsea()][:n]):
        buf = io.BytesIO()
        Image.fromarray(img).resize((500, 375)).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def length_prefixed(values):
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


def parse_length_prefixed(data):
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4:pos + 4 + n].decode())
        pos += 4 + n
    return out


def infer_binary(s, base, model, name, datatype, shape, raw, output, class_count=0):
    """One binary-extension request; returns (status, {output: (shape, datatype, raw)} or the
    error text)."""
    params = {"binary_data": True}
    if class_count:
        params["classification"] = class_count
    header = json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": shape,
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "outputs": [{"name": output, "parameters": params}]})
    r = s.post(f"{base}/v2/models/{model}/infer", data=header.encode() + raw,
               headers={"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"})
    if r.status_code != 200:
        return r.status_code, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    meta, pos, outs = json.loads(r.content[:n]), n, {}
    for o in meta["outputs"]:
        size = o["parameters"]["binary_data_size"]
        outs[o["name"]] = (o["shape"], o["datatype"], r.content[pos:pos + size])
        pos += size
    return 200, outs


def step_by_step(s, base, jpeg):
    """The chain called one model at a time: (logits, classification strings)."""
    code, pre = infer_binary(s, base, "preprocess", "INPUT", "BYTES", [1, 1],
                             length_prefixed([jpeg]), "OUTPUT")
    check(code == 200, f"preprocess alone: {code} {pre}")
    shape, _, pixels = pre["OUTPUT"]
    check(shape == [1, 3, 224, 224], f"preprocess output shape {shape}")
    code, res = infer_binary(s, base, "resnet50", "input", "FP32", shape, pixels, "logits")
    check(code == 200, f"resnet50 alone: {code}")
    logits = res["logits"][2]
    code, post = infer_binary(s, base, "postprocess", "INPUT", "FP32", [1, 1000], logits,
                              "OUTPUT")
    check(code == 200, f"postprocess alone: {code} {post}")
    return np.frombuffer(logits, dtype=np.float32), parse_length_prefixed(post["OUTPUT"][2])


def http_tests(base):
    s = requests.Session()
    jpegs = test_jpegs()
    md = s.get(f"{base}/v2/models/image_classify").json()
    check(md.get("platform") == "ensemble" and md["inputs"][0]["datatype"] == "BYTES",
          f"image ensemble metadata {md}")
    for k, jpeg in enumerate(jpegs):
        logits, classes = step_by_step(s, base, jpeg)
        code, outs = infer_binary(s, base, "image_classify", "IMAGE", "BYTES", [1, 1],
                                  length_prefixed([jpeg]), "CLASSIFICATION")
        got = parse_length_prefixed(outs["CLASSIFICATION"][2]) if code == 200 else outs
        check(code == 200 and outs["CLASSIFICATION"][:2] == ([1, 5], "BYTES") and got == classes,
              f"image {k}: ensemble {got} vs step by step {classes}")
        top = int(np.argmax(logits))
        check(len(got) == 5 and got[0].split(":")[1:] == [str(top), LABELS[top]],
              f"image {k}: top class {got[:1]} vs argmax {top}")
        # ensemble_image_client.py's request: class_count on the ensemble's FP32 output.
        code, outs = infer_binary(s, base, "preprocess_resnet50_ensemble", "IMAGE", "BYTES",
                                  [1, 1], length_prefixed([jpeg]), "OUTPUT", class_count=3)
        got = parse_length_prefixed(outs["OUTPUT"][2]) if code == 200 else outs
        order = list(np.argsort(-logits, kind="stable")[:3])
        check(code == 200 and [g.split(":")[1] for g in got] == [str(i) for i in order] and
              got[0].endswith(":" + LABELS[top]),
              f"image {k}: classification extension {got} vs {order}")
    # Two images in one request: one row each.
    code, outs = infer_binary(s, base, "image_classify", "IMAGE", "BYTES", [2, 1],
                              length_prefixed(jpegs), "CLASSIFICATION")
    check(code == 200 and outs["CLASSIFICATION"][0] == [2, 5],
          f"batch of two images: {code} {outs if code != 200 else outs['CLASSIFICATION'][0]}")
    # A corrupt image fails only its request, naming the step.
    code, text = infer_binary(s, base, "image_classify", "IMAGE", "BYTES", [1, 1],
                              length_prefixed([jpegs[0][:200]]), "CLASSIFICATION")
    check(code == 400 and "step 0 ('preprocess')" in text, f"corrupt JPEG: {code} {text}")
    code, _ = infer_binary(s, base, "image_classify", "IMAGE", "BYTES", [1, 1],
                           length_prefixed([jpegs[0]]), "CLASSIFICATION")
    check(code == 200, f"request after the corrupt one: {code}")
    st = s.get(f"{base}/v2/models/image_classify/stats").json()["model_stats"][0]
    check(st["inference_stats"]["success"]["count"] >= 4 and
          st["inference_stats"]["fail"]["count"] == 1, f"ensemble statistics {st}")
    st = s.get(f"{base}/v2/models/resnet50/stats").json()["model_stats"][0]
    check(st["inference_stats"]["success"]["count"] >= 8, f"resnet50 statistics {st}")


def triton_client_test(base, tritonclient, work):
    """ensemble_image_client.py, unchanged, against the server (needs Triton's client sources)."""
    example = os.path.join(tritonclient, "src", "python", "examples", "ensemble_image_client.py")
    if not os.path.exists(example):
        print(f"note: {example} not found; skipped Triton's client")
        return
    img = os.path.join(work, "astronaut.jpg")
    with open(img, "wb") as f:
        f.write(test_jpegs(1)[0])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(tritonclient, "src", "python", "library") + \
        os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, example, "-m", "preprocess_resnet50_ensemble", "-c", "3",
                        "-u", base.replace("http://", ""), img],
                       capture_output=True, text=True, env=env, timeout=120)
    check(p.returncode == 0 and "PASS" in p.stdout,
          f"ensemble_image_client.py: rc {p.returncode}\n{p.stdout}\n{p.stderr[-2000:]}")
    print(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--model", required=True, help="ResNet-50 ONNX (input 'input', 'logits')")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--tritonclient", default="", help="Triton's client sources (optional)")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        print(f"skipped: {args.model} not found (make models)")
        return 0
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repo")
    write_image_repository(repo, args.model)
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"), grpc=False,
                    args=["--threads", "2"], start_timeout=300)
    try:
        try:
            http_tests(server.http)
            if args.tritonclient:
                triton_client_test(server.http, args.tritonclient, args.work_dir)
        except Exception as e:
            check(False, f"tests raised {type(e).__name__}: {e}")
        check(server.proc.poll() is None, "server still running after all tests")
    finally:
        rc = server.stop()
    check(rc == 0, f"clean shutdown on SIGTERM (exit code {rc})")
    if failures:
        print(f"\n{len(failures)} image ensemble check(s) failed (log: {args.work_dir}/server.log)")
        return 1
    print("all image ensemble checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
