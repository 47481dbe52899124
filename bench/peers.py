"""The benchmark scripts' peers install themselves: one place for how (imported by bench/*.py)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_PACKAGE = "onnxruntime-node@1.30.0"


def ensure_onnxruntime():
    """Installs ONNX Runtime 1.30 for Node into bench/node_modules unless it is there (npm
    registry; --ignore-scripts: the package carries its prebuilt CPU binaries)."""
    bench = os.path.join(ROOT, "bench")
    if not os.path.isdir(os.path.join(bench, "node_modules", "onnxruntime-node")):
        subprocess.run(["npm", "install", "--ignore-scripts", ORT_PACKAGE], cwd=bench, check=True)
