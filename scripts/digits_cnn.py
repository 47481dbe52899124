#!/usr/bin/python3
"""Trains the digits CNN, the accuracy model of the quantization tests, and exports it as ONNX.

scikit-learn's digits dataset (1,797 8x8 grey images, 10 classes) is split with a fixed seed into
a training set, a calibration set (500 samples, what `inferd quantize --calibration` reads) and a
held-out test set (the accuracy measurement). A small CNN (Conv-BN-ReLU x3, pooling, two Gemms)
trains in a few seconds on CPU with a fixed seed.

Writes into --out (default build/digits), cached unless --force:
  model.onnx             float32, input "input" [batch, 1, 8, 8], output "logits" [batch, 10]
  calibration/input.npy  float32 [500, 1, 8, 8]   (samples stacked along axis 0)
  test_x.npy             float32 [N, 1, 8, 8]
  test_y.npy             int64   [N]
  manifest.json          sizes, PyTorch test accuracy, opset

Usage: /usr/bin/python3 scripts/digits_cnn.py [--out DIR] [--force]
"""
import argparse
import json
import os
import sys

import numpy as np


def build_model(torch):
    nn = torch.nn

    class DigitsCnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.MaxPool2d(2),  # 8x8 -> 4x4
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            )
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(64 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))

        def forward(self, x):
            return self.classifier(self.features(x))

    return DigitsCnn()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join("build", "digits"))
    ap.add_argument("--force", action="store_true", help="retrain even if the files exist")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--calibration-samples", type=int, default=500)
    ap.add_argument("--opset", type=int, default=13)
    args = ap.parse_args()

    manifest_path = os.path.join(args.out, "manifest.json")
    if os.path.exists(manifest_path) and not args.force:
        print(f"digits: cached in {args.out}")
        return 0

    import torch
    from sklearn.datasets import load_digits

    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    rng = np.random.default_rng(0)

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]  # [1797, 1, 8, 8] in [0, 1]
    x = (x - 0.3) / 0.4  # roughly zero mean, unit variance
    y = digits.target.astype(np.int64)
    order = rng.permutation(len(x))
    n_cal = args.calibration_samples
    n_test = 450
    test_idx = order[:n_test]
    cal_idx = order[n_test:n_test + n_cal]
    train_idx = order[n_test:]  # calibration samples are also training samples (as in practice)

    model = build_model(torch)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt = torch.from_numpy(x[train_idx])
    yt = torch.from_numpy(y[train_idx])
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            loss = loss_fn(model(xt[b]), yt[b])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x[test_idx])).argmax(1).numpy()
    acc = float((pred == y[test_idx]).mean())
    print(f"digits: PyTorch test accuracy {acc * 100:.2f}% on {n_test} held-out samples")

    os.makedirs(os.path.join(args.out, "calibration"), exist_ok=True)
    dummy = torch.zeros(1, 1, 8, 8)
    torch.onnx.export(model, dummy, os.path.join(args.out, "model.onnx"),
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=args.opset, do_constant_folding=True)
    np.save(os.path.join(args.out, "calibration", "input.npy"), x[cal_idx])
    np.save(os.path.join(args.out, "test_x.npy"), x[test_idx])
    np.save(os.path.join(args.out, "test_y.npy"), y[test_idx])
    with open(manifest_path, "w") as f:
        json.dump({"test_samples": n_test, "calibration_samples": n_cal,
                   "train_samples": len(train_idx), "pytorch_test_accuracy": acc,
                   "opset": args.opset, "epochs": args.epochs}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
