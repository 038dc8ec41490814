#!/usr/bin/env python3
"""train.py - trains the demo MoE on the CPU (`make demo-model`, docs/MODELS.md).

  train.py --out DIR [--steps N] [--reuse] [...]

1. data.py builds DIR/corpus.txt from Debian-packaged English (DATA.md);
2. bpe.py learns a 4096-token byte-level BPE on it (DIR/tokenizer.json) and encodes it;
3. the model (model.py) trains with AdamW, warm-up + cosine decay, a Switch-style
   load-balancing loss, fixed seed; the loss curve goes to DIR/loss.tsv and stdout;
4. DIR/model.pt holds the weights (checkpointed every --ckpt-every steps), then a few greedy
   and sampled continuations are printed.

--init CKPT starts from a checkpoint's weights (the second stage of make-demo-model.sh).
Export with export.py.  Deterministic for a given torch build and thread count; the default
is one thread, because on a shared, oversubscribed machine two OpenMP threads at nice 19
stalled each other far more than they helped."""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from model import Config, Model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def log(*a):
    print(*a, flush=True)


def prepare(out, vocab, reuse):
    tok_path, ids_path = os.path.join(out, "tokenizer.json"), os.path.join(out, "tokens.npy")
    if reuse and os.path.exists(tok_path) and os.path.exists(ids_path):
        with open(tok_path) as f:
            t = json.load(f)
        return t, np.load(ids_path)
    subprocess.run([sys.executable, os.path.join(HERE, "data.py"), out], check=True)
    with open(os.path.join(out, "corpus.txt"), encoding="utf-8") as f:
        text = f.read()
    t0 = time.time()
    tokens, merges = bpe.train(text, vocab)
    log("bpe: %d tokens, %d merges in %.0f s" % (len(tokens), len(merges), time.time() - t0))
    t = {"tokens": tokens, "merges": merges, "specials": bpe.SPECIALS}
    enc = bpe.Encoder(tokens, merges)
    eot = enc.id["<|endoftext|>"]
    ids = []
    for doc in text.split("\n<|endoftext|>\n"):
        if doc:
            ids.append(eot)        # every document follows <|endoftext|> (= BOS at run time)
            ids.extend(enc.encode(doc))
    ids = np.array(ids, dtype=np.int16 if len(tokens) < 32768 else np.int32)
    with open(tok_path, "w") as f:
        json.dump(t, f)
    np.save(ids_path, ids)
    return t, ids


def sample(model, enc, tokens, prompt, n, temp, gen):
    ids = [enc.id["<|endoftext|>"]] + enc.encode(prompt)
    stop = {enc.id["<|endoftext|>"], enc.id["<|im_end|>"]}
    model.eval()
    with torch.no_grad():
        for _ in range(n):
            x = torch.tensor([ids[-model.c.n_ctx:]], device=model.cos.device)
            logits = model(x)[0][0, -1].float().cpu()
            if temp == 0:
                t = int(logits.argmax())
            else:
                t = int(torch.multinomial((logits / temp).softmax(-1), 1, generator=gen))
            ids.append(t)
            if t in stop:
                break
    model.train()
    b = bytearray()
    inv = {v: k for k, v in bpe.B2U.items()}
    for t in ids[1:]:
        s = tokens[t]
        b += s.encode() if s in bpe.SPECIALS else bytes(inv[ch] for ch in s)
    return b.decode("utf-8", errors="replace")


PROMPTS = ["The old man", "Love is",
           "<|im_start|>user\nWhat is a volcano?<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>user\nTell me a fortune.<|im_end|>\n<|im_start|>assistant\n"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--aux", type=float, default=0.01, help="load-balancing loss weight")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--reuse", action="store_true", help="reuse DIR's tokenizer and tokens")
    ap.add_argument("--init", help="start from this checkpoint's weights (a second stage)")
    ap.add_argument("--config", default="{}", help="JSON overrides of model.Config")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    os.makedirs(a.out, exist_ok=True)

    tok, ids = prepare(a.out, 4096, a.reuse)
    enc = bpe.Encoder(tok["tokens"], tok["merges"])
    c = Config(n_vocab=len(tok["tokens"]), n_ctx=a.ctx, **json.loads(a.config))
    n_val = len(ids) // 100
    train_ids = torch.from_numpy(ids[:-n_val].astype(np.int64))
    val_ids = torch.from_numpy(ids[-n_val:].astype(np.int64))
    model = Model(c)
    if a.init:
        model.load_state_dict(torch.load(a.init, map_location="cpu")["state"])
        log("init: weights from %s" % a.init)
    model = model.to(a.device)
    n_par = sum(p.numel() for p in model.parameters())
    n_exp = sum(p.numel() for n, p in model.named_parameters() if n.endswith(("gate", "up", "down")))
    log("data: %d training tokens, %d validation tokens" % (len(train_ids), len(val_ids)))
    log("model: %s" % json.dumps(c.as_dict()))
    log("params: %.2f M total, %.2f M in experts, %.2f M active per token" %
        (n_par / 1e6, n_exp / 1e6,
         (n_par - n_exp * (1 - c.n_expert_used / c.n_expert)) / 1e6))

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(a.seed)

    def batch(src, gen):
        st = torch.randint(0, len(src) - a.ctx - 1, (a.batch,), generator=gen)
        x = torch.stack([src[s:s + a.ctx + 1] for s in st.tolist()])
        return x[:, :-1].to(a.device), x[:, 1:].to(a.device)

    def val_loss():
        vg = torch.Generator().manual_seed(1)
        model.eval()
        tot = 0.0
        with torch.no_grad():
            for _ in range(8):
                x, y = batch(val_ids, vg)
                tot += torch.nn.functional.cross_entropy(model(x)[0].flatten(0, 1), y.flatten()).item()
        model.train()
        return tot / 8

    lossf = open(os.path.join(a.out, "loss.tsv"), "w")
    lossf.write("step\ttrain_loss\tval_loss\taux\tseconds\n")
    t0, run_loss, run_aux = time.time(), None, None
    for step in range(1, a.steps + 1):
        lr = a.lr * min(1.0, step / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        x, y = batch(train_ids, g)
        logits, aux, counts = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        (loss + a.aux * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        run_loss = loss.item() if run_loss is None else 0.95 * run_loss + 0.05 * loss.item()
        run_aux = aux.item() if run_aux is None else 0.95 * run_aux + 0.05 * aux.item()
        if step % 25 == 0 or step == a.steps:
            vl = val_loss() if step % a.ckpt_every == 0 or step == a.steps else float("nan")
            el = time.time() - t0
            lossf.write("%d\t%.4f\t%.4f\t%.4f\t%.0f\n" % (step, run_loss, vl, run_aux, el))
            lossf.flush()
            load = counts.float() / counts.sum(1, keepdim=True)
            log("step %5d  loss %.3f  val %.3f  aux %.3f  lr %.2e  max expert share %.2f  %.2f steps/s" %
                (step, run_loss, vl, run_aux, lr, load.max().item(), step / el))
        if step % a.ckpt_every == 0 or step == a.steps:
            torch.save({"config": c.as_dict(), "state": {k: v.cpu() for k, v in model.state_dict().items()}, "step": step,
                        "args": vars(a)}, os.path.join(a.out, "model.pt"))
    lossf.close()
    log("trained %d steps in %.0f s; final val loss %.3f" % (a.steps, time.time() - t0, val_loss()))
    gen = torch.Generator().manual_seed(a.seed)
    for p in PROMPTS:
        log("--- greedy: %r\n%s" % (p, sample(model, enc, tok["tokens"], p, 48, 0, gen)))
        log("--- T=0.8: %r\n%s" % (p, sample(model, enc, tok["tokens"], p, 48, 0.8, gen)))


if __name__ == "__main__":
    main()
