"""A KServe v2 HTTP stub with a known service time, for testing the load generator.

One request is served at a time (a global lock held for --service-ms per request), so the capacity
is exactly 1000 / service_ms requests per second and, above it, requests queue. Implements the
endpoints `inferd bench --url` uses: model metadata, statistics (queue = time waiting for the lock,
compute = the service time) and infer (HTTP/1.1 keep-alive). Prints "listening on PORT" when ready.
"""
import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATS_LOCK = threading.Lock()
STATS = {"count": 0, "queue_ns": 0, "compute_ns": 0}
MODEL = "stub"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    service_s = 0.02
    # One write per response, no Nagle: otherwise headers and body leave in two segments and the
    # client's delayed ACK adds ~40 ms to every request.
    disable_nagle_algorithm = True
    wbufsize = -1

    def log_message(self, *args):
        pass

    def _reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == f"/v2/models/{MODEL}":
            return self._reply(200, {
                "name": MODEL, "versions": ["1"], "platform": "stub",
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]})
        if self.path == f"/v2/models/{MODEL}/stats":
            with STATS_LOCK:
                s = dict(STATS)
            dur = lambda n, ns: {"count": n, "ns": ns}
            return self._reply(200, {"model_stats": [{
                "name": MODEL, "version": "1", "inference_count": s["count"],
                "execution_count": s["count"], "inference_stats": {
                    "success": dur(s["count"], 0), "queue": dur(s["count"], s["queue_ns"]),
                    "compute_infer": dur(s["count"], s["compute_ns"])}}]})
        return self._reply(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        if self.path != f"/v2/models/{MODEL}/infer":
            return self._reply(404, {"error": "not found"})
        t0 = time.monotonic_ns()
        with LOCK:
            t1 = time.monotonic_ns()
            time.sleep(self.service_s)
            t2 = time.monotonic_ns()
        with STATS_LOCK:
            STATS["count"] += 1
            STATS["queue_ns"] += t1 - t0
            STATS["compute_ns"] += t2 - t1
        self._reply(200, {"model_name": MODEL, "outputs": []})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--service-ms", type=float, default=20)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    Handler.service_s = args.service_ms / 1000
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 512
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
