#!/usr/bin/env python3
"""End-to-end test of constrained output through `inferd serve` (docs/generation.md, "Constrained
output"): /v1/chat/completions with response_format json_schema (greedy and sampled, plain and
streamed), json_object, guided_regex and response_format regex on the trained tiny-llama; every
output must parse and validate against its schema (python3-jsonschema) or match its regex in
full. Then the bad inputs: an invalid schema, an unsupported schema keyword, an invalid regex, a
pattern too large for the automaton: a 400 in OpenAI's error format, and the server still serves.

    constrained_output_test.py --inferd build/inferd --gen-models build/models/gen

Skips (exit 0, says so) when the models folder has no tiny-llama.
"""
import argparse
import json
import os
import re
import shutil
import sys

import jsonschema
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import Server, check, failures, link_decoder_files  # noqa: E402

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "mood": {"enum": ["happy", "sad", "proud"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        "married": {"type": "boolean"},
    },
    "required": ["name", "age", "mood"],
    "additionalProperties": False,
}


def write_repository(root, gen_models):
    if os.path.exists(root):
        shutil.rmtree(root)
    src = os.path.join(gen_models, "tiny-llama")
    if not os.path.exists(os.path.join(src, "model.onnx")):
        return False
    link_decoder_files(src, f"{root}/tiny-llama/1")
    with open(f"{root}/tiny-llama/config.pbtxt", "w") as out:
        out.write('backend: "inferd_generate"\n'
                  'parameters { key: "kv_cache_bytes" value: { string_value: "16MiB" } }\n'
                  'parameters { key: "max_num_seqs" value: { string_value: "16" } }\n')
    return True


def chat(h, extra, content="Describe a character from the novel as JSON.", **kw):
    body = {"model": "tiny-llama", "max_tokens": 200,
            "messages": [{"role": "user", "content": content}], **extra}
    return requests.post(h + "/v1/chat/completions", json=body, timeout=300, **kw)


def schema_format(schema):
    return {"response_format": {"type": "json_schema", "json_schema": {
        "name": "person", "strict": True, "schema": schema}}}


def validate(text, schema, what):
    try:
        value = json.loads(text)
        jsonschema.validate(value, schema)
        return True
    except (ValueError, jsonschema.ValidationError) as e:
        check(False, f"{what}: {text!r} does not validate: {str(e)[:200]}")
        return False


def constrained_outputs(h):
    for i in range(12):
        sampling = {"temperature": 0} if i == 0 else {"temperature": 0.9, "seed": i}
        r = chat(h, {**schema_format(PERSON), **sampling})
        check(r.status_code == 200, f"json_schema {i}: {r.status_code} {r.text[:300]}")
        if r.status_code != 200:
            continue
        choice = r.json()["choices"][0]
        check(choice["finish_reason"] == "stop", f"json_schema {i}: finish {choice}")
        validate(choice["message"]["content"], PERSON, f"json_schema {i}")

    # Streamed: the deltas concatenate to a valid document.
    with chat(h, {**schema_format(PERSON), "temperature": 0.7, "seed": 5, "stream": True},
              stream=True) as r:
        deltas = []
        # Bytes, decoded as UTF-8 here: requests would decode text/event-stream (no charset in
        # the header) as ISO-8859-1.
        for raw in r.iter_lines():
            line = raw.decode("utf-8")
            if line.startswith("data: ") and line != "data: [DONE]":
                for c in json.loads(line[6:])["choices"]:
                    deltas.append(c["delta"].get("content", ""))
    validate("".join(deltas), PERSON, "streamed json_schema")

    r = chat(h, {"response_format": {"type": "json_object"}, "temperature": 0.8, "seed": 3,
                 "max_tokens": 400})
    check(r.status_code == 200, f"json_object: {r.status_code} {r.text[:300]}")
    if r.status_code == 200:
        choice = r.json()["choices"][0]
        if choice["finish_reason"] == "stop":  # an unbounded string may run out of max_tokens
            check(isinstance(json.loads(choice["message"]["content"]), dict),
                  f"json_object: {choice}")

    for extra, pattern in [({"guided_regex": "(yes|no), because [a-z ]{3,20}\\."},
                            r"(yes|no), because [a-z ]{3,20}\."),
                           ({"response_format": {"type": "regex", "regex": "[0-9]{4}-[0-9]{2}"}},
                            r"[0-9]{4}-[0-9]{2}")]:
        r = chat(h, {**extra, "temperature": 0.5, "seed": 9})
        text = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else None
        check(text is not None and re.fullmatch(pattern, text), f"regex {pattern}: {r.text[:300]}")


def openai_400(r, param, fragment, what):
    try:
        e = r.json()["error"]
        ok = (r.status_code == 400 and e["type"] == "invalid_request_error" and
              e.get("param") == param and fragment in e["message"])
    except (ValueError, KeyError, TypeError):
        ok = False
    check(ok, f"{what}: expected 400 param={param} with {fragment!r}, got {r.status_code} "
              f"{r.text[:300]}")


def bad_inputs(h):
    bad_type = {"type": "object", "properties": {"a": {"type": "strin"}}}
    openai_400(chat(h, schema_format(bad_type)), "response_format", "'type' at '/properties/a'",
               "invalid schema")
    openai_400(chat(h, schema_format({"type": "integer", "minimum": 1})), "response_format",
               "unsupported JSON schema keyword 'minimum'", "unsupported keyword")
    openai_400(chat(h, {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
               "response_format", "schema", "missing schema")
    openai_400(chat(h, {"guided_regex": "([a-z]+"}), "guided_regex", "missing ')'",
               "invalid regex")
    openai_400(chat(h, {"guided_regex": "(?!x)y"}), "guided_regex", "not supported",
               "unsupported regex")
    openai_400(chat(h, {"response_format": {"type": "xml"}}), "response_format", "xml",
               "unknown response_format type")
    openai_400(chat(h, {"guided_regex": "(a|b)*a(a|b){16}"}), None, "automaton states",
               "automaton too large")
    r = chat(h, {"temperature": 0, "max_tokens": 8})
    check(r.status_code == 200, f"still serving after bad inputs: {r.status_code}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--gen-models", required=True)
    ap.add_argument("--work-dir", default="/tmp/inferd_constrained_output_test")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repository")
    if not write_repository(repo, args.gen_models):
        print(f"constrained_output_test: no tiny-llama in {args.gen_models}: skipped")
        return
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"),
                    args=["--threads", "2"], grpc=False, start_timeout=300, stop_timeout=30)
    try:
        constrained_outputs(server.http)
        bad_inputs(server.http)
    finally:
        rc = server.stop()
        check(rc == 0, f"server exit code {rc}")
    print(f"constrained_output_test: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
