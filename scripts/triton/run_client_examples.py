#!/usr/bin/python3
"""Runs Triton's Python client examples, unchanged, against `inferd serve --id triton`.

    /usr/bin/python3 scripts/triton/run_client_examples.py --inferd build/inferd \
        --client-dir DIR --work-dir build/triton_examples [--only NAME ...]

DIR is a checkout of triton-inference-server/client with its Python library importable from
DIR/src/python/library (the gRPC stubs generated from triton-inference-server/common's protos;
see docs/serving.md). The client is NVIDIA's code, so it is not part of this repository: this
script only runs it. The repository the examples expect is written by write_example_models.py
and write_sequence_models.py (next to this script); the server runs in explicit model-control
mode with every model loaded, as the model-control examples need.

Prints one line per example (PASS/FAIL, seconds) and a Markdown table; exits 1 if any failed.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

# (example file, extra arguments, protocol of -u: "http" or "grpc"). GPU-only examples
# (cudashm), ensembles and decoupled models are not listed.
EXAMPLES = [
    ("simple_http_infer_client.py", [], "http"),
    ("simple_http_async_infer_client.py", [], "http"),
    ("simple_http_aio_infer_client.py", [], "http"),
    ("simple_http_string_infer_client.py", [], "http"),
    ("simple_http_shm_client.py", [], "http"),
    ("simple_http_shm_string_client.py", [], "http"),
    ("simple_http_sequence_sync_infer_client.py", [], "http"),
    ("simple_http_model_control.py", [], "http"),
    ("simple_http_health_metadata.py", [], "http"),
    ("reuse_infer_objects_client.py", ["-i", "http"], "http"),
    # memory_growth_test.py has no -u: it runs only when the server got Triton's default ports.
    ("memory_growth_test.py", ["-i", "http", "-r", "200"], "default"),
    ("memory_growth_test.py", ["-i", "grpc", "-r", "200"], "default"),
    ("image_client.py", ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", "{image}"], "http"),
    ("simple_grpc_infer_client.py", [], "grpc"),
    ("simple_grpc_async_infer_client.py", [], "grpc"),
    ("simple_grpc_aio_infer_client.py", [], "grpc"),
    ("simple_grpc_string_infer_client.py", [], "grpc"),
    ("simple_grpc_shm_client.py", [], "grpc"),
    ("simple_grpc_shm_string_client.py", [], "grpc"),
    ("simple_grpc_sequence_sync_infer_client.py", [], "grpc"),
    ("simple_grpc_sequence_stream_infer_client.py", [], "grpc"),
    ("simple_grpc_aio_sequence_stream_infer_client.py", [], "grpc"),
    ("simple_grpc_model_control.py", [], "grpc"),
    ("simple_grpc_health_metadata.py", [], "grpc"),
    ("simple_grpc_keepalive_client.py", [], "grpc"),
    ("simple_grpc_custom_args_client.py", [], "grpc"),
    ("grpc_client.py", [], "grpc"),
    ("grpc_explicit_byte_content_client.py", [], "grpc"),
    ("grpc_explicit_int_content_client.py", [], "grpc"),
    ("grpc_explicit_int8_content_client.py", [], "grpc"),
    ("grpc_image_client.py", ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", "{image}"],
     "grpc"),
    ("image_client.py", ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", "-i", "grpc",
                         "{image}"], "grpc"),
    ("reuse_infer_objects_client.py", ["-i", "grpc"], "grpc"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_attrdict_shim(work_dir):
    """image_client.py imports `attrdict` (PyPI only, not packaged by Debian) to read HTTP metadata
    as attributes; this stand-in does just that (recursive attribute access on dicts)."""
    d = os.path.join(work_dir, "pyshim")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "attrdict.py"), "w") as f:
        f.write("class AttrDict(dict):\n"
                "    def __getattr__(self, k):\n"
                "        try:\n"
                "            return _wrap(self[k])\n"
                "        except KeyError as e:\n"
                "            raise AttributeError(k) from e\n"
                "def _wrap(v):\n"
                "    if isinstance(v, dict):\n"
                "        return AttrDict(v)\n"
                "    if isinstance(v, list):\n"
                "        return [_wrap(x) for x in v]\n"
                "    return v\n")
    return d


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def write_image(path):
    """A synthetic 256x256 RGB JPEG (any picture works: the examples print the top classes)."""
    from PIL import Image
    img = Image.new("RGB", (256, 256))
    img.putdata([(x, y, (x + y) // 2) for y in range(256) for x in range(256)])
    img.save(path, "JPEG")


def wait_ready(port, server, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"inferd serve exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready") as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("inferd serve did not become ready")


SEVEN_MODELS = ["simple", "simple_int8", "simple_string", "simple_identity", "simple_sequence",
                "simple_dyna_sequence", "densenet_onnx"]
CONTROL_REPOS = {"simple_http_model_control.py": SEVEN_MODELS,
                 "simple_grpc_model_control.py": SEVEN_MODELS + ["custom_identity_int32"]}


def run_examples(args, repo, examples, image, log_name):
    """Serves `repo` (explicit mode, every model loaded) and runs `examples` against it."""
    if not examples:
        return []
    http, grpc, metrics = (8000, 8001, 8002) if all(port_free(p) for p in (8000, 8001, 8002)) \
        else (free_port(), free_port(), free_port())
    log = open(os.path.join(args.work_dir, log_name), "w")
    server = subprocess.Popen(
        [args.inferd, "serve", "--model-repository", repo, "--id", "triton",
         "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
         "--model-control-mode", "explicit", "--load-model", "*"],
        stdout=log, stderr=subprocess.STDOUT)
    results = []
    try:
        wait_ready(http, server)
        shim = write_attrdict_shim(args.work_dir)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.join(args.client_dir, "src/python/library"), shim]))
        for name, extra_args, proto in examples:
            if proto == "default" and (http, grpc) != (8000, 8001):
                print(f"SKIP {name} (Triton's default ports 8000/8001 are taken)")
                continue
            url = ["-u", f"localhost:{http if proto == 'http' else grpc}"] if proto != "default" \
                else []
            cmd = [sys.executable, os.path.join(args.client_dir, "src/python/examples", name)] + \
                url + [a.format(image=image) for a in extra_args]
            start = time.time()
            try:
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
                ok, out = p.returncode == 0, p.stdout + p.stderr
            except subprocess.TimeoutExpired as e:
                ok, out = False, f"timeout\n{e.stdout or ''}{e.stderr or ''}"
            secs = time.time() - start
            label = f"{name} {' '.join(extra_args[:2]) if 'image' not in name else proto}".strip()
            results.append((label, ok, secs, out))
            print(f"{'PASS' if ok else 'FAIL'} {label} ({secs:.1f} s)", flush=True)
            if not ok:
                tail = "\n".join(out.strip().splitlines()[-6:])
                print("    " + tail.replace("\n", "\n    "), flush=True)
            if server.poll() is not None:
                print(f"inferd serve died (exit {server.returncode})")
                break
    finally:
        server.terminate()
        server.wait(timeout=30)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--client-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--image-model", help="ONNX classifier for densenet_onnx")
    ap.add_argument("--only", nargs="*", help="run only these example files")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repository")
    extra = ["--image-model", args.image_model] if args.image_model else []
    subprocess.check_call([sys.executable, os.path.join(HERE, "write_example_models.py"),
                           "--out", repo] + extra)
    seq = os.path.join(HERE, "write_sequence_models.py")
    if os.path.exists(seq):
        subprocess.check_call([sys.executable, seq, repo])
    image = os.path.join(args.work_dir, "image.jpg")
    write_image(image)

    # The model-control examples count the repository's models (the HTTP one expects seven, the
    # gRPC one eight: Triton runs them on different repositories), so each gets a server of its own
    # on a repository of that many models.
    selected = [e for e in EXAMPLES if not args.only or e[0] in args.only]
    results = run_examples(args, repo, [e for e in selected if e[0] not in CONTROL_REPOS], image,
                           "server.log")
    for example, models in CONTROL_REPOS.items():
        sub = os.path.join(args.work_dir, f"repository_{len(models)}")
        shutil.rmtree(sub, ignore_errors=True)
        os.makedirs(sub)
        for m in models:
            os.symlink(os.path.join(repo, m), os.path.join(sub, m))
        results += run_examples(args, sub, [e for e in selected if e[0] == example], image,
                                f"server_{len(models)}.log")
    print("\n| example | result |\n|---|---|")
    for label, ok, _, out in results:
        why = "" if ok else " — " + (out.strip().splitlines() or ["?"])[-1][:120]
        print(f"| `{label}` | {'pass' if ok else 'FAIL'}{why} |")
    passed = sum(ok for _, ok, _, _ in results)
    print(f"\n{passed}/{len(results)} passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
