#!/usr/bin/env node
// server_bench.mjs - `make bench`'s server section: `particle serve` under concurrent load.
//   1. aggregate decode tok/s with 1, 2, 4, 8 concurrent streams (distinct prompts, greedy,
//      --gen tokens each), expert bytes read per generated token (from /metrics);
//   2. time to first token of a follow-up turn on a --history-token conversation, with the
//      KV prefix reused (the previous turn was this conversation) and without (the same
//      request with cache_prompt: false, which evaluates the whole prompt).
// One JSON object per measurement on stdout (run.sh records them); a summary on stderr.
// Usage: node tools/bench/server_bench.mjs --model M [--particle build/particle]
//        [--streams "1 2 4 8"] [--gen 64] [--history 4000 (0: none)] [--ctx N (default:
//        history + 1024, at least 1024: every sequence's KV is planned at this size)]
//        [--label TEXT] [-- serve flags...]
// Talks only to 127.0.0.1; every request is time-bounded.
import process from 'node:process';

const argv = process.argv.slice(2);
const opt = { particle: 'build/particle', streams: '1 2 4 8', gen: '64', history: '4000', label: '', ctx: '' };
const serveArgs = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--') { serveArgs.push(...argv.slice(i + 1)); break; }
  const k = argv[i].replace(/^--/, '');
  if (!(k in opt) && k !== 'model') { console.error(`server_bench: unknown option ${argv[i]}`); process.exit(2); }
  opt[k] = argv[++i];
}
if (!opt.model) { console.error('server_bench: --model M is required'); process.exit(2); }
process.env.PARTICLE = opt.particle;
const { startServer, http } = await import('../../tests/server/lib.mjs');

const gen = Number(opt.gen), history = Number(opt.history);
const words = ['river', 'mountain', 'lantern', 'harvest', 'violet', 'compass', 'orchard', 'glacier',
  'meadow', 'thunder', 'copper', 'saffron'];

function metric(text, name) {
  const m = text.match(new RegExp(`^particle_${name} ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function counters(srv) {
  const t = (await http(srv, 'GET', '/metrics', undefined, {}, 30000)).text;
  return { bytes: metric(t, 'expert_bytes_read_total'), gen: metric(t, 'generated_tokens_total'),
    hits: metric(t, 'expert_cache_hits_total'), misses: metric(t, 'expert_cache_misses_total'),
    peak: metric(t, 'peak_rss_bytes') };
}

async function streams(srv, n) {
  const before = await counters(srv);
  const t0 = performance.now();
  const runs = Array.from({ length: n }, (_, i) => http(srv, 'POST', '/v1/completions', {
    prompt: `Story ${i}: the ${words[i % words.length]} and the ${words[(i * 5 + 3) % words.length]}`,
    max_tokens: gen, temperature: 0 }, {}, 1800000));
  const res = await Promise.all(runs);
  const wall = (performance.now() - t0) / 1000;
  const after = await counters(srv);
  for (const r of res) if (r.status !== 200) throw new Error(`request failed: ${r.status} ${r.text}`);
  const tokens = res.reduce((a, r) => a + r.json.usage.completion_tokens, 0);
  const decodeTps = res.map((r) => r.json.timings.predicted_per_second);
  const gtok = after.gen - before.gen;
  return { kind: 'streams', streams: n, tokens, wall_s: wall, aggregate_tps: tokens / wall,
    per_stream_decode_tps: decodeTps, ttft_ms: res.map((r) => r.json.timings.ttft_ms),
    expert_bytes_per_token: gtok ? (after.bytes - before.bytes) / gtok : 0,
    hit_rate: (after.hits - before.hits) / Math.max(1, (after.hits - before.hits) + (after.misses - before.misses)),
    peak_rss_bytes: after.peak };
}

async function followUp(srv) {
  // a conversation of about `history` tokens
  let text = '', i = 0;
  for (;;) {
    text += `${words[i % words.length]} ${words[(i * 7) % words.length]} ${i}. `;
    i++;
    if (i % 10 === 0) {
      const n = (await http(srv, 'POST', '/tokenize', { content: text })).json.tokens.length;
      if (n >= history) break;
    }
  }
  const conv = [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: text }];
  const first = await http(srv, 'POST', '/v1/chat/completions', { messages: conv, max_tokens: 8, temperature: 0 }, {}, 1800000);
  const next = [...conv, { role: 'assistant', content: first.json.choices[0].message.content },
    { role: 'user', content: 'Summarise that in one line.' }];
  const reuse = await http(srv, 'POST', '/v1/chat/completions', { messages: next, max_tokens: 1, temperature: 0 }, {}, 1800000);
  // the same follow-up with nothing reused (llama.cpp's cache_prompt: false)
  const cold = await http(srv, 'POST', '/v1/chat/completions', { messages: next, max_tokens: 1, temperature: 0,
    cache_prompt: false }, {}, 1800000);
  const out = (r, how) => ({ kind: 'followup', how, prompt_tokens: r.json.usage.prompt_tokens,
    cached_tokens: r.json.usage.prompt_tokens_details.cached_tokens, ttft_ms: r.json.timings.ttft_ms });
  return [out(reuse, 'prefix-reuse'), out(cold, 'no-reuse')];
}

const ctx = opt.ctx ? Number(opt.ctx) : Math.max(1024, history + 1024);
const srv = await startServer(['-c', String(ctx), '--max-queue', '64', ...serveArgs],
  { model: opt.model, timeoutMs: 600000 });
try {
  const label = { label: opt.label, serve_args: serveArgs.join(' ') };
  for (const n of opt.streams.split(/\s+/).filter(Boolean).map(Number)) {
    const r = { ...label, ...(await streams(srv, n)) };
    console.log(JSON.stringify(r));
    console.error(`server_bench ${opt.label}: ${n} stream(s): ${r.aggregate_tps.toFixed(2)} tok/s aggregate, ` +
      `${(r.expert_bytes_per_token / 1048576).toFixed(2)} MiB expert reads per token, hit rate ${(100 * r.hit_rate).toFixed(1)}%`);
  }
  if (history > 0) {
    for (const r of await followUp(srv)) {
      console.log(JSON.stringify({ ...label, ...r }));
      console.error(`server_bench ${opt.label}: follow-up of ${r.prompt_tokens} tokens, ${r.how}: TTFT ${r.ttft_ms.toFixed(0)} ms (cached ${r.cached_tokens})`);
    }
  }
} finally {
  const r = await srv.stop();
  if (r.code !== 0) { console.error(`server_bench: server exit ${JSON.stringify(r)}: ${srv.stderr().slice(-2000)}`); process.exitCode = 1; }
}
