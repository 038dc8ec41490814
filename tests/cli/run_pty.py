#!/usr/bin/env python3
"""run_pty.py - drives an interactive `particle run` through a pseudo-terminal.

usage: run_pty.py PARTICLE MODEL TMPDIR [extra run flags...]

Session: two chat turns, /new, a turn interrupted with Ctrl-C mid-reply, a further turn,
/stats, /quit.  After every turn the --stats-json file (written per reply) is kept.  Then
checks: the cancelled turn says so and stopped with reason "cancelled"; turn 2 reused the KV
rows of turn 1's conversation; the last turn reused rows and its ids equal those of a fresh
one-shot `particle run --messages` of the same conversation (the cancelled turn is not part
of it); turn 2's ids equal a fresh run of [user1, assistant1, user2]; exit status 0.
Then a --raw session: the same line twice equals a one-shot --prompt run both times, the
second reusing the prompt's rows.
Then a chat at a 256-position context: old turns are dropped with a notice, and the turn
after a drop equals a fresh run of the remaining conversation.
Prints one line per check ("ok ..." / "FAIL ..."); exit 1 if any failed."""
import json
import os
import pty
import select
import subprocess
import sys
import time

P, MODEL, TMP = sys.argv[1:4]
EXTRA = sys.argv[4:]
# --repack on both sides: interactive chat repacks a model in memory by default and a
# one-shot run does not, and a repacked matrix gives other bits in the last places
FLAGS = ["--temperature", "0", "-n", "512", "-c", "4096", "--repack"] + EXTRA
STATS = os.path.join(TMP, "turn.json")
failed = 0


def check(cond, what):
    global failed
    print(("ok " if cond else "FAIL ") + what)
    if not cond:
        failed += 1


class Term:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "dumb"
            os.execv(argv[0], argv)
        self.buf = b""

    def read_until(self, pat, timeout=60.0):
        end = time.time() + timeout
        while pat not in self.buf:
            left = end - time.time()
            if left <= 0:
                raise SystemExit("FAIL timeout waiting for %r; got %r" % (pat, self.buf[-400:]))
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    raise SystemExit("FAIL session ended waiting for %r; got %r" % (pat, self.buf[-400:]))
                self.buf += data
        i = self.buf.index(pat) + len(pat)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def send(self, s):
        os.write(self.fd, s.encode())


def lcp(a, b):
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def stats():
    with open(STATS) as f:
        return json.load(f)


def turn(t, text):
    t.send(text + "\r")
    t.read_until(b"stop: ")     # the footer (replies may contain "> " themselves)
    t.read_until(b"]\r\n> ")
    return stats()


def fresh(msgs):
    path = os.path.join(TMP, "conv.json")
    with open(path, "w") as f:
        json.dump(msgs, f)
    out = os.path.join(TMP, "fresh.json")
    subprocess.run([P, "run", "-m", MODEL, "--messages", path, "--quiet", "--stats-json", out]
                   + FLAGS, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


u1, u2, u3, u4 = "Hello there.", "Tell me more.", "Write a long story.", "Say something."
f3 = fresh([{"role": "user", "content": u3}])
head3 = f3["text"].encode()[:12].replace(b"\n", b"\r\n")
if f3["generated_tokens"] < 200 or not head3:
    raise SystemExit("FAIL the reply to %r is too short to interrupt (%d tokens)" % (u3, f3["generated_tokens"]))
t = Term([P, "run", "-m", MODEL, "--stats-json", STATS] + FLAGS)
t.read_until(b"> ")
s1 = turn(t, u1)
s2 = turn(t, u2)
# The engine held turn 1's prompt and reply (all but the last sampled id, never evaluated).
held = s1["prompt_ids"] + s1["ids"][:-1]
want = lcp(s2["prompt_ids"], held)
want = min(want, len(s2["prompt_ids"]) - 1)
check(s2["reused_tokens"] == want and want > len(s1["prompt_ids"]) // 2,
      "turn 2 reused %d KV rows (the common prefix with turn 1's %d rows is %d)"
      % (s2["reused_tokens"], len(held), want))
t.send("/new\r")
t.read_until(b"kept warm]\r\n> ")
t.send(u3 + "\r")
t.read_until(u3.encode())
# Ctrl-C once the reply is visibly streaming: its first bytes are known from a fresh run
# (greedy); the echo or a line redraw could otherwise be mistaken for it.
t.read_until(head3)
t.send("\x03")
cancel_out = t.read_until(b"reply dropped]", 30)
t.read_until(b"> ")
s3 = stats()
check(b"cancelled" in cancel_out and s3["stop_reason"] == "cancelled",
      "Ctrl-C mid-reply cancelled it (stop %s after %d tokens)" % (s3["stop_reason"], s3["generated_tokens"]))
s4 = turn(t, u4)
check(s4["reused_tokens"] > 0, "turn after the cancel reused %d KV rows" % s4["reused_tokens"])
t.send("/stats\r")
st = t.read_until(b"]\r\n> ")
check(b"turns" in st and b"reused" in st, "/stats prints the totals")
t.send("/quit\r")
_, status = os.waitpid(t.pid, 0)
check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "/quit exits 0 (status %d)" % status)

f2 = fresh([{"role": "user", "content": u1}, {"role": "assistant", "content": s1["text"]},
            {"role": "user", "content": u2}])
check(f2["ids"] == s2["ids"] and f2["prompt_ids"] == s2["prompt_ids"],
      "turn 2 equals a fresh run of its conversation (%d ids)" % len(s2["ids"]))
f4 = fresh([{"role": "user", "content": u4}])
check(f4["ids"] == s4["ids"] and f4["prompt_ids"] == s4["prompt_ids"],
      "the turn after /new and Ctrl-C equals a fresh run (%d ids)" % len(s4["ids"]))

# --raw: each line is an independent completion on the warm cache, equal to --prompt LINE
t = Term([P, "run", "-m", MODEL, "--raw", "--stats-json", STATS] + FLAGS)
t.read_until(b"> ")
r1 = turn(t, "The quick brown fox")
r2 = turn(t, "The quick brown fox")
t.send("/quit\r")
os.waitpid(t.pid, 0)
out = os.path.join(TMP, "rawfresh.json")
subprocess.run([P, "run", "-m", MODEL, "--prompt", "The quick brown fox", "--quiet",
                "--stats-json", out] + FLAGS, check=True, stdout=subprocess.DEVNULL)
with open(out) as f:
    rf = json.load(f)
check(r1["ids"] == rf["ids"] and r2["ids"] == rf["ids"] and
      r2["reused_tokens"] == len(rf["prompt_ids"]) - 1,
      "--raw lines equal --prompt runs; the repeated line reused %d rows" % r2["reused_tokens"])
# A small context: once the conversation leaves no room for a reply (a quarter of the
# context), the oldest turns go, with a notice naming how many messages.
SMALL = ["-c", "256", "-n", "40"]
t = Term([P, "run", "-m", MODEL, "--stats-json", STATS] + FLAGS + SMALL)
t.read_until(b"> ")
conv, notices, fits, ok_fresh = [], 0, True, None
for i in range(8):
    line = "Turn %d: tell me about the number %d." % (i, i * 7)
    t.send(line + "\r")
    out = t.read_until(b"stop: ")
    t.read_until(b"]\r\n> ")
    s = stats()
    conv.append({"role": "user", "content": line})
    k = out.find(b"[context full: dropped the ")
    if k >= 0:
        notices += 1
        n_drop = int(out[k + 27:].split(b" ")[0])
        conv = conv[n_drop:]
        if ok_fresh is None:
            path = os.path.join(TMP, "conv.json")
            with open(path, "w") as f:
                json.dump(conv, f)
            fo = os.path.join(TMP, "fresh.json")
            subprocess.run([P, "run", "-m", MODEL, "--messages", path, "--quiet", "--no-lock", "--stats-json",
                            fo] + FLAGS + SMALL, check=True, stdout=subprocess.DEVNULL)
            with open(fo) as f:
                fr = json.load(f)
            ok_fresh = fr["prompt_ids"] == s["prompt_ids"] and fr["ids"] == s["ids"]
    fits = fits and len(s["prompt_ids"]) + 64 <= 256
    conv.append({"role": "assistant", "content": s["text"]})
t.send("/quit\r")
_, status = os.waitpid(t.pid, 0)
check(notices > 0 and fits and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
      "a full context drops old turns (%d notices; every prompt left 64 positions)" % notices)
check(ok_fresh is True, "the turn after a drop equals a fresh run of the kept conversation")
sys.exit(1 if failed else 0)
