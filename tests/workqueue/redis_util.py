"""Test helpers for the work queue: a redis-server on a free loopback port, a minimal RESP client
(Debian has no python3-redis installed here; the protocol is a few lines), and the model.

The client speaks RESP2 over one socket: command(*args) sends an array of bulk strings and
returns the reply as bytes / int / list / None; error replies raise RedisError.
"""
import json
import os
import socket
import subprocess
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class RedisError(Exception):
    pass


class Resp:
    def __init__(self, port, host="127.0.0.1", timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RedisError(f"unexpected reply {line!r}")

    def command(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._reply()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """redis-server on 127.0.0.1:<free port>, no persistence; stop() ends it."""

    def __init__(self, work_dir):
        self.port = free_port()
        os.makedirs(work_dir, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", work_dir, "--daemonize", "no", "--loglevel",
             "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                c = Resp(self.port)
                if c.command("PING") == b"PONG":
                    c.close()
                    break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        self.url = f"redis://127.0.0.1:{self.port}"

    def client(self):
        return Resp(self.port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def write_mlp(repo, name="mlp", width=64, hidden=512, layers=3, seed=3):
    """x float32[N, width] -> (MatMul, Tanh) x layers -> MatMul -> y float32[N, 16]; no config:
    inferd adds dynamic batching."""
    d = os.path.join(repo, name, "1")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev, n_in = "x", width
    for i in range(layers):
        w = (rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        prev, n_in = f"t{i}", hidden
    w = (rng.standard_normal((n_in, 16)) / np.sqrt(n_in)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, "wout"))
    nodes.append(helper.make_node("MatMul", [prev, "wout"], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])
    g = helper.make_graph(nodes, name, [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "model.onnx"))


def write_requests(path, n, width=64, seed=5, start=0):
    """n JSONL requests {"id": "item-K", "inputs": {"x": [...]}} (values rounded so the text is
    short and exact)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            x = np.round(rng.standard_normal(width), 3).tolist()
            f.write('{"id":"item-%d","inputs":{"x":%s}}\n'
                    % (start + i, json.dumps(x, separators=(",", ":"))))
