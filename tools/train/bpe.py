#!/usr/bin/env python3
"""bpe.py - byte-level BPE (GPT-2 style) trainer and encoder for the demo model.

Text is split into pre-tokens with the GPT-2 regex (tokenizer.ggml.pre = "gpt-2", which both
particle and llama.cpp implement), each pre-token's UTF-8 bytes are mapped to printable
characters with GPT-2's byte-to-unicode table, and merges are learned greedily by pair
frequency (ties broken by the pair's text, so training is deterministic).

The corpus is printable ASCII plus newlines (data.py filters it), so \\p{L} is [A-Za-z] and
\\p{N} is [0-9] here and Python's re module matches the GPT-2 regex exactly."""
import collections
import re

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PRE_RE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


B2U = bytes_to_unicode()


def pretokens(text):
    for part in SPECIAL_RE.split(text):
        if part and part not in SPECIALS:
            yield from PRE_RE.findall(part)


def to_symbols(pre):
    return "".join(B2U[b] for b in pre.encode("utf-8"))


def train(text, vocab_size):
    """Returns (tokens, merges): 256 byte symbols, then merged tokens, then SPECIALS."""
    counts = collections.Counter(to_symbols(p) for p in pretokens(text))
    words = [list(w) for w in counts]
    freq = [counts[w] for w in counts]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += freq[i]
            where[a, b].add(i)
    tokens = [B2U[b] for b in range(256)]
    known = set(tokens)
    merges = []
    while len(tokens) + len(SPECIALS) < vocab_size and pairs:
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        a, b = best
        ab = a + b
        merges.append(a + " " + b)
        if ab not in known:
            known.add(ab)
            tokens.append(ab)
        for i in list(where[best]):
            w = words[i]
            # remove this word's old pairs, merge, add the new pairs
            for p in zip(w, w[1:]):
                pairs[p] -= freq[i]
                if pairs[p] <= 0:
                    del pairs[p]
                where[p].discard(i)
            j, out = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(ab)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for p in zip(out, out[1:]):
                pairs[p] += freq[i]
                where[p].add(i)
        where.pop(best, None)
    return tokens + SPECIALS, merges


class Encoder:
    def __init__(self, tokens, merges):
        self.id = {t: i for i, t in enumerate(tokens)}
        self.rank = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        self.cache = {}

    def _bpe(self, sym):
        w = list(sym)
        while len(w) > 1:
            best, br = None, None
            for k in range(len(w) - 1):
                r = self.rank.get((w[k], w[k + 1]))
                if r is not None and (br is None or r < br):
                    best, br = k, r
            if best is None:
                break
            a, b = w[best], w[best + 1]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            w = out
        return [self.id[t] for t in w]

    def encode(self, text):
        """Token ids of text; special-token strings become their single ids."""
        ids = []
        for part in SPECIAL_RE.split(text):
            if not part:
                continue
            if part in SPECIALS:
                ids.append(self.id[part])
                continue
            for p in PRE_RE.findall(part):
                r = self.cache.get(p)
                if r is None:
                    r = self.cache[p] = self._bpe(to_symbols(p))
                ids.extend(r)
        return ids
