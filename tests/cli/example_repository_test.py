#!/usr/bin/env python3
"""`make run`'s repository loads whole: tests/cli/example_repository.py writes it from the exported
models, `inferd serve` loads it and every model in it must be READY (a symlinked model file that
the server's confinement refuses left dlrm, bert_base and the image model UNAVAILABLE once while
the server still started), then one request per ONNX model is answered.

  example_repository_test.py --inferd BIN --models DIR --gen-models DIR --work-dir DIR
"""
import argparse
import os
import subprocess
import sys

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_test import Server, check, failures  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

REQUESTS = {
    "identity": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))}],
    "dlrm": [{"name": "dense_features", "datatype": "FP32", "shape": [1, 13], "data": [0.5] * 13},
             {"name": "sparse_ids", "datatype": "INT64", "shape": [1, 8, 4],
              "data": list(range(32))}],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--gen-models", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repo")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "cli", "example_repository.py"),
                    "--models", args.models, "--out", repo, "--gen-models", args.gen_models],
                   check=True)
    expected = sorted(n for n in os.listdir(repo) if os.path.isdir(os.path.join(repo, n)))
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"), grpc=False,
                    args=["--threads", "2"], start_timeout=300)
    try:
        index = requests.post(f"{server.http}/v2/repository/index", timeout=30).json()
        states = {m["name"]: (m.get("state"), m.get("reason", "")) for m in index}
        for name in expected:
            if name == "tiny-llama":  # generative models are served on /v1, not in the index
                r = requests.get(f"{server.http}/v1/models", timeout=30)
                check(r.ok and any(m["id"] == name for m in r.json()["data"]),
                      f"{name} listed on /v1/models: {r.status_code} {r.text[:200]}")
                continue
            check(states.get(name, ("missing",))[0] == "READY", f"{name} READY: {states.get(name)}")
        for name, inputs in REQUESTS.items():
            r = requests.post(f"{server.http}/v2/models/{name}/infer", json={"inputs": inputs},
                              timeout=60)
            check(r.ok and r.json().get("outputs"), f"{name} answers: {r.status_code} "
                  f"{r.text[:200]}")
    finally:
        rc = server.stop()
    check(rc == 0, f"clean shutdown (exit code {rc})")
    if failures:
        print(f"\n{len(failures)} example repository check(s) failed (log: {args.work_dir})")
        return 1
    print(f"example repository: {', '.join(expected)} all served")
    return 0


if __name__ == "__main__":
    sys.exit(main())
