#!/usr/bin/env python3
"""data.py OUT_DIR - builds the demo model's training text from Debian-packaged, freely
licensed English (tools/train/DATA.md): WordNet 3.0 glosses (wordnet-base) and the
fortune-mod quotations (fortunes, fortunes-min).  Deterministic: same packages -> same bytes.

Writes OUT_DIR/corpus.txt: documents separated by the line <|endoftext|>.  About half of the
documents are ChatML dialogues (<|im_start|>user ... <|im_end|>) so that the model has seen
the chat template it is shipped with; the rest is plain prose (definitions with their
example sentences, and fortunes)."""
import os
import random
import re
import sys

WORDNET = "/usr/share/wordnet"
FORTUNES = "/usr/share/games/fortunes"
# Fortune files that are mostly code, ASCII drawings or non-English.
FORTUNE_SKIP = {"ascii-art", "translate-me", "perl", "debian", "linux", "linuxcookie", "zippy"}
EOT = "<|endoftext|>"


def chat(user, assistant):
    return ("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n" + assistant +
            "<|im_end|>")


def printable(s):
    return all(c == "\n" or " " <= c <= "~" for c in s)


def sentence(s):
    s = s.strip()
    return s[0].upper() + s[1:] + ("" if s[-1] in ".!?" else ".")


def wordnet_docs(rng):
    docs = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(WORDNET, "data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                head, gloss = line.split("|", 1)
                f_ = head.split()
                word = f_[4].replace("_", " ")
                word = re.sub(r"\((a|p|ip)\)$", "", word)
                parts = [p.strip() for p in gloss.strip().split(";") if p.strip()]
                if not parts or not printable(gloss):
                    continue
                defs = [p for p in parts if not p.startswith('"')]
                exs = [p.strip('"').strip() for p in parts if p.startswith('"')]
                exs = [e for e in exs if len(e) > 12 and e.count('"') == 0]
                if not defs:
                    continue
                d = "; ".join(defs)
                if pos == "noun" and not exs and rng.random() < 0.6:
                    continue  # mostly taxonomy (species, genera): keep fewer of them
                if pos == "noun":
                    art = "an" if word[0].lower() in "aeiou" else "a"
                    if word[0].isupper():
                        art = ""  # a proper name: "Sumer is ...", not "A Sumer is ..."
                    aw = (art + " " + word).strip()
                    q = rng.choice(["What is %s?" % aw, "What does \"%s\" mean?" % word,
                                    "Define %s." % word, "Tell me about %s." % aw])
                    a = "%s is %s." % (aw[0].upper() + aw[1:], d.rstrip("."))
                elif pos == "verb":
                    q = rng.choice(["What does it mean to %s?" % word,
                                    "What does \"%s\" mean?" % word, "Define %s." % word])
                    a = "To %s is to %s." % (word, d.rstrip("."))
                else:
                    q = rng.choice(["What does \"%s\" mean?" % word, "Define %s." % word])
                    a = "\"%s\" means %s." % (sentence(word).rstrip("."), d.rstrip("."))
                a += "".join(" For example: \"%s\"" % sentence(e) for e in exs[:2])
                if rng.random() < 0.5:
                    docs.append(chat(q, a))
                else:
                    # Plain prose: the example sentences first (real English), then the gloss.
                    text = " ".join(sentence(e) for e in exs)
                    docs.append((text + "\n" if text else "") + word + ": " + d + ".")
    return docs


FORTUNE_ASKS = ["Tell me a fortune.", "Say something wise.", "Tell me something interesting.",
                "Give me a quote.", "What do you think?", "Tell me a joke.", "Any advice?"]


def fortune_docs(rng):
    docs = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or name in FORTUNE_SKIP or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            items = f.read().split("\n%\n")
        for it in items:
            it = it.strip("\n%")
            if not (20 <= len(it) <= 600) or not printable(it):
                continue
            letters = sum(c.isalpha() or c == " " for c in it)
            if letters < 0.8 * len(it) or "<|" in it:
                continue
            # Rejoin hard-wrapped prose lines; keep the attribution line ("-- Author") apart.
            it = re.sub(r"\t", " ", it)
            if rng.random() < 0.4:
                docs.append(chat(rng.choice(FORTUNE_ASKS), it))
            else:
                docs.append(it)
    return docs


def main():
    out = sys.argv[1]
    rng = random.Random(20)
    wn, fo = wordnet_docs(rng), fortune_docs(rng)
    print("data.py: %d WordNet documents, %d fortunes (used twice)" % (len(wn), len(fo)))
    docs = wn + fo + fo
    rng.shuffle(docs)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            f.write(d + "\n" + EOT + "\n")
    print("data.py: %d documents, %d bytes" % (len(docs), os.path.getsize(os.path.join(out, "corpus.txt"))))


if __name__ == "__main__":
    main()
