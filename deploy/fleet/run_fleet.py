#!/usr/bin/env python3
"""Starts N `inferd serve` nodes and HAProxy in front of them on 127.0.0.1, for tests and demos
(docs/fleet.md, "Routing on HAProxy"), and stops everything again.

    deploy/fleet/run_fleet.py --inferd build/inferd --model-repository REPO --nodes 3

Every node listens on free loopback ports (port 0; its log names them) with its agent-check port
on; the HAProxy config comes from `inferd fleet haproxy-config` (checked with `haproxy -c`), its
frontends on free ports too. The script waits until HAProxy sees every node UP, prints the
addresses, and runs until Ctrl-C or SIGTERM; `--balancer` also runs `inferd fleet balance` on
HAProxy's stats socket; everything it started is stopped on the way out, also
on an error. Tests and benchmarks import it: `with Fleet(...) as fleet:` (tests/fleet/,
bench/fleet/).
"""
import argparse
import csv
import io
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

LOOPBACK = "127.0.0.1"  # nothing here listens on or sends to any other interface


def free_port():
    """A port free on the loopback now (HAProxy needs its ports before it starts)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


class Node:
    """One `inferd serve` on free loopback ports; `http`, `grpc`, `agent` are its ports.

    `args` are extra serve flags (e.g. ["--threads", "1"]); `wrapper` a command prefix (e.g.
    ["taskset", "-c", "0"])."""

    def __init__(self, inferd, repo, log_path, args=(), wrapper=(), start_timeout=60):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            list(wrapper) + [inferd, "serve", "--model-repository", repo, "--host", LOOPBACK,
                             "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
                             "--agent-port", "0"] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.http = self.grpc = self.agent = self.metrics = None
        self._deadline = time.time() + start_timeout
        self._lines = queue.Queue()  # log lines, None at the end; wait_started reads them
        threading.Thread(target=self._pump, daemon=True).start()

    def wait_started(self):
        """Reads the log until every port is named and the server is ready (the node must log at
        info level: the port lines are info lines)."""
        lines = []
        patterns = {"http": r"HTTP KServe v2 listening on http://[^:]+:(\d+)",
                    "grpc": r"gRPC KServe v2 listening on [^:]+:(\d+)",
                    "metrics": r"metrics listening on http://[^:]+:(\d+)",
                    "agent": r"agent check listening on [^:]+:(\d+)"}
        ready = False
        while not ready:
            try:
                line = self._lines.get(timeout=max(0.0, self._deadline - time.time()))
            except queue.Empty:
                break
            if line is None:  # the node exited
                break
            lines.append(line)
            for key, pattern in patterns.items():
                if (m := re.search(pattern, line)):
                    setattr(self, key, int(m.group(1)))
            ready = "server is ready" in line
        if not ready or not all((self.http, self.grpc, self.agent)):
            self.proc.kill()
            raise RuntimeError(f"inferd node did not start (log {self.log_path}):\n" +
                               "".join(lines[-20:]))

    def _pump(self):
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            self._lines.put(line)
        self._lines.put(None)

    def spec(self, weight=100):
        return f"{LOOPBACK}:{self.http}:{weight},grpc={self.grpc},agent={self.agent}"

    def stop(self, timeout=20):
        """SIGTERM (graceful), SIGKILL after `timeout`; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Haproxy:
    """One HAProxy on free loopback ports in front of `nodes`, with its config from `inferd fleet
    haproxy-config` (checked by `haproxy -c`) in WORK_DIR/NAME.cfg and its stats socket beside it.

    backups: how many of the last nodes are standby servers; weights[i]: node i's HAProxy weight;
    config_args: extra haproxy-config flags; agent=False leaves the agent checks out."""

    def __init__(self, inferd, work_dir, nodes, name="haproxy", backups=0, weights=None,
                 config_args=(), agent=True, haproxy="haproxy"):
        self.inferd, self.nodes, self.backups = inferd, nodes, backups
        self.weights = weights  # None: 100 each (nodes may be filled in after this)
        self.config_args, self.agent, self.haproxy_bin = list(config_args), agent, haproxy
        work_dir = os.path.abspath(work_dir)
        os.makedirs(work_dir, exist_ok=True)
        self.config_path = os.path.join(work_dir, f"{name}.cfg")
        self.socket_path = os.path.join(work_dir, f"{name}.sock")
        self.log_path = os.path.join(work_dir, f"{name}.log")
        self.proc = None

    def start(self, ready_timeout=30):
        self.http_port, self.grpc_port = free_port(), free_port()
        cmd = [self.inferd, "fleet", "haproxy-config", "-o", self.config_path,
               "--http-bind", f"{LOOPBACK}:{self.http_port}",
               "--grpc-bind", f"{LOOPBACK}:{self.grpc_port}",
               "--stats-socket", self.socket_path] + self.config_args
        active = len(self.nodes) - self.backups
        for i, node in enumerate(self.nodes):
            spec = node.spec(self.weights[i] if self.weights else 100) + ("" if self.agent else ",agent=0")
            cmd += ["--node" if i < active else "--backup", spec]
        subprocess.run(cmd, check=True)
        check = subprocess.run([self.haproxy_bin, "-c", "-f", self.config_path],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError("haproxy -c refused the generated config:\n" + check.stdout +
                               check.stderr)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        self.log = open(self.log_path, "w")
        # -db: stay in the foreground (a child of this script, stopped by it).
        self.proc = subprocess.Popen([self.haproxy_bin, "-db", "-f", self.config_path],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.http_url = f"http://{LOOPBACK}:{self.http_port}"
        self.grpc_target = f"{LOOPBACK}:{self.grpc_port}"
        self.wait_all_up(ready_timeout)

    def wait_all_up(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited with {self.proc.returncode} "
                                   f"(log {self.log_path})")
            try:
                rows = [r for r in self.stats() if r["svname"].startswith("node")]
                if rows and all(r["status"] == "UP" for r in rows):
                    return
            except OSError:
                pass  # the socket is not there yet
            time.sleep(0.1)
        raise RuntimeError("HAProxy did not see every node UP in time")

    def command(self, line):
        """Sends one command to HAProxy's stats socket; returns its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(self.socket_path)
            s.sendall(line.encode() + b"\n")
            chunks = []
            while (data := s.recv(65536)):
                chunks.append(data)
        return b"".join(chunks).decode()

    def stats(self):
        """`show stat` as a list of dicts (pxname, svname, status, weight, stot, ...)."""
        text = self.command("show stat").lstrip("# ")
        return list(csv.DictReader(io.StringIO(text)))

    def server_stats(self, backend="inferd_http"):
        return {r["svname"]: r for r in self.stats() if r["pxname"] == backend and
                r["svname"] not in ("FRONTEND", "BACKEND")}

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Balancer:
    """`inferd fleet balance` on `proxy`'s stats socket (docs/fleet.md, "A slow node: the fleet
    balancer"): drains a node slower than its peers. `args`: extra `fleet balance` flags. Its log
    (one line per drain or return) is LOG_PATH."""

    def __init__(self, inferd, proxy, log_path, args=()):
        self.inferd, self.proxy, self.log_path, self.args = inferd, proxy, log_path, list(args)
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([self.inferd, "fleet", "balance", "--stats-socket",
                                      self.proxy.socket_path] + self.args,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:  # its first line says it polls
            if self.proc.poll() is not None:
                raise RuntimeError(f"inferd fleet balance exited with {self.proc.returncode} "
                                   f"(log {self.log_path})")
            with open(self.log_path) as f:
                if "watching" in f.read():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"inferd fleet balance did not start (log {self.log_path})")

    def events(self):
        """[(backend/server, "drain" | "probe" | "restore")] from the log, in order."""
        out = []
        with open(self.log_path) as f:
            for line in f:
                m = re.search(r"fleet balance: (\S+): (drain|probe|restore):", line)
                if m:
                    out.append((m.group(1), m.group(2)))
        return out

    def stop(self, timeout=10):
        """SIGTERM: it returns every node it drained before it exits; returns its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Fleet:
    """N inferd nodes (plus `backups` standby nodes) behind one HAProxy on 127.0.0.1.

    node_args[i] / node_wrappers[i]: extra serve flags / a command prefix for node i; weights[i]
    its HAProxy weight. config_args: extra `inferd fleet haproxy-config` flags (e.g. ["--balance",
    "roundrobin", "--check-inter-ms", "500"]). balancer_args: not None runs `inferd fleet
    balance` with these flags beside HAProxy (`balancer`). After start(): `http_url`,
    `grpc_target`, `stats()` / `server_stats()` (HAProxy's `show stat`), `nodes`, `proxy` (the
    Haproxy)."""

    def __init__(self, inferd, repo, work_dir, n=3, backups=0, node_args=None,
                 node_wrappers=None, weights=None, config_args=(), haproxy="haproxy",
                 balancer_args=None):
        self.inferd, self.repo, self.work_dir = inferd, repo, work_dir
        self.n, self.backups = n, backups
        self.node_args = node_args or [[] for _ in range(n + backups)]
        self.node_wrappers = node_wrappers or [[] for _ in range(n + backups)]
        self.nodes = []
        self.proxy = Haproxy(inferd, work_dir, self.nodes, backups=backups, weights=weights,
                             config_args=config_args, haproxy=haproxy)
        self.socket_path = self.proxy.socket_path
        self.balancer = None if balancer_args is None else Balancer(
            inferd, self.proxy, os.path.join(work_dir, "balancer.log"), balancer_args)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self, ready_timeout=30):
        for i in range(self.n + self.backups):
            self.nodes.append(Node(self.inferd, self.repo,
                                   os.path.join(self.work_dir, f"node{i + 1}.log"),
                                   self.node_args[i], self.node_wrappers[i]))
        for node in self.nodes:  # they load in parallel
            node.wait_started()
        self.proxy.start(ready_timeout)
        if self.balancer:
            self.balancer.start()
        self.http_url, self.grpc_target = self.proxy.http_url, self.proxy.grpc_target

    def stats(self):
        return self.proxy.stats()

    def server_stats(self, backend="inferd_http"):
        return self.proxy.server_stats(backend)

    def stop(self):
        """Stops HAProxy and every node (SIGTERM, then SIGKILL); safe to call twice. Returns the
        nodes' exit codes."""
        if self.balancer:
            self.balancer.stop()
        self.proxy.stop()
        return [node.stop() for node in self.nodes]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inferd", default="build/inferd")
    p.add_argument("--model-repository", required=True)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--backups", type=int, default=0)
    p.add_argument("--work-dir", default="build/fleet")
    p.add_argument("--node-arg", action="append", default=[],
                   help="extra `inferd serve` flag for every node (repeatable)")
    p.add_argument("--config-arg", action="append", default=[],
                   help="extra `inferd fleet haproxy-config` flag (repeatable)")
    p.add_argument("--balancer", action="store_true",
                   help="also run `inferd fleet balance` (drains a node slower than its peers)")
    p.add_argument("--balancer-arg", action="append", default=[],
                   help="extra `inferd fleet balance` flag (repeatable)")
    args = p.parse_args()
    if args.nodes < 1:
        p.error("--nodes must be >= 1")
    # SIGTERM leaves through the same `finally` as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    total = args.nodes + args.backups
    with Fleet(args.inferd, args.model_repository, args.work_dir, args.nodes, args.backups,
               node_args=[list(args.node_arg) for _ in range(total)],
               config_args=args.config_arg,
               balancer_args=args.balancer_arg if args.balancer else None) as fleet:
        print(f"HTTP {fleet.http_url}  gRPC {fleet.grpc_target}  stats socket "
              f"{fleet.socket_path}" + (f"  balancer log {fleet.balancer.log_path}"
                                        if fleet.balancer else ""), flush=True)
        for i, node in enumerate(fleet.nodes):
            print(f"node{i + 1}: http {node.http} grpc {node.grpc} agent {node.agent}", flush=True)
        print("Ctrl-C stops everything", flush=True)
        try:
            while fleet.proxy.running():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
