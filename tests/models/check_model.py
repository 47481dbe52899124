#!/usr/bin/python3
"""Runs one exported model through `inferd run` and compares its outputs with PyTorch's.

    /usr/bin/python3 tests/models/check_model.py --inferd build/inferd \
        --models-dir build/models --model bert_base [--case default --case b3_s40]

The models and reference data come from scripts/export_models.py (OUT/NAME/manifest.json lists the
cases). For every case it runs

    inferd run OUT/NAME/model.onnx --input NAME=FILE.npy ... --output-dir WORK/NAME/CASE --threads N

and checks each expected output elementwise: |a - b| <= atol + rtol * |b| with rtol 1e-3 and
atol = 1e-4 * max|b| (tolerance relative to the output's scale). Exit code 0 when every case
passes, 1 otherwise, with a line per output saying how close it came.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def compare(name, actual, expected, rtol, atol_scale):
    """Returns (ok, message)."""
    if actual.shape != expected.shape:
        return False, f"{name}: shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return False, f"{name}: dtype {actual.dtype}, expected {expected.dtype}"
    a = actual.astype(np.float64)
    b = expected.astype(np.float64)
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    atol = atol_scale * scale
    err = np.abs(a - b)
    bad = ~(err <= atol + rtol * np.abs(b))  # NaN in `a` counts as bad
    worst = int(np.argmax(np.where(np.isnan(err), np.inf, err))) if err.size else 0
    summary = (f"max |diff| {np.max(err) if err.size else 0:.3g} (scale {scale:.3g}, "
               f"atol {atol:.3g}, rtol {rtol:g})")
    if bad.any():
        idx = np.unravel_index(worst, b.shape)
        return False, (f"{name}: {int(bad.sum())} of {b.size} elements out of tolerance; {summary}; "
                       f"worst at {tuple(int(i) for i in idx)}: got {a[idx]:.6g}, "
                       f"expected {b[idx]:.6g}")
    return True, f"{name}: ok, {summary}"


def run_case(args, model_dir, manifest, case):
    case_dir = os.path.normpath(os.path.join(model_dir, case["dir"]))
    out_dir = os.path.join(args.work_dir, manifest["name"], case["name"])
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".npy"):
            os.remove(os.path.join(out_dir, f))
    cmd = [args.inferd, "run", os.path.join(model_dir, "model.onnx")]
    for inp in manifest["inputs"]:
        cmd += ["--input", f"{inp['name']}={os.path.join(case_dir, 'inputs', inp['name'] + '.npy')}"]
    # Three runs: the second and third use the memory plan, with the arena NaN-filled first, and
    # must reproduce the first bit for bit (no kernel may read memory it did not write).
    cmd += ["--output-dir", out_dir, "--threads", str(args.threads), "--runs", "3",
            "--poison-arena"]
    label = f"{manifest['name']}/{case['name']} {case['shapes']}"
    print("$ " + " ".join(cmd), flush=True)
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.time() - start
    if proc.returncode != 0:
        print(f"FAIL {label}: inferd exited with {proc.returncode} after {elapsed:.1f} s\n"
              f"{proc.stderr.strip()[-4000:]}")
        return False
    ok = True
    for out in manifest["outputs"]:
        expected = np.load(os.path.join(case_dir, "expected", out["name"] + ".npy"))
        path = os.path.join(out_dir, out["name"] + ".npy")
        if not os.path.exists(path):
            print(f"FAIL {label}: inferd wrote no {path}")
            ok = False
            continue
        good, msg = compare(out["name"], np.load(path), expected, args.rtol, args.atol_scale)
        print(("  " if good else "  FAIL ") + msg)
        ok = ok and good
    print(f"{'PASS' if ok else 'FAIL'} {label} ({elapsed:.1f} s)", flush=True)
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inferd", required=True, help="path to the inferd binary")
    p.add_argument("--models-dir", required=True, help="scripts/export_models.py's --out folder")
    p.add_argument("--model", required=True)
    p.add_argument("--case", action="append", help="case name (repeatable; default: all)")
    p.add_argument("--work-dir", default=None, help="where outputs go (default MODELS_DIR/_runs)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol-scale", type=float, default=1e-4,
                   help="absolute tolerance as a fraction of max|expected|")
    args = p.parse_args()
    args.work_dir = args.work_dir or os.path.join(args.models_dir, "_runs")

    model_dir = os.path.join(args.models_dir, args.model)
    manifest_path = os.path.join(model_dir, "manifest.json")
    if not os.path.exists(manifest_path):
        print(f"no {manifest_path}: run scripts/export_models.py --out {args.models_dir} "
              f"--only {args.model} first")
        return 1
    if not os.access(args.inferd, os.X_OK):
        print(f"no inferd binary at {args.inferd}")
        return 1
    with open(manifest_path) as f:
        manifest = json.load(f)
    cases = [c for c in manifest["cases"] if not args.case or c["name"] in args.case]
    unknown = set(args.case or []) - {c["name"] for c in manifest["cases"]}
    if unknown:
        print(f"unknown case(s) {sorted(unknown)}; the manifest has "
              f"{[c['name'] for c in manifest['cases']]}")
        return 1
    results = [run_case(args, model_dir, manifest, c) for c in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
