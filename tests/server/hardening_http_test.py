#!/usr/bin/env python3
"""The HTTP frontend under attack (issue 15), each attack bounded in time and count, loopback only.

Reproduces each attack against `inferd serve` and checks the server answers it and goes on
serving others:
  - descriptor exhaustion (a lowered `ulimit -n`): no accept spin (CPU < 10% with idle sockets at
    the limit), the extra clients get 503, others are served once slots free;
  - max connections: beyond it 503 at once, CPU stays low, a freed slot serves again;
  - slowloris heads, idle keep-alive and stalled bodies are cut at their timeouts;
  - protocol errors get 400/414/431/501 before the close;
  - invalid UTF-8 in "id" is refused (every reply is strict JSON), non-finite FP32 values come
    back as "NaN"/"Infinity" strings, 3.5e38 as FP32 is refused;
  - percent-escaped model names are decoded;
  - a 60 MB JSON body is rejected without a DOM of ~16 bytes per number (peak RSS bounded);
  - 20 stalled 60 MiB uploads: beyond the in-flight budget 503 at once, RSS stays bounded, the
    rest are cut at the body timeout;
  - a huge request `timeout` is no deadline (it used to overflow into the past: 503 at once);
  - replies never show the repository's absolute path.
"""
import argparse
import json
import os
import resource
import shutil
import socket
import sys
import time

import numpy as np
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_test  # noqa: E402  (write_repository, Server)
from server_test import check, failures  # noqa: E402


def strict_json(data):
    """Parses bytes as JSON the way a strict client does: UTF-8, no NaN/Infinity literals."""
    def no_constants(name):
        raise ValueError(f"non-JSON constant {name}")
    return json.loads(data.decode("utf-8"), parse_constant=no_constants)


def write_models(root):
    server_test.write_repository(root)
    # The same identity model under a name that needs percent-escaping.
    shutil.copytree(f"{root}/identity", f"{root}/m\u00f6del")
    # add with request timeouts honoured (allow_timeout_override).
    os.makedirs(f"{root}/add_timeout/1")
    shutil.copy(f"{root}/add/2/model.onnx", f"{root}/add_timeout/1/model.onnx")
    with open(f"{root}/add_timeout/config.pbtxt", "w") as f:
        f.write('name: "add_timeout"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                'input [ { name: "a" data_type: TYPE_INT64 dims: [ 4 ] },\n'
                '        { name: "b" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
                'output [ { name: "sum" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
                'dynamic_batching { max_queue_delay_microseconds: 100\n'
                '  default_queue_policy { allow_timeout_override: true } }\n')
    # A model that fails to load: its reason must not show the repository's location.
    os.makedirs(f"{root}/broken/1")
    with open(f"{root}/broken/1/model.onnx", "wb") as f:
        f.write(b"not an onnx model")


def host_port(url):
    host, port = url.replace("http://", "").rsplit(":", 1)
    return host, int(port)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def cpu_share(pid, seconds):
    c0, t0 = cpu_seconds(pid), time.time()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.time() - t0)


def raw(addr, data, wait=5.0):
    """Sends `data` on a fresh connection; returns (status code or None, all bytes read)."""
    s = socket.create_connection(addr, timeout=wait)
    out = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    code = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
    return code, out


def reply_body(out):
    return out.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in out else b""


def live(base):
    try:
        return requests.get(f"{base}/v2/health/live", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def closed_within(sock, seconds):
    """Whether the server closes `sock` within `seconds` (EOF or reset)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def protocol_tests(addr):
    get = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"
    post = b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\n"
    cases = [
        ("header over the limit", get + b"X-A: " + b"a" * 70000 + b"\r\n\r\n", 431),
        ("too many headers", get + b"a: b\r\n" * 300 + b"\r\n", 431),
        ("20,000 headers", get + b"a:b\r\n" * 20000 + b"\r\n", 431),
        ("URI over the header limit", b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
        ("URI too long", b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("duplicate Content-Length", post + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
         400),
        ("conflicting Content-Length", post + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
         400),
        ("Content-Length list", post + b"Content-Length: 2, 2\r\n\r\n{}", 400),
        ("bad Content-Length", post + b"Content-Length: 2x\r\n\r\n{}", 400),
        ("Content-Length + Transfer-Encoding",
         post + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400),
        ("Transfer-Encoding not chunked", post + b"Transfer-Encoding: gzip\r\n\r\n{}", 400),
        ("Transfer-Encoding gzip, chunked",
         post + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
        ("NUL in a header", get + b"X-A: a\x00b\r\n\r\n", 400),
        ("bare LF", b"GET /v2/health/live HTTP/1.1\nHost: x\n\n", 400),
        ("bad chunk", post + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400),
        ("bad percent-escape", b"GET /v2/models/m%G1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400),
    ]
    for what, data, want in cases:
        code, out = raw(addr, data)
        ok = code == want
        try:
            ok = ok and isinstance(strict_json(reply_body(out)).get("error"), str)
        except ValueError:
            ok = False
        check(ok, f"protocol: {what} -> {want} with a JSON error (got {out[:120]!r})")


def json_tests(base, repo):
    s = requests.Session()
    url = f"{base}/v2/models/identity/infer"
    head = b'{"id":"\xff\xfeabc","inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[' + \
        b",".join([b"1"] * 16) + b"]}]}"
    r = s.post(url, data=head)
    try:
        body = strict_json(r.content)
        ok = r.status_code == 400 and "encoding" in body["error"].lower()
    except ValueError:
        ok = False
    check(ok, f"invalid UTF-8 id: 400 and a valid JSON reply ({r.status_code} {r.content[:120]!r})")

    vals = ["NaN", "Infinity", "-Infinity"] + [1.5] * 13
    r = s.post(url, json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                      "data": vals}]})
    try:
        out = strict_json(r.content)["outputs"][0]["data"]
        ok = r.status_code == 200 and out[:4] == ["NaN", "Infinity", "-Infinity", 1.5]
        got = np.array(out, np.float32)
        ok = ok and np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf
    except (ValueError, KeyError, IndexError):
        ok = False
    check(ok, f"non-finite FP32 out as strings, strict JSON ({r.status_code} {r.content[:160]!r})")
    r = s.post(url, json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                      "data": [3.5e38] + [0.0] * 15}]})
    check(r.status_code == 400 and "not a valid FP32" in r.text, f"3.5e38 as FP32: {r.text[:160]}")

    r = s.get(f"{base}/v2/models/m%C3%B6del")
    check(r.status_code == 200 and r.json().get("name") == "m\u00f6del",
          f"percent-escaped model name: {r.status_code} {r.text[:160]}")
    r = s.post(f"{base}/v2/models/m%C3%B6del/infer",
               json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16],
                                 "data": list(range(16))}]})
    check(r.status_code == 200 and strict_json(r.content)["model_name"] == "m\u00f6del",
          f"infer on a percent-escaped name: {r.status_code}")

    # A timeout of ~2^63 ns: now + timeout used to overflow, so the request expired at once.
    body = {"parameters": {"timeout": (2**63 - 1) // 1000},
            "inputs": [{"name": "a", "datatype": "INT64", "shape": [1, 4], "data": [1, 2, 3, 4]},
                       {"name": "b", "datatype": "INT64", "shape": [1, 4], "data": [1, 1, 1, 1]}]}
    r = s.post(f"{base}/v2/models/add_timeout/infer", json=body)
    check(r.status_code == 200 and r.json()["outputs"][0]["data"] == [2, 3, 4, 5],
          f"huge request timeout is no deadline: {r.status_code} {r.text[:160]}")

    # Nothing shows where the repository lives.
    absolute = os.path.realpath(repo)
    replies = [s.post(f"{base}/v2/repository/index"), s.get(f"{base}/v2/models/broken/ready"),
               s.get(f"{base}/v2/models/broken"), s.post(f"{base}/v2/models/broken/infer", json={})]
    leaked = [r.text[:200] for r in replies if absolute in r.text or os.path.abspath(repo) in r.text]
    index = replies[0].json()
    broken = [e for e in index if e["name"] == "broken"]
    check(not leaked and broken and broken[0].get("reason"),
          f"no absolute repository path in replies (index reason {broken}, leaked {leaked})")


def timeout_tests(addr, base):
    # Slowloris: a head that trickles in is cut at the header timeout (2 s).
    s = socket.create_connection(addr)
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nX-Slow: ")
    t0 = time.time()
    cut = False
    for _ in range(20):
        try:
            s.sendall(b"a")
        except (BrokenPipeError, ConnectionResetError):
            cut = True
            break
        if closed_within(s, 0.5):
            cut = True
            break
    check(cut and time.time() - t0 < 6, f"slowloris head cut at the header timeout "
          f"({time.time() - t0:.1f} s)")
    s.close()
    # A connection that never sends anything.
    s = socket.create_connection(addr)
    t0 = time.time()
    check(closed_within(s, 6) and time.time() - t0 < 5, "silent connection cut")
    s.close()
    # Keep-alive: idle after a reply, closed at the idle timeout.
    s = socket.create_connection(addr)
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(5)
    first = s.recv(65536)
    t0 = time.time()
    check(first.startswith(b"HTTP/1.1 200") and closed_within(s, 6) and time.time() - t0 < 5,
          f"idle keep-alive closed at the idle timeout ({time.time() - t0:.1f} s)")
    s.close()
    check(live(base), "serving after the timeout attacks")


def body_timeout_test(addr, base):
    # A body that stalls is cut at the body timeout.
    s = socket.create_connection(addr)
    s.sendall(b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    t0 = time.time()
    check(closed_within(s, 10) and time.time() - t0 < 9,
          f"stalled body cut at the body timeout ({time.time() - t0:.1f} s)")
    s.close()
    check(live(base), "serving after a stalled body")


def memory_tests(addr, base, pid):
    # 60 MB of JSON numbers with a mismatched shape: rejected after a bounded parse.
    n = 30_000_000
    body = (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[' +
            b"1," * (n - 1) + b'1]}]}')
    base_hwm = status_kib(pid, "VmHWM")
    t0 = time.time()
    r = requests.post(f"{base}/v2/models/identity/infer", data=body, timeout=60)
    print(f"60 MB JSON answered in {time.time() - t0:.2f} s")
    grown = (status_kib(pid, "VmHWM") - base_hwm) / 1024
    check(r.status_code == 400 and "more elements" in r.text,
          f"60 MB JSON rejected: {r.status_code} {r.text[:120]}")
    check(grown < 200, f"60 MB JSON: peak RSS grew {grown:.0f} MiB (< 200; ~960 before)")


def held_by_server(s):
    """True while the server keeps an admitted upload open (no response, no close yet)."""
    s.setblocking(False)
    try:
        s.recv(1, socket.MSG_PEEK)  # a response (408) or b"" (closed): no longer held
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def stalled_upload_tests(addr, base, pid):
    # 20 stalled 60 MiB uploads against a 128 MiB in-flight budget: two fit. On a loaded machine
    # the loop can outlast the 5 s body timeout, which cuts an admitted upload and frees its share,
    # so a later one is rightly admitted: what must be refused is every upload that arrives while
    # two admitted ones are still held.
    rss0 = status_kib(pid, "VmRSS")
    socks, refused, must_refuse, admitted_over_budget = [], 0, 0, 0
    head = (b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
            str(60 << 20).encode() + b"\r\n\r\n")
    chunk = b"7" * (4 << 20)
    t0 = time.time()
    for _ in range(20):
        over_budget = sum(held_by_server(h) for h in socks) >= 2
        must_refuse += over_budget
        s = socket.create_connection(addr)
        s.sendall(head)
        s.settimeout(1.0)
        try:
            got = s.recv(65536)
        except socket.timeout:
            got = b""
        if got.startswith(b"HTTP/1.1 503"):
            refused += 1
            s.close()
            continue
        s.settimeout(5)
        closed_early = False
        try:
            for _ in range(6):  # 24 MiB of the 60, then stall
                s.sendall(chunk)
        except OSError:
            closed_early = True  # only a refused upload is closed this soon (admitted: body timeout)
        if not closed_early:
            # A 503 that a loaded machine delivered after the 1 s wait above.
            s.settimeout(0.5)
            try:
                closed_early = s.recv(65536).startswith(b"HTTP/1.1 503")
            except OSError:
                pass
        if closed_early:
            refused += 1
            s.close()
            continue
        admitted_over_budget += over_budget
        socks.append(s)
    rss = (status_kib(pid, "VmRSS") - rss0) / 1024
    check(must_refuse >= 10 and admitted_over_budget == 0,
          f"stalled uploads beyond the in-flight budget got 503 at once ({refused} of 20 "
          f"refused; {admitted_over_budget} of the {must_refuse} that came while two uploads "
          f"were held were admitted)")
    check(rss < 100, f"stalled uploads: RSS grew {rss:.0f} MiB (< 100; 2 admitted x 24 MiB)")
    cut = all(closed_within(s, 15) for s in socks)
    check(cut and time.time() - t0 < 15, f"stalled uploads cut at the body timeout "
          f"({time.time() - t0:.1f} s)")
    for s in socks:
        s.close()
    check(live(base), "serving after the stalled uploads")


def fd_exhaustion_test(inferd, repo, work):
    """ulimit -n 48: idle connections exhaust the descriptors before max connections."""
    def low_fd_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
    srv = server_test.Server(inferd, repo, f"{work}/fd.log", grpc=False, preexec_fn=low_fd_limit,
                             args=["--threads", "1", "--http-max-connections", "1000",
                                   "--http-header-timeout-secs", "30"])
    addr = host_port(srv.http)
    idle = []
    try:
        for _ in range(60):
            idle.append(socket.create_connection(addr, timeout=5))
        time.sleep(0.5)
        share = cpu_share(srv.proc.pid, 2.0)
        check(share < 0.10, f"descriptors exhausted by idle sockets: CPU {share:.1%} (< 10%)")
        code, _ = raw(addr, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n", wait=3)
        check(code == 503, f"out of descriptors, a new client gets 503 (got {code})")
        share = cpu_share(srv.proc.pid, 1.0)
        check(share < 0.10, f"still no spin after a shed connection: CPU {share:.1%}")
        for s in idle:
            s.close()
        idle = []
        deadline = time.time() + 5
        while not live(srv.http) and time.time() < deadline:
            time.sleep(0.1)
        check(live(srv.http), "served again once descriptors are free")
    finally:
        for s in idle:
            s.close()
        check(srv.stop() == 0, "fd-exhaustion server exits cleanly on SIGTERM")


def max_connections_test(inferd, repo, work):
    srv = server_test.Server(inferd, repo, f"{work}/conn.log", grpc=False,
                             args=["--threads", "1", "--http-max-connections", "6",
                                   "--http-header-timeout-secs", "30"])
    addr = host_port(srv.http)
    idle = []
    try:
        for _ in range(6):
            idle.append(socket.create_connection(addr, timeout=5))
        time.sleep(0.3)
        extra = []
        for _ in range(20):
            code, out = raw(addr, b"", wait=3)
            extra.append(code)
        check(all(c == 503 for c in extra), f"beyond max connections: 503 at once ({extra[:5]})")
        share = cpu_share(srv.proc.pid, 2.0)
        check(share < 0.10, f"idle sockets at max connections: CPU {share:.1%} (< 10%)")
        idle.pop().close()
        deadline = time.time() + 5
        while not live(srv.http) and time.time() < deadline:
            time.sleep(0.1)
        check(live(srv.http), "a freed slot serves again")
    finally:
        for s in idle:
            s.close()
        check(srv.stop() == 0, "max-connections server exits cleanly on SIGTERM")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    repo = os.path.join(a.work_dir, "repo")
    write_models(repo)

    srv = server_test.Server(a.inferd, repo, f"{a.work_dir}/main.log", grpc=False,
                             args=["--threads", "1", "--max-request-bytes", "64MiB",
                                   "--http-header-timeout-secs", "2",
                                   "--http-idle-timeout-secs", "2"])
    try:
        addr = host_port(srv.http)
        protocol_tests(addr)
        json_tests(srv.http, repo)
        timeout_tests(addr, srv.http)
        memory_tests(addr, srv.http, srv.proc.pid)
        check(live(srv.http), "main server still serving")
    finally:
        check(srv.stop() == 0, "main server exits cleanly on SIGTERM")
    srv = server_test.Server(a.inferd, repo, f"{a.work_dir}/uploads.log", grpc=False,
                             args=["--threads", "1", "--max-request-bytes", "64MiB",
                                   "--http-max-inflight-bytes", "128MiB",
                                   "--http-body-timeout-secs", "5"])
    try:
        addr = host_port(srv.http)
        body_timeout_test(addr, srv.http)
        stalled_upload_tests(addr, srv.http, srv.proc.pid)
    finally:
        check(srv.stop() == 0, "uploads server exits cleanly on SIGTERM")
    max_connections_test(a.inferd, repo, a.work_dir)
    fd_exhaustion_test(a.inferd, repo, a.work_dir)

    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all HTTP hardening checks passed")


if __name__ == "__main__":
    main()
