#!/usr/bin/env python3
"""The naive generation server, the "before" of the serving benchmark: PyTorch eager, one request
at a time (a FIFO queue in front of one worker), a KV-cache generation loop per request, behind an
OpenAI-compatible /v1/completions with server-sent-event streaming, so `inferd bench --generate`
drives it exactly as it drives inferd serve.

    naive_server.py MODEL_DIR [--port 8010] [--threads 2] [--models-py DIR]

MODEL_DIR is a folder of scripts/generation/build_models.py; the torch module comes from that
script's models.py (load_model), found under --models-py (default: scripts/generation of this
checkout). Requests: "prompt" (a string, tokenized with the folder's tokenizer.model, or a list of
token ids), "max_tokens", "temperature" (0 = greedy), "seed", "ignore_eos", "stream",
"stream_options": {"include_usage"}. Errors are OpenAI's {"error": {...}} with status 400/404.
Routes: POST /v1/completions, GET /v1/models, GET /health.
"""

import argparse
import json
import os
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class BadRequest(Exception):
    def __init__(self, message, status=400, kind="invalid_request_error"):
        super().__init__(message)
        self.status, self.kind = status, kind


class Generator:
    """One model; generate() runs on the single worker thread only."""

    def __init__(self, model_dir, models_py, threads):
        import torch
        import sentencepiece as spm

        sys.path.insert(0, str(models_py))
        import models  # scripts/generation/models.py (genmodel)

        torch.set_num_threads(threads)
        self.torch, self.models = torch, models
        self.model = models.load_model(str(model_dir))
        self.cfg = self.model.config
        self.sp = spm.SentencePieceProcessor()
        self.sp.Load(str(Path(model_dir) / "tokenizer.model"))
        self.name = Path(model_dir).name
        self.ctx = self.cfg["max_position_embeddings"]
        self.eos = self.cfg.get("eos_token_id", 2)

    def parse(self, req):
        if req.get("model") not in (None, self.name):
            raise BadRequest(f"model '{req.get('model')}' does not exist", 404, "not_found_error")
        prompt = req.get("prompt")
        if isinstance(prompt, str):
            ids = [self.cfg.get("bos_token_id", 1)] + self.sp.EncodeAsIds(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            ids = prompt
            if any(t < 0 or t >= self.cfg["vocab_size"] for t in ids):
                raise BadRequest("prompt token id out of the vocabulary")
        else:
            raise BadRequest("'prompt' must be a string or a non-empty list of token ids")
        n = req.get("max_tokens", 16)
        if not isinstance(n, int) or n < 1:
            raise BadRequest("'max_tokens' must be a positive integer")
        if len(ids) + n > self.ctx:
            raise BadRequest(f"prompt ({len(ids)} tokens) + max_tokens ({n}) exceeds the context "
                             f"of {self.ctx}")
        t = req.get("temperature", 1.0)
        if not isinstance(t, (int, float)) or t < 0:
            raise BadRequest("'temperature' must be >= 0")
        return ids, n, float(t)

    def generate(self, ids, n, temperature, seed, ignore_eos, emit):
        """Calls emit(token_id, text_delta) per generated token; returns the finish reason."""
        torch, m = self.torch, self.models
        g = torch.Generator().manual_seed(seed if seed is not None else 0)
        with torch.no_grad():
            past = m.empty_past(self.cfg)
            x = torch.tensor([ids], dtype=torch.int64)
            mask = torch.ones_like(x)
            pos = torch.arange(len(ids))[None, :]
            out, text = [], ""
            for _ in range(n):
                logits, past = self.model(x, mask, pos, past)
                last = logits[0, -1]
                if temperature == 0:
                    tok = int(torch.argmax(last))
                else:
                    probs = torch.softmax(last / temperature, -1)
                    tok = int(torch.multinomial(probs, 1, generator=g))
                out.append(tok)
                full = self.sp.DecodeIds(out)
                delta, text = full[len(text):], full
                emit(tok, delta)
                if tok == self.eos and not ignore_eos:
                    return "stop"
                x = torch.tensor([[tok]], dtype=torch.int64)
                start = mask.shape[1]
                mask = torch.ones((1, start + 1), dtype=torch.int64)
                pos = torch.tensor([[start]], dtype=torch.int64)
        return "length"


class Worker(threading.Thread):
    """Runs queued requests one at a time, in arrival order."""

    def __init__(self, gen):
        super().__init__(daemon=True)
        self.gen, self.jobs = gen, queue.Queue()

    def run(self):
        while True:
            job, events = self.jobs.get()
            try:
                reason = self.gen.generate(*job, emit=lambda t, s: events.put(("token", t, s)))
                events.put(("done", reason, None))
            except Exception as e:  # a model error ends this request only
                events.put(("error", str(e), None))


def make_handler(gen, worker):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # bodies end when the connection closes (streams too)

        def log_message(self, *args):
            pass

        def send_json(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, e):
            self.send_json(e.status, {"error": {"message": str(e), "type": e.kind, "param": None,
                                                "code": None}})

        def do_GET(self):
            if self.path == "/health":
                return self.send_json(200, {"status": "ok"})
            if self.path == "/v1/models":
                return self.send_json(200, {"object": "list", "data": [
                    {"id": gen.name, "object": "model", "owned_by": "naive"}]})
            self.error(BadRequest(f"no route {self.path}", 404, "not_found_error"))

        def do_POST(self):
            if self.path != "/v1/completions":
                return self.error(BadRequest(f"no route {self.path}", 404, "not_found_error"))
            try:
                n = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(n) or b"null")
                if not isinstance(req, dict):
                    raise BadRequest("the body must be a JSON object")
                ids, max_tokens, temp = gen.parse(req)
            except json.JSONDecodeError as e:
                return self.error(BadRequest(f"malformed JSON: {e}"))
            except BadRequest as e:
                return self.error(e)
            events = queue.Queue()
            worker.jobs.put(((ids, max_tokens, temp, req.get("seed"), bool(req.get("ignore_eos"))),
                             events))
            if req.get("stream"):
                self.stream(req, ids, events)
            else:
                self.whole(ids, events)

        def chunk(self, obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        def stream(self, req, ids, events):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            rid, created, count = f"cmpl-{id(events)}", int(time.time()), 0
            base = {"id": rid, "object": "text_completion", "created": created, "model": gen.name}
            while True:
                kind, a, b = events.get()
                if kind == "token":
                    count += 1
                    self.chunk({**base, "choices": [{"index": 0, "text": b, "logprobs": None,
                                                     "finish_reason": None}]})
                elif kind == "done":
                    self.chunk({**base, "choices": [{"index": 0, "text": "", "logprobs": None,
                                                     "finish_reason": a}]})
                    break
                else:
                    self.chunk({"error": {"message": a, "type": "server_error"}})
                    break
            if (req.get("stream_options") or {}).get("include_usage"):
                self.chunk({**base, "choices": [], "usage": {
                    "prompt_tokens": len(ids), "completion_tokens": count,
                    "total_tokens": len(ids) + count}})
            self.wfile.write(b"data: [DONE]\n\n")

        def whole(self, ids, events):
            text, count = "", 0
            while True:
                kind, a, b = events.get()
                if kind == "token":
                    text, count = text + b, count + 1
                    continue
                if kind == "error":
                    return self.send_json(500, {"error": {"message": a, "type": "server_error"}})
                return self.send_json(200, {
                    "id": f"cmpl-{id(events)}", "object": "text_completion", "model": gen.name,
                    "choices": [{"index": 0, "text": text, "finish_reason": a}],
                    "usage": {"prompt_tokens": len(ids), "completion_tokens": count,
                              "total_tokens": len(ids) + count}})

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # open-loop load queues connections; the default 5 would drop them


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8010)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models-py", default=str(REPO / "scripts" / "generation"),
                    help="folder holding genmodel's models.py")
    a = ap.parse_args(argv)
    if not (Path(a.models_py) / "models.py").is_file():
        print(f"naive_server: no models.py in {a.models_py}", file=sys.stderr)
        return 1
    gen = Generator(a.model_dir, a.models_py, a.threads)
    worker = Worker(gen)
    worker.start()
    server = Server((a.host, a.port), make_handler(gen, worker))
    print(f"naive_server: {gen.name} on http://{a.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
