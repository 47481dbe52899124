"""Trains tiny-llama, the small Llama-style model of the generation engine, on Jane Austen.

    /usr/bin/python3 scripts/generation/train.py [--tokenizer PATH] [--steps N]  (a dry run)

build_models.py calls train_tiny_llama(); run alone it trains and prints the report only.
Data: the novels' paragraphs (tokenizer.corpus(): 95% train, the last 5% of each novel held
out) joined by newlines into one token stream per split; a training sample is bos followed by a
random window of the stream (so that prompts "bos + any text" are in distribution). The
model never sees eos (generation stops at max_tokens or a stop string).

Budget: STEPS steps; the learning-rate schedule (warmup, cosine decay) follows progress =
step / STEPS, so the weights do not depend on how fast or loaded the machine is (the same torch
and thread count give the same model). MAX_SECONDS is only a guard against a machine so slow
the build would never end: reaching it stops training early (logged, and in the report's
"steps"), with a model that is then under-trained. The draft likewise (DRAFT_STEPS,
DRAFT_MAX_SECONDS). Before, the schedule followed max(step / STEPS, elapsed / MAX_SECONDS) with
DRAFT_MAX_SECONDS = 240: a draft built under load stopped at step 18 of 300, its held-out greedy
agreement with tiny-llama 0.21 instead of 0.82.
"""
import argparse
import math
import os
import sys
import time

# Passive OpenMP waits: on a shared, loaded machine torch's spinning worker threads make each
# training step 3-4x slower (measured: 1.6 s vs 5-10 s per step on 2 threads). Must be set
# before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
import tokenizer as tok  # noqa: E402

SEED = 20261201
SHAPE = dict(hidden_size=192, num_layers=4, num_heads=6, num_kv_heads=2, intermediate_size=512)
MAX_POSITIONS = 1024
SEQ_LEN = 128        # tokens per sample, bos included
BATCH = 16
STEPS = 300
LR, WARMUP, MIN_LR_FRACTION = 3e-3, 20, 0.1
MAX_SECONDS = 3600  # a guard only (see above); 300 steps take ~8 minutes on 2 idle cores
NUM_PROMPTS = 16
# tiny-llama-draft, the speculative-decoding draft of tiny-llama (train_draft): ~8x fewer
# parameters (0.30M: the 2048-piece embedding and head are most of it), same tokenizer, trained
# by distillation from tiny-llama's next-token distributions (KL), which is what the acceptance
# rate rewards, plus a little of the corpus loss.
DRAFT_SHAPE = dict(hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=128)
DRAFT_STEPS = 300
DRAFT_LR = 1e-2
DRAFT_MAX_SECONDS = 1800  # a guard only, as MAX_SECONDS
DRAFT_CE_WEIGHT = 0.1


def token_streams(sp):
    train, held = tok.corpus()
    enc = lambda paras: np.array(sp.encode("\n".join(paras)), dtype=np.int64)  # noqa: E731
    return enc(train), enc(held)


def batch_of(stream, starts, bos):
    rows = [np.concatenate(([bos], stream[s:s + SEQ_LEN])) for s in starts]  # SEQ_LEN + 1
    return torch.from_numpy(np.stack(rows))


def lm_loss(model, x):
    """Mean next-token cross entropy (nats) of rows x [B, SEQ_LEN + 1]."""
    ids, target = x[:, :-1], x[:, 1:]
    b, s = ids.shape
    mask = torch.ones((b, s), dtype=torch.int64)
    pos = torch.arange(s)[None, :].expand(b, s)
    logits, _ = model(ids, mask, pos, models.empty_past(model.config, b))
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             target.reshape(-1))


def lr_at(step, progress):
    """Linear warmup over WARMUP steps, then cosine decay to MIN_LR_FRACTION at progress 1."""
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    t = min(1.0, progress)
    return LR * (MIN_LR_FRACTION + (1 - MIN_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * t)))


def optimizer_of(model):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=LR, betas=(0.9, 0.95))


@torch.no_grad()
def held_out_loss(model, held, bos):
    """Loss over consecutive non-overlapping windows of the held-out stream (at most 64)."""
    starts = list(range(0, len(held) - SEQ_LEN, SEQ_LEN))[:64]
    losses = [float(lm_loss(model, batch_of(held, starts[i:i + BATCH], bos)))
              for i in range(0, len(starts), BATCH)]
    return float(np.mean(losses))


def make_prompts(held, bos, count=3 * NUM_PROMPTS):
    """Candidate reference prompts: bos + 4..34 tokens taken from evenly spread places of the
    held-out stream (build_models keeps NUM_PROMPTS of them without near-tie greedy steps)."""
    g = np.random.default_rng(SEED)
    offsets = np.linspace(0, len(held) - 64, count).astype(int)
    return [[bos] + held[o:o + int(g.integers(4, 35))].tolist() for o in offsets]


def train_tiny_llama(sp_path, steps=None, log=print):
    """Returns (model in eval mode, config dict, candidate reference prompts, report dict)."""
    global STEPS
    if steps is not None:
        STEPS = steps
    torch.manual_seed(SEED)
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    train, held = token_streams(sp)
    cfg = models.make_config("llama", sp.vocab_size(), max_positions=MAX_POSITIONS,
                             bos_token_id=sp.bos_id(), eos_token_id=sp.eos_id(),
                             **{k: v for k, v in SHAPE.items()})
    model = models.init_random(models.build_model(cfg), SEED)
    opt = optimizer_of(model)
    g = np.random.default_rng(SEED)
    bos = sp.bos_id()
    t0, done, loss = time.time(), 0, float("nan")
    model.train()
    for step in range(STEPS):
        progress = step / STEPS
        if time.time() - t0 >= MAX_SECONDS:
            log("  WARNING: stopping at step %d of %d: the %ds guard was reached (an extremely "
                "slow machine); the model is under-trained" % (step, STEPS, MAX_SECONDS))
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, progress)
        x = batch_of(train, g.integers(0, len(train) - SEQ_LEN, BATCH), bos)
        loss_t = lm_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss, done = float(loss_t), step + 1
        if step % 20 == 0 or step == STEPS - 1:
            log("  step %d/%d loss %.3f (%.0fs)" % (step, STEPS, loss, time.time() - t0))
    model.eval()
    seconds = time.time() - t0
    eval_loss = held_out_loss(model, held, bos)
    prompts = make_prompts(held, bos)
    sample, _ = models.greedy_generate(model, prompts[0], 64)
    report = {
        "steps": done, "planned_steps": STEPS, "batch": BATCH, "seq_len": SEQ_LEN,
        "tokens_seen": done * BATCH * SEQ_LEN, "train_tokens": int(len(train)),
        "held_out_tokens": int(len(held)), "seconds": round(seconds, 1),
        "threads": torch.get_num_threads(), "final_train_loss": round(loss, 4),
        "held_out_loss": round(eval_loss, 4), "held_out_perplexity": round(math.exp(eval_loss), 2),
        "params": sum(p.numel() for p in model.parameters()),
        "sample_prompt": sp.decode(prompts[0]), "sample_greedy": sp.decode(sample),
    }
    log("  trained %d steps in %.0fs: held-out loss %.3f (ppl %.1f)" %
        (done, seconds, eval_loss, math.exp(eval_loss)))
    log("  sample: %r -> %r" % (report["sample_prompt"], report["sample_greedy"]))
    return model, cfg, prompts, report


def distill_loss(student, teacher, x):
    """KL(teacher || student) per token + DRAFT_CE_WEIGHT * the corpus cross entropy."""
    ids, target = x[:, :-1], x[:, 1:]
    b, s = ids.shape
    mask = torch.ones((b, s), dtype=torch.int64)
    pos = torch.arange(s)[None, :].expand(b, s)
    with torch.no_grad():
        t_logits, _ = teacher(ids, mask, pos, models.empty_past(teacher.config, b))
        t_logp = torch.log_softmax(t_logits, -1)
    s_logits, _ = student(ids, mask, pos, models.empty_past(student.config, b))
    s_logp = torch.log_softmax(s_logits, -1)
    kl = (t_logp.exp() * (t_logp - s_logp)).sum(-1).mean()
    ce = torch.nn.functional.cross_entropy(s_logits.reshape(-1, s_logits.shape[-1]),
                                           target.reshape(-1))
    return kl + DRAFT_CE_WEIGHT * ce, kl


@torch.no_grad()
def greedy_agreement(student, teacher, held, bos):
    """Fraction of held-out positions where the draft's argmax equals the target's (the greedy
    acceptance rate of one draft token on real text)."""
    starts = list(range(0, len(held) - SEQ_LEN, SEQ_LEN))[:32]
    x = batch_of(held, starts, bos)[:, :-1]
    b, s = x.shape
    mask = torch.ones((b, s), dtype=torch.int64)
    pos = torch.arange(s)[None, :].expand(b, s)
    t, _ = teacher(x, mask, pos, models.empty_past(teacher.config, b))
    d, _ = student(x, mask, pos, models.empty_past(student.config, b))
    return float((t.argmax(-1) == d.argmax(-1)).float().mean())


def train_draft(sp_path, teacher, steps=DRAFT_STEPS, log=print):
    """The draft of `teacher` (tiny-llama, eval mode): returns (model, config, report). Same
    budget rule as train_tiny_llama: DRAFT_STEPS, DRAFT_MAX_SECONDS only as a guard."""
    torch.manual_seed(SEED + 1)
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    train, held = token_streams(sp)
    cfg = models.make_config("llama", sp.vocab_size(), max_positions=MAX_POSITIONS,
                             bos_token_id=sp.bos_id(), eos_token_id=sp.eos_id(), **DRAFT_SHAPE)
    model = models.init_random(models.build_model(cfg), SEED + 1)
    opt = optimizer_of(model)
    g = np.random.default_rng(SEED + 1)
    bos = sp.bos_id()
    t0, done, kl = time.time(), 0, float("nan")
    model.train()
    for step in range(steps):
        progress = step / steps
        if time.time() - t0 >= DRAFT_MAX_SECONDS:
            log("  WARNING: stopping at step %d of %d: the %ds guard was reached; the draft is "
                "under-trained" % (step, steps, DRAFT_MAX_SECONDS))
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, progress) * DRAFT_LR / LR
        x = batch_of(train, g.integers(0, len(train) - SEQ_LEN, BATCH), bos)
        loss_t, kl_t = distill_loss(model, teacher, x)
        opt.zero_grad(set_to_none=True)
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        kl, done = float(kl_t), step + 1
        if step % 20 == 0 or step == steps - 1:
            log("  draft step %d/%d kl %.3f (%.0fs)" % (step, steps, kl, time.time() - t0))
    model.eval()
    agreement = greedy_agreement(model, teacher, held, bos)
    report = {
        "steps": done, "planned_steps": steps, "seconds": round(time.time() - t0, 1),
        "final_train_kl": round(kl, 4), "held_out_loss": round(held_out_loss(model, held, bos), 4),
        "held_out_greedy_agreement": round(agreement, 4),
        "params": sum(p.numel() for p in model.parameters()),
        "target_params": sum(p.numel() for p in teacher.parameters()),
    }
    log("  draft: %d params (target %d), held-out greedy agreement with the target %.3f" %
        (report["params"], report["target_params"], agreement))
    return model, cfg, report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="build/models/gen/_tokenizer/tokenizer.model")
    ap.add_argument("--steps", type=int, default=None)
    a = ap.parse_args()
    torch.set_num_threads(2)
    train_tiny_llama(tok.shared_tokenizer(os.path.dirname(a.tokenizer)), a.steps)


if __name__ == "__main__":
    main()
