#!/usr/bin/env node
// llama.cpp peer of the generation benchmark, through node-llama-cpp 3.21.1's prebuilt CPU binaries
// (getLlama({gpu: false, build: "never"}): nothing is built or downloaded at run time).
//
//   node llama_peer.mjs --gguf M.gguf --reference reference.json [--threads 2]
//        [--streams 1,16] [--prompt-len 16] [--decode-tokens 64] [--kv-type f16|f32]
//        [--check-only] [--json OUT]
//
// 1. Check (always first, nothing is timed unless it passes): for each reference prompt, the
//    next-token log-probabilities llama.cpp gives after the prompt against log_softmax of
//    PyTorch's `logits_first` (softmax is shift-invariant, so this compares the logits up to
//    their common offset), max abs difference <= --tolerance; and greedy tokens against
//    `greedy` (reported, and counted as a failure only with --strict-greedy, since near-ties of
//    random weights can flip an argmax at float rounding).
// 2. Single stream: prefill a prompt, then time --decode-tokens greedy decode steps: tokens/s.
// 3. N streams (each of --streams): N context sequences of one context decode at once (llama.cpp
//    batches their tokens into one llama_decode per step): aggregate tokens/s.
// The check runs with an F32 KV cache; the timed runs with --kv-type (default F16, llama.cpp's own
// default, so the peer runs as its users run it).
// EOS does not stop decoding (yieldEogToken), so every stream makes exactly the tokens asked for.
// Prints one JSON object on stdout (and writes it to --json).
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function parseArgs(argv) {
    const o = {threads: 2, streams: [1], promptLen: 16, decodeTokens: 64, tolerance: 1e-3,
               kvType: "F16", vocab: 0, checkOnly: false, strictGreedy: false, json: "", reference: "", gguf: "", maxPrompts: 4};
    for (let i = 2; i < argv.length; i++) {
        const a = argv[i], v = () => {
            if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
            return argv[++i];
        };
        if (a === "--gguf") o.gguf = v();
        else if (a === "--reference") o.reference = v();
        else if (a === "--threads") o.threads = Number(v());
        else if (a === "--streams") o.streams = v().split(",").map(Number);
        else if (a === "--prompt-len") o.promptLen = Number(v());
        else if (a === "--decode-tokens") o.decodeTokens = Number(v());
        else if (a === "--tolerance") o.tolerance = Number(v());
        else if (a === "--max-prompts") o.maxPrompts = Number(v());
        else if (a === "--json") o.json = v();
        else if (a === "--kv-type") o.kvType = v().toUpperCase();
        else if (a === "--vocab") o.vocab = Number(v());
        else if (a === "--check-only") o.checkOnly = true;
        else if (a === "--strict-greedy") o.strictGreedy = true;
        else throw new Error(`unknown argument ${a}`);
    }
    if (!o.gguf) throw new Error("--gguf is required");
    for (const [k, x] of [["threads", o.threads], ["prompt-len", o.promptLen], ["decode-tokens", o.decodeTokens]]) {
        if (!Number.isInteger(x) || x < 1) throw new Error(`--${k} must be a positive integer`);
    }
    if (o.streams.some(n => !Number.isInteger(n) || n < 1)) throw new Error("--streams: positive integers");
    return o;
}

function logSoftmax(xs) {
    let m = -Infinity;
    for (const x of xs) m = Math.max(m, x);
    let s = 0;
    for (const x of xs) s += Math.exp(x - m);
    const lse = m + Math.log(s);
    return xs.map(x => x - lse);
}

// Next-token log-probabilities after `prompt` (full vocabulary: temperature 1, no top-k/p/min-p).
async function nextLogProbs(context, prompt, vocab) {
    const seq = context.getSequence();
    try {
        const gen = seq.evaluateWithMetadata(prompt, {probabilities: true},
            {temperature: 1, topK: vocab, topP: 1, minP: 0, seed: 1, yieldEogToken: true});
        const first = (await gen.next()).value;
        await gen.return();
        const lp = new Array(vocab).fill(-Infinity);
        for (const [tok, p] of first.probabilities) lp[tok] = Math.log(p);
        return lp;
    } finally {
        seq.dispose();
    }
}

// `n` greedy tokens after `prompt` on `seq`; returns [tokens, seconds from first to last token].
async function greedy(seq, prompt, n) {
    const out = [];
    let t0 = 0;
    for await (const tok of seq.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
        out.push(tok);
        if (out.length === 1) t0 = performance.now();
        if (out.length >= n) break;
    }
    return [out, (performance.now() - t0) / 1000];
}

async function check(llama, model, ref, o) {
    const vocab = ref.logits_first[0].length;
    // F32 KV cache for the check: llama.cpp's default F16 cache alone moves log-probs by ~1e-3.
    const context = await model.createContext({contextSize: 512, sequences: 1, threads: o.threads,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", flashAttention: false});
    const res = {max_abs_logprob_diff: 0, greedy_match: [], prompts: 0};
    try {
        const n = Math.min(o.maxPrompts, ref.prompts.length);
        for (let i = 0; i < n; i++) {
            const want = logSoftmax(ref.logits_first[i]);
            const got = await nextLogProbs(context, ref.prompts[i], want.length);
            for (let t = 0; t < want.length; t++) {
                // Tokens with probability below float precision come back as 0 (-inf): skip them.
                if (want[t] < -30 || !Number.isFinite(got[t])) continue;
                res.max_abs_logprob_diff = Math.max(res.max_abs_logprob_diff, Math.abs(got[t] - want[t]));
            }
            if (ref.greedy && ref.greedy[i]) {
                const seq = context.getSequence();
                const [toks] = await greedy(seq, ref.prompts[i], ref.greedy[i].length);
                seq.dispose();
                let k = 0;
                while (k < toks.length && toks[k] === ref.greedy[i][k]) k++;
                res.greedy_match.push(k / ref.greedy[i].length);
            }
            res.prompts++;
        }
    } finally {
        await context.dispose();
    }
    res.vocab = vocab;
    res.ok = res.max_abs_logprob_diff <= o.tolerance &&
             (!o.strictGreedy || res.greedy_match.every(m => m === 1));
    return res;
}

function promptTokens(o, vocab, k) {
    const p = [1];  // BOS, then a deterministic spread of ordinary ids
    for (let i = 1; i < o.promptLen; i++) p.push(3 + ((i * 7919 + k * 104729) % (vocab - 3)));
    return p;
}

// Aggregate decode tokens/s of `n` sequences decoding at once (n = 1: single stream).
async function measure(model, o, n, vocab) {
    const context = await model.createContext({
        contextSize: o.promptLen + o.decodeTokens + 8, sequences: n, threads: o.threads,
        batchSize: Math.max(n, o.promptLen),
        experimentalKvCacheKeyType: o.kvType, experimentalKvCacheValueType: o.kvType});
    try {
        const seqs = Array.from({length: n}, () => context.getSequence());
        const prompts = seqs.map((_, k) => promptTokens(o, vocab, k));
        // Prefill all but the last prompt token untimed; the timed part is decode only.
        await Promise.all(seqs.map((s, k) => s.evaluateWithoutGeneratingNewTokens(prompts[k].slice(0, -1))));
        const t0 = performance.now();
        const runs = await Promise.all(seqs.map((s, k) => greedy(s, prompts[k].slice(-1), o.decodeTokens)));
        const wall = (performance.now() - t0) / 1000;
        const tokens = runs.reduce((a, [t]) => a + t.length, 0);
        return {streams: n, tokens, seconds: wall, tokens_per_s: tokens / wall,
                per_stream_tokens_per_s: tokens / wall / n};
    } finally {
        await context.dispose();
    }
}

async function main() {
    const o = parseArgs(process.argv);
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error,
                                  maxThreads: o.threads});
    const model = await llama.loadModel({modelPath: o.gguf, gpuLayers: 0});
    const out = {engine: "llama.cpp", node_llama_cpp: "3.21.1", gguf: o.gguf, threads: o.threads,
                 kv_type: o.kvType};
    const vocab = o.vocab || 0;
    if (o.reference) {
        const ref = JSON.parse(fs.readFileSync(o.reference, "utf8"));
        out.check = await check(llama, model, ref, o);
        if (!out.check.ok) {
            out.error = `logits disagree with PyTorch: max |d log p| ${out.check.max_abs_logprob_diff} > ${o.tolerance}`;
        }
    }
    if (!o.checkOnly && !out.error) {
        out.runs = [];
        const v = vocab || (o.reference ? out.check.vocab : 100);
        for (const n of o.streams) out.runs.push(await measure(model, o, n, v));
    }
    await model.dispose();
    const text = JSON.stringify(out, null, 1);
    if (o.json) fs.writeFileSync(o.json, text + "\n");
    console.log(text);
    process.exit(out.error ? 1 : 0);
}

main().catch(e => {
    console.error(`llama_peer: ${e.message}`);
    process.exit(1);
});
