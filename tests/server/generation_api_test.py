#!/usr/bin/env python3
"""End-to-end test of the generation API of `inferd serve` (server/openai_http.h).

Writes a repository with an ONNX model (identity), a generative folder whose tokenizer is corrupt
(broken-llama: must show UNAVAILABLE with the reason) and, when --gen-models holds a built
tiny-llama, the generative tiny-llama (and test-moe, the mixture-of-experts test model, when
built: a completion and its router load on /metrics). Checks the bad inputs of issue 12 item 10 (OpenAI error
JSON, 400/404), the KServe index/ready rows, promtool on /metrics, and with tiny-llama: a
completion with usage, greedy determinism, a streamed chat completion (SSE framing, usage chunk,
[DONE]), Triton generate and generate_stream, and a client that disconnects mid-stream: its
sequence is cancelled and the KV-usage gauge returns to 0.

    generation_api_test.py --inferd build/inferd [--gen-models build/models/gen]
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import onnx
from onnx import TensorProto, helper
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, failures, link_decoder_files  # noqa: E402


def write_repository(root, gen_models):
    if os.path.exists(root):
        shutil.rmtree(root)
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(f"{root}/identity/1")
    onnx.save(m, f"{root}/identity/1/model.onnx")
    gen_config = ('backend: "inferd_generate"\n'
                  'parameters { key: "kv_cache_bytes" value: { string_value: "8MiB" } }\n'
                  'parameters { key: "max_num_seqs" value: { string_value: "8" } }\n')
    # broken-llama: every file present, the tokenizer is garbage.
    os.makedirs(f"{root}/broken-llama/1")
    for f in ("model.onnx", "config.json"):
        with open(f"{root}/broken-llama/1/{f}", "w") as out:
            out.write("{}")
    with open(f"{root}/broken-llama/1/tokenizer.model", "wb") as out:
        out.write(b"\x00not a sentencepiece model")
    with open(f"{root}/broken-llama/config.pbtxt", "w") as out:
        out.write(gen_config)
    moe = os.path.join(gen_models or "", "test-moe")
    if gen_models and os.path.exists(os.path.join(moe, "model.onnx")):
        link_decoder_files(moe, f"{root}/test-moe/1")
        with open(f"{root}/test-moe/config.pbtxt", "w") as out:
            out.write(gen_config)
    src = os.path.join(gen_models or "", "tiny-llama")
    if gen_models and os.path.exists(os.path.join(src, "model.onnx")):
        link_decoder_files(src, f"{root}/tiny-llama/1")
        with open(f"{root}/tiny-llama/config.pbtxt", "w") as out:
            out.write(gen_config)
        return True
    return False


def openai_error(resp, status, param, what):
    try:
        e = resp.json()["error"]
        ok = (resp.status_code == status and isinstance(e["message"], str) and e["message"]
              and "type" in e and "code" in e and e.get("param") == param)
    except (ValueError, KeyError, TypeError):
        ok = False
    check(ok, f"{what}: expected {status} param={param}, got {resp.status_code} {resp.text[:300]}")


def metric(server, name, model):
    text = requests.get(server.metrics + "/metrics", timeout=10).text
    m = re.search(rf'^{name}{{model="{re.escape(model)}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def expert_load(server, model):
    """Mixture of experts: each layer's sum of inferd_moe_expert_tokens_total, by layer."""
    text = requests.get(server.metrics + "/metrics", timeout=10).text
    sums = {}
    for layer, value in re.findall(rf'^inferd_moe_expert_tokens_total{{model="{re.escape(model)}",'
                                   r'layer="(\d+)",expert="\d+"} (\S+)$', text, re.M):
        sums[int(layer)] = sums.get(int(layer), 0) + float(value)
    return [sums[k] for k in sorted(sums)]


def mixture_of_experts(server, model):
    """A greedy completion on the MoE model; its router load on /metrics is tokens x top-2 per
    layer (every prompt token and every generated token but the last ran through the model)."""
    r = requests.post(server.http + "/v1/completions", timeout=60,
                      json={"model": model, "prompt": "Hello there", "max_tokens": 6,
                            "temperature": 0, "ignore_eos": True})
    check(r.status_code == 200, f"{model} completion: {r.status_code} {r.text[:300]}")
    if r.status_code != 200:
        return
    usage = r.json()["usage"]
    tokens = usage["prompt_tokens"] + usage["completion_tokens"] - 1
    load = expert_load(server, model)
    check(load == [2.0 * tokens] * 2,
          f"{model}: expert load per layer {load}, expected 2 layers of {2 * tokens}")
    check(expert_load(server, "tiny-llama") == [], "a dense model has no expert load series")


def bad_inputs(h, model):
    url = h + "/v1/completions"
    post = lambda body: requests.post(url, data=body if isinstance(body, str) else json.dumps(body),
                                      timeout=30)
    openai_error(post("{oops"), 400, None, "malformed JSON")
    openai_error(post({"model": "nope", "prompt": "x"}), 404, "model", "unknown model")
    openai_error(post({"model": "identity", "prompt": "x"}), 400, "model", "non-generative model")
    openai_error(post({"model": "broken-llama", "prompt": "x"}), 503, "model", "unavailable model")
    if model is None:
        return
    for body, param, what in [
            ({"max_tokens": 0}, "max_tokens", "max_tokens 0"),
            ({"max_tokens": -1}, "max_tokens", "max_tokens < 0"),
            ({"max_tokens": 10 ** 7}, "max_tokens", "max_tokens above the context"),
            ({"temperature": -1}, "temperature", "negative temperature"),
            ({"top_p": 0}, "top_p", "top_p 0"),
            ({"top_p": 1.01}, "top_p", "top_p > 1"),
            ({"n": 2}, "n", "n > 1"),
            ({"prompt": "word " * 5000}, "prompt", "prompt longer than the context")]:
        openai_error(post({"model": model, "prompt": "Hello", **body}), 400, param, what)
    openai_error(requests.post(h + "/v1/chat/completions", timeout=30, json={
        "model": model, "messages": [{"role": "narrator", "content": "x"}]}), 400, "messages",
        "unknown chat role")


def sse_events(resp):
    """The data: payloads of an SSE response, in order."""
    events = []
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            events.append(line[len("data: "):])
        elif line:
            check(False, f"unexpected SSE line {line!r}")
    return events


def generation(server, model):
    h = server.http
    body = {"model": model, "prompt": "It is a truth universally acknowledged", "max_tokens": 12,
            "temperature": 0}
    r1 = requests.post(h + "/v1/completions", json=body, timeout=120)
    check(r1.status_code == 200, f"completion: {r1.status_code} {r1.text[:300]}")
    if r1.status_code != 200:
        return
    d = r1.json()
    check(d["object"] == "text_completion" and d["choices"][0]["finish_reason"] == "length",
          f"completion shape: {d}")
    check(d["usage"]["completion_tokens"] == 12, f"usage: {d['usage']}")
    r2 = requests.post(h + "/v1/completions", json=body, timeout=120).json()
    check(r2["choices"][0]["text"] == d["choices"][0]["text"], "greedy is deterministic")

    chat = {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "Do you dance, Mr. Darcy?"}]}
    with requests.post(h + "/v1/chat/completions", json=chat, stream=True, timeout=120) as r:
        check(r.headers.get("Content-Type") == "text/event-stream", f"SSE type {r.headers}")
        events = sse_events(r)
    check(events and events[-1] == "[DONE]", f"stream ends with [DONE]: {events[-3:]}")
    chunks = [json.loads(e) for e in events[:-1]]
    check(chunks and chunks[0]["choices"][0]["delta"].get("role") == "assistant", "role chunk")
    check(chunks and chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= 1,
          f"usage chunk: {chunks[-1:]}")

    g = requests.post(f"{h}/v2/models/{model}/generate", timeout=120,
                      json={"text_input": "Emma", "parameters": {"max_tokens": 8}})
    check(g.status_code == 200 and isinstance(g.json().get("text_output"), str),
          f"generate: {g.text[:200]}")
    with requests.post(f"{h}/v2/models/{model}/generate_stream", stream=True, timeout=120,
                       json={"text_input": "Emma", "parameters": {"max_tokens": 8}}) as r:
        parts = [json.loads(e)["text_output"] for e in sse_events(r)]
    check(len(parts) >= 1, "generate_stream sends events")


def disconnect(server, model):
    """A client that goes away mid-stream: its blocks are freed (KV usage back to 0)."""
    host, port = server.http[len("http://"):].rsplit(":", 1)
    body = json.dumps({"model": model, "prompt": "Elizabeth", "max_tokens": 900,
                       "ignore_eos": True, "stream": True})
    s = socket.create_connection((host, int(port)), timeout=60)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    got = b""
    while got.count(b"data: ") < 3:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    check(got.startswith(b"HTTP/1.1 200"), f"stream started: {got[:300]!r}")
    used = metric(server, "inferd_kv_cache_usage_perc", model)
    check(used is not None and used > 0, f"KV usage while streaming: {used}")
    s.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        if metric(server, "inferd_kv_cache_usage_perc", model) == 0 and \
                metric(server, "inferd_num_requests_running", model) == 0:
            break
        time.sleep(0.1)
    check(metric(server, "inferd_kv_cache_usage_perc", model) == 0,
          "KV blocks freed after the client disconnected")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--gen-models", default="")
    ap.add_argument("--work-dir", default="/tmp/inferd_generation_api_test")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repository")
    have_model = write_repository(repo, args.gen_models)
    # Loading tiny-llama (a session, warm-up) takes longer than a KServe model.
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"),
                    args=["--threads", "2"], grpc=False, start_timeout=300, stop_timeout=30)
    try:
        h = server.http
        index = requests.post(h + "/v2/repository/index", timeout=10).json()
        rows = {r["name"]: r for r in index}
        check(rows.get("identity", {}).get("state") == "READY", f"identity READY: {index}")
        broken = rows.get("broken-llama", {})
        reason = broken.get("reason", "")
        # A build without src/generation says so instead.
        check(broken.get("state") == "UNAVAILABLE" and
              ("tokenizer" in reason or "no generation engine" in reason),
              f"broken-llama UNAVAILABLE naming the tokenizer: {broken}")
        check(requests.get(h + "/v2/models/broken-llama/ready", timeout=10).status_code == 503,
              "broken model not ready")
        ready = have_model and rows.get("tiny-llama", {}).get("state") == "READY"
        if have_model:
            check(ready, f"tiny-llama READY: {rows.get('tiny-llama')}")
        moe = rows.get("test-moe", {}).get("state") == "READY"
        if "test-moe" in rows:
            check(moe, f"test-moe READY: {rows.get('test-moe')}")
        models = requests.get(h + "/v1/models", timeout=10).json()
        want = sorted((["tiny-llama"] if ready else []) + (["test-moe"] if moe else []))
        check(sorted(m["id"] for m in models["data"]) == want, f"/v1/models: {models}")
        bad_inputs(h, "tiny-llama" if ready else None)
        if ready:
            generation(server, "tiny-llama")
            disconnect(server, "tiny-llama")
        if moe:
            mixture_of_experts(server, "test-moe")
        text = requests.get(server.metrics + "/metrics", timeout=10).text
        prom = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                              capture_output=True)
        check(prom.returncode == 0, f"promtool: {prom.stdout}{prom.stderr}")
    finally:
        rc = server.stop()
        check(rc == 0, f"server exit code {rc}")
    print(f"generation_api_test: {'tiny-llama' if have_model else 'no generative model'}; "
          f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
