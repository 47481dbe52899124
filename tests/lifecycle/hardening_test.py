#!/usr/bin/env python3
"""Issue 15, attacks 4-6, end to end against `inferd serve` (loopback, free ports, bounded time):

  files     a repository with a FIFO as model.onnx, a huge config (max_batch_size 1e9, warmup dims
            [1e11], instance count INT_MAX), external data symlinked to /etc/passwd, and
            default_model_filename with '..' or an absolute path, beside a model that serves: the
            server starts, the good model serves, every bad one is UNAVAILABLE with a clear reason
            that never names the repository's absolute path, and /etc/passwd never comes back.
  loadtime  a load slower than --max-load-time-secs fails with the limit in the error while the
            other model serves, and the lifecycle is free again at once (another load works).
  sigterm   SIGTERM with a load stuck (through the repository API, and at start-up) exits within
            --exit-timeout-secs (plus a little teardown).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lifecycle_test as lt  # noqa: E402  (Server, check, mlp_model, wait_for, index)

check = lt.check

GOOD = ('name: "good"\nmax_batch_size: 8\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 64 ] } ]\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 16 ] } ]\n')


def write_model(repo, name, config=None, model=None, version=1):
    d = os.path.join(repo, name, str(version))
    os.makedirs(d, exist_ok=True)
    if model is not None:
        onnx.save(model, os.path.join(d, "model.onnx"))
    if config is not None:
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return d


def external_data_model():
    """y[4] = x[4] + w, w stored externally in weights.bin (16 bytes)."""
    w = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "16")):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def slow_model():
    """y[N, 1024] = x[N, 1024] @ W: with a warmup of 1000 runs at batch 256 the load takes tens of
    seconds on a shared core."""
    w = numpy_helper.from_array(np.full((1024, 1024), 0.001, np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "slow",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])],
                          [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


SLOW = ('name: "slow"\nmax_batch_size: 256\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 1024 ] } ]\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1024 ] } ]\n'
        'model_warmup [ { name: "long" batch_size: 256 count: 1000 inputs { key: "x" value: '
        '{ data_type: TYPE_FP32 dims: [ 1024 ] zero_data: true } } } ]\n')


def infer_good(base):
    body = {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 64}]}
    return requests.post(f"{base}/v2/models/good/infer", json=body, timeout=30)


def test_files(a):
    repo = os.path.join(a.work_dir, "files_repo")
    shutil.rmtree(repo, ignore_errors=True)
    write_model(repo, "good", GOOD, lt.mlp_model(1))
    os.mkfifo(os.path.join(write_model(repo, "fifo"), "model.onnx"))
    write_model(repo, "huge_batch", 'max_batch_size: 1000000000\n', lt.mlp_model(1))
    write_model(repo, "huge_instances", 'instance_group [ { count: 2147483647 } ]\n',
                lt.mlp_model(1))
    write_model(repo, "huge_warmup",
                GOOD.replace('"good"', '"huge_warmup"') +
                'model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: '
                '{ data_type: TYPE_FP32 dims: [ 100000000000 ] zero_data: true } } } ]\n',
                lt.mlp_model(1))
    write_model(repo, "huge_delay", 'max_batch_size: 8\ndynamic_batching { '
                'max_queue_delay_microseconds: 9007199254740992 }\n', lt.mlp_model(1))
    d = write_model(repo, "passwd", None, external_data_model())
    os.symlink("/etc/passwd", os.path.join(d, "weights.bin"))
    write_model(repo, "dotdot", 'default_model_filename: "../../good/1/model.onnx"\n',
                lt.mlp_model(1))
    write_model(repo, "absolute",
                f'default_model_filename: "{os.path.abspath(repo)}/good/1/model.onnx"\n',
                lt.mlp_model(1))
    t0 = time.time()
    srv = lt.Server(a.inferd, repo, os.path.join(a.work_dir, "files.log"))
    check(time.time() - t0 < 60, f"files: server started in {time.time() - t0:.1f} s")
    base = srv.http
    r = infer_good(base)
    check(r.status_code == 200, f"files: good model serves ({r.status_code})")
    rows = {row["name"]: row for row in lt.index(base)}
    expect = {
        "fifo": "is a FIFO",
        "huge_batch": "max_batch_size 1000000000 exceeds the limit 65536",
        "huge_instances": "count 2147483647 exceeds the limit 256",
        "huge_warmup": "dim 100000000000 exceeds the limit",
        "huge_delay": "max_queue_delay_microseconds 9007199254740992 exceeds the limit",
        "passwd": "outside the model folder",
        "dotdot": "is outside the folder",
        "absolute": "is outside the folder",
    }
    everything = str(rows)
    for name, text in expect.items():
        row = rows.get(name, {})
        check(row.get("state") == "UNAVAILABLE" and text in row.get("reason", ""),
              f"files: {name} UNAVAILABLE with '{text}' ({row})")
    check(os.path.abspath(repo) not in everything and os.path.realpath(repo) not in everything,
          "files: no reason names the repository's absolute path")
    body = {"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [0.0] * 4}]}
    r = requests.post(f"{base}/v2/models/passwd/infer", json=body, timeout=30)
    check(r.status_code != 200 and "root" not in r.text,
          f"files: the /etc/passwd symlink never comes back ({r.status_code})")
    code = srv.stop()
    check(code == 0, f"files: clean exit ({code})")


def load(base, name, result):
    t0 = time.time()
    try:
        r = requests.post(f"{base}/v2/repository/models/{name}/load", json={}, timeout=120)
        result.append((r.status_code, r.text, time.time() - t0))
    except requests.RequestException as e:
        result.append((None, str(e), time.time() - t0))


def slow_repo(a, name):
    repo = os.path.join(a.work_dir, name)
    shutil.rmtree(repo, ignore_errors=True)
    write_model(repo, "good", GOOD, lt.mlp_model(1))
    write_model(repo, "slow", SLOW, slow_model())
    return repo


def test_loadtime(a):
    repo = slow_repo(a, "loadtime_repo")
    srv = lt.Server(a.inferd, repo, os.path.join(a.work_dir, "loadtime.log"),
                    "--model-control-mode", "explicit", "--load-model", "good", "--threads", "1",
                    "--max-load-time-secs", "2")
    base = srv.http
    result = []
    t = threading.Thread(target=load, args=(base, "slow", result))
    t.start()
    time.sleep(0.5)
    r = infer_good(base)
    check(r.status_code == 200, f"loadtime: good serves during the slow load ({r.status_code})")
    t.join(timeout=60)
    status, text, took = result[0] if result else (None, "no answer", 0)
    print(f"MEASURED loadtime: slow load answered {status} after {took:.2f} s", flush=True)
    check(status is not None and status >= 400 and "max load time" in text,
          f"loadtime: the slow load fails naming the limit ({status} {text[:200]})")
    check(took < 10, f"loadtime: answered soon after the 2 s limit ({took:.1f} s)")
    result2 = []
    load(base, "good", result2)
    check(result2 and result2[0][0] == 200 and result2[0][2] < 20,
          f"loadtime: the lifecycle is free, another load works ({result2})")
    rows = {row["name"]: row for row in lt.index(base)}
    check(rows.get("slow", {}).get("state") == "UNAVAILABLE",
          f"loadtime: slow is UNAVAILABLE ({rows.get('slow')})")
    code = srv.stop()
    check(code == 0, f"loadtime: clean exit ({code})")


def test_sigterm(a):
    repo = slow_repo(a, "sigterm_repo")
    srv = lt.Server(a.inferd, repo, os.path.join(a.work_dir, "sigterm.log"),
                    "--model-control-mode", "explicit", "--load-model", "good", "--threads", "1",
                    "--exit-timeout-secs", "2")
    result = []
    threading.Thread(target=load, args=(srv.http, "slow", result), daemon=True).start()
    time.sleep(1.0)
    t_sig = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        code = srv.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        code = "still running after 30 s"
    took = time.time() - t_sig
    print(f"MEASURED sigterm: exit {took:.2f} s after SIGTERM with a load stuck", flush=True)
    check(code == 0 and took < 2 + 3, f"sigterm: exits within --exit-timeout-secs 2 (+3 s "
          f"teardown) with a load stuck ({code}, {took:.1f} s)")

    # At start-up: the signal ends the start-up load of `slow` instead of waiting for it.
    log = open(os.path.join(a.work_dir, "sigterm_startup.log"), "w")
    proc = subprocess.Popen([a.inferd, "serve", "--model-repository", repo, "--http-port", "0",
                             "--grpc-port", "-1", "--metrics-port", "-1", "--threads", "1",
                             "--exit-timeout-secs", "2"],
                            stdout=log, stderr=subprocess.STDOUT)
    ok = lt.wait_for(lambda: "loaded model 'good'" in open(log.name).read(), 60)
    time.sleep(0.5)  # `slow` is warming up now (good loads first)
    t_sig = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "still running after 30 s"
    took = time.time() - t_sig
    print(f"MEASURED sigterm at start-up: exit {took:.2f} s after SIGTERM", flush=True)
    check(ok and code == 0 and took < 5,
          f"sigterm: at start-up with a load stuck exits at once ({code}, {took:.1f} s)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--inferd", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--only", default="files,loadtime,sigterm")
    a = p.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    only = a.only.split(",")
    t0 = time.time()
    if "files" in only:
        test_files(a)
    if "loadtime" in only:
        test_loadtime(a)
    if "sigterm" in only:
        test_sigterm(a)
    print(f"{len(lt.failures)} failure(s) in {time.time() - t0:.0f} s")
    for f in lt.failures:
        print("  -", f)
    sys.exit(1 if lt.failures else 0)


if __name__ == "__main__":
    main()
