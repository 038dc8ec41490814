#!/usr/bin/env python3
"""summarize.py RESULTS.jsonl FACTS.json OUT.json - medians of tools/bench/run.sh records
per (section, model, engine), particle/llama.cpp ratios, and markdown tables on stdout."""
import json
import os
import re
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def group(recs):
    g = {}
    for r in recs:
        key = (r["section"], os.path.basename(r["model"]), r["engine"], r.get("skew"))
        g.setdefault(key, []).append(r)
    return g


def field(rs, name):
    return [r["result"][name] for r in rs if r["rc"] == 0 and r.get("result")
            and name in r["result"]]


def summarize(recs):
    out = []
    for (sec, model, eng, skew), rs in sorted(group(recs).items(), key=lambda kv: str(kv[0])):
        s = {"section": sec, "model": model, "engine": eng, "runs": len(rs),
             "ok_runs": sum(1 for r in rs if r["rc"] == 0),
             "exit_codes": [r["rc"] for r in rs], "load": [r.get("load") for r in rs]}
        if skew is not None:
            s["skew"] = skew
        for k in ("prefill_tps", "decode_tps", "ttft_s", "peak_rss_bytes", "hit_rate",
                  "bytes_read_per_token", "io_floor_s_per_token", "time_over_floor",
                  "memory_budget_bytes", "disk_bw_bytes_per_s", "decode_io_busy_s_per_token",
                  "decode_read_wait_s_per_token", "decode_compute_s_per_token",
                  "decode_read_bw_bytes_per_s", "decode_head_s_per_token",
                  "decode_bytes_per_token", "decode_fraction_of_membw", "membw_bytes_per_s"):
            v = med(field(rs, k))
            if v is not None:
                s[k] = v
        # Time per token over the time the disk was busy reading for it: the I/O floor at
        # the bandwidth the store actually got (the probe's figure swings with the host).
        busy = [1 / r["result"]["decode_tps"] / r["result"]["decode_io_busy_s_per_token"]
                for r in rs if r["rc"] == 0 and r.get("result")
                and r["result"].get("decode_tps") and r["result"].get("decode_io_busy_s_per_token")]
        if busy:
            s["time_over_busy"] = med(busy)
        for k in ("cap", "cg_max_usage", "cg_oom_kills"):
            v = [r[k] for r in rs if k in r]
            if v:
                s[k] = v if len(v) > 1 else v[0]
        out.append(s)
    by = {(s["section"], s["model"], s["engine"], s.get("skew")): s for s in out}
    for s in out:
        if not s["engine"].startswith("particle"):
            continue
        partner = "llama.cpp-1t" if s["engine"].endswith("-1t") else "llama.cpp"
        o = by.get((s["section"], s["model"], partner, s.get("skew")))
        if o:
            for k in ("prefill_tps", "decode_tps"):
                if s.get(k) and o.get(k):
                    s[k.replace("_tps", "_ratio_vs_llama")] = s[k] / o[k]
            s["baseline"] = "node-llama-cpp (%s)" % partner
    best_baseline(out)
    return out


def best_baseline(out):
    """llama.cpp's best configuration per model (issue 21): the highest median of the six
    llama-bench runs (repack / no-repack / repack without mmap x 1 / 2 threads), per phase; particle's
    ratios against it as *_ratio_vs_llama_best, with the configuration named; decode also
    against the best llama-bench run at the same context (*_same_ctx: its "-d512" runs)."""
    best = {}
    for s in out:
        if s["section"] != "A" or not s["engine"].startswith("llama-bench-"):
            continue
        # "-dN" runs decode after N tokens of context (run.sh LB_SAME_DEPTH): particle's own
        # decode context, kept apart from the empty-context tg128 runs
        same = re.search(r"-d[0-9]+$", s["engine"]) is not None
        for k in ("prefill_tps", "decode_tps"):
            key = k + "_same_ctx" if same else k
            b = best.setdefault((s["model"], key), (0.0, None))
            if s.get(k) and s[k] > b[0]:
                best[(s["model"], key)] = (s[k], s["engine"])
    # llama-bench's decode against the same limit: particle's byte count for the model
    # (the same file) and the round's bandwidth probe at the run's thread count
    dbpt = {s["model"]: s["decode_bytes_per_token"] for s in out
            if s["section"] == "A" and s["engine"] == "particle" and s.get("decode_bytes_per_token")}
    bw = {s["model"]: s["membw_bytes_per_s"] for s in out
          if s["section"] == "A" and s["engine"] == "particle" and s.get("membw_bytes_per_s")}
    for s in out:
        if s["engine"].startswith("llama-bench-") and s.get("decode_tps") and \
                s["model"] in dbpt and s["model"] in bw:
            s["decode_fraction_of_membw"] = s["decode_tps"] * dbpt[s["model"]] / bw[s["model"]]
    for s in out:
        if s["section"] != "A" or not s["engine"].startswith("particle"):
            continue
        for k in ("prefill_tps", "decode_tps"):
            v, eng = best.get((s["model"], k), (0.0, None))
            if s.get(k) and v > 0:
                s[k.replace("_tps", "_ratio_vs_llama_best")] = s[k] / v
                s[k.replace("_tps", "_baseline_best")] = eng
        v, eng = best.get((s["model"], "decode_tps_same_ctx"), (0.0, None))
        if s.get("decode_tps") and v > 0:
            s["decode_ratio_vs_llama_best_same_ctx"] = s["decode_tps"] / v
            s["decode_baseline_best_same_ctx"] = eng


def best_table(rows):
    """Particle against llama.cpp's best llama-bench configuration, and decode against the
    memory-bandwidth limit (bench --json's decode_fraction_of_membw)."""
    if not rows:
        return
    fmt = lambda v, f: "-" if v is None else f % v
    print("\n| model | engine | decode vs llama.cpp best (its empty context) | its config "
          "| decode vs best at the same context | its config | prefill vs best | its config "
          "| decode GB/token | fraction of membw limit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in rows:
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s["model"], s["engine"], fmt(s.get("decode_ratio_vs_llama_best"), "%.2fx"),
            s.get("decode_baseline_best") or "-",
            fmt(s.get("decode_ratio_vs_llama_best_same_ctx"), "%.2fx"),
            s.get("decode_baseline_best_same_ctx") or "-",
            fmt(s.get("prefill_ratio_vs_llama_best"), "%.2fx"),
            s.get("prefill_baseline_best") or "-",
            fmt(s.get("decode_bytes_per_token") and s["decode_bytes_per_token"] / 1e9, "%.3f"),
            fmt(s.get("decode_fraction_of_membw"), "%.2f")))


def table(rows):
    fmt = lambda v, f: "-" if v is None else f % v
    print("| section | model | engine | ok/runs | prefill tok/s | decode tok/s | ratio pre | ratio dec | "
          "hit | MiB/token | floor ms/tok | time/floor | store GB/s | time/busy | compute ms/tok | "
          "head ms/tok | peak RSS MiB | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in rows:
        print("| %s | %s%s | %s | %d/%d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s["section"], s["model"], " skew %s" % s["skew"] if "skew" in s else "",
            s["engine"], s["ok_runs"], s["runs"], fmt(s.get("prefill_tps"), "%.1f"),
            fmt(s.get("decode_tps"), "%.2f"), fmt(s.get("prefill_ratio_vs_llama"), "%.2fx"),
            fmt(s.get("decode_ratio_vs_llama"), "%.2fx"),
            fmt(s.get("hit_rate"), "%.3f"),
            fmt(s.get("bytes_read_per_token") and s["bytes_read_per_token"] / 2**20, "%.1f"),
            fmt(s.get("io_floor_s_per_token") and s["io_floor_s_per_token"] * 1e3, "%.1f"),
            fmt(s.get("time_over_floor"), "%.2f"),
            fmt(s.get("decode_read_bw_bytes_per_s") and s["decode_read_bw_bytes_per_s"] / 1e9, "%.2f"),
            fmt(s.get("time_over_busy"), "%.2f"),
            fmt(s.get("decode_compute_s_per_token") and s["decode_compute_s_per_token"] * 1e3, "%.1f"),
            fmt(s.get("decode_head_s_per_token") and s["decode_head_s_per_token"] * 1e3, "%.1f"),
            fmt(s.get("peak_rss_bytes") and s["peak_rss_bytes"] / 2**20, "%.0f"),
            ",".join("%.1f" % x for x in s["load"] if x is not None)))


def routing_table(recs):
    """One row per `particle routing --json` record: locality of the text and of the
    generated tokens (means over layers)."""
    rs = [r for r in recs if r["engine"] == "routing" and r.get("result")]
    if not rs:
        return
    print()
    print("| section | model | skew | distinct | overlap | within8 | LRU 10/25/40 % | "
          "gen overlap | gen within8 | gen LRU 10/25/40 % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    lru = lambda o: "/".join("%.2f" % x["hit"] for x in o.get("lru", []))
    for r in rs:
        o, g = r["result"], r["result"].get("generated", {})
        print("| %s | %s | %s | %.1f/%d | %.3f | %.3f | %s | %s | %s | %s |" % (
            r["section"], os.path.basename(r["model"]), r.get("skew"), o["mean_distinct"],
            o["n_expert"], o["mean_overlap"], o["mean_within8"], lru(o),
            "%.3f" % g["mean_overlap"] if g else "-", "%.3f" % g["mean_within8"] if g else "-",
            lru(g) if g else "-"))


def server_table(recs):
    """Section S (`particle serve`): aggregate tok/s per stream count, expert MiB read per
    generated token, and the follow-up TTFT with and without prefix reuse (medians)."""
    rs = [r for r in recs if r["section"] == "S" and r.get("result") and r["rc"] == 0]
    if not rs:
        return
    g = {}
    for r in rs:
        o = r["result"]
        key = (o.get("label"), o["kind"], o.get("streams") or o.get("how"))
        g.setdefault(key, []).append(o)
    print()
    print("| server | measure | value | expert MiB/token | TTFT ms |")
    print("|---|---|---|---|---|")
    for (label, kind, what), os_ in sorted(g.items(), key=lambda kv: str(kv[0])):
        if kind == "streams":
            print("| %s | %s streams | %.2f tok/s | %.2f | %.0f |" % (
                label, what, med([o["aggregate_tps"] for o in os_]),
                med([o["expert_bytes_per_token"] for o in os_]) / 1048576,
                med([med(o["ttft_ms"]) for o in os_])))
        else:
            print("| %s | follow-up %s (%d tokens, %d cached) | | | %.0f |" % (
                label, what, os_[0]["prompt_tokens"], os_[0]["cached_tokens"],
                med([o["ttft_ms"] for o in os_])))


def big_table(recs, rows):
    """Section D (issue 17's full shapes, larger than RAM): particle under the cap against
    llama.cpp under the same cap and with all the RAM (a run cut by the timeout: rc 124);
    skipped models with the reason."""
    d = [s for s in rows if s["section"] == "D" and s["engine"] != "skip"]
    skips = [r for r in recs if r["section"] == "D" and r["engine"] == "skip"]
    if not d and not skips:
        return
    fmt = lambda v, f: "-" if v is None else f % v
    def outcome(s):
        if s is None:
            return "-"
        if s.get("decode_tps"):
            return "%.2f tok/s (%d/%d runs)" % (s["decode_tps"], s["ok_runs"], s["runs"])
        cut = sum(1 for c in s["exit_codes"] if c == 124)
        return "no result: %d of %d runs cut by the timeout, exit codes %s" % (
            cut, s["runs"], s["exit_codes"])
    print("\n| model (larger than RAM) | particle decode under cap | I/O floor ms/tok | time/floor "
          "(goal <= 1.25) | llama.cpp under cap | llama.cpp all RAM |")
    print("|---|---|---|---|---|---|")
    by = {(s["model"], s["engine"]): s for s in d}
    for model in sorted({s["model"] for s in d}):
        p = by.get((model, "particle"))
        print("| %s | %s | %s | %s | %s | %s |" % (
            model, outcome(p),
            fmt(p and p.get("io_floor_s_per_token") and p["io_floor_s_per_token"] * 1e3 or None,
                "%.1f"),  # 0: nothing read (every expert fit the budget)
            fmt(p and p.get("time_over_floor") or None, "%.2fx"),
            outcome(by.get((model, "llama.cpp"))), outcome(by.get((model, "llama.cpp-all-ram")))))
    for r in skips:
        print("| %s | skipped: %s | | | | |" % (r["model"], (r.get("result") or {}).get("reason")))


def main():
    recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    facts = json.load(open(sys.argv[2]))
    rows = summarize(recs)
    json.dump({"facts": facts, "summary": rows, "runs": recs}, open(sys.argv[3], "w"), indent=1)
    table([s for s in rows if s["engine"] not in ("routing", "skip") and s["section"] != "S"])
    best_table([s for s in rows if s.get("decode_ratio_vs_llama_best") or s.get("decode_fraction_of_membw")])
    routing_table(recs)
    server_table(recs)
    big_table(recs, rows)


if __name__ == "__main__":
    main()
