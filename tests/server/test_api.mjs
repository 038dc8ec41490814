// test_api.mjs - `particle serve` driven by the official openai npm client: models, chat
// and completions (JSON and SSE), greedy equality with `particle run`, seeds, stop strings,
// usage with cached tokens on a follow-up turn, logprobs, abort mid-stream, the small
// llama-server endpoints and the template variables.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, client, http, runParticle, writeTmp, parseSSE } from './lib.mjs';

let srv, ai;
before(async () => {
  srv = await startServer([]);
  ai = client(srv);
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `server exit: ${JSON.stringify(r)} ${srv.stderr()}`);
});

const hi = [{ role: 'user', content: 'Hello there, who are you?' }];

test('models.list names the loaded model with its context and architecture', async () => {
  const page = await ai.models.list();
  assert.equal(page.data.length, 1);
  const m = page.data[0];
  assert.equal(m.id, 'tiny');
  assert.equal(m.object, 'model');
  assert.equal(m.meta.architecture, 'qwen3moe');
  assert.ok(m.meta.n_ctx >= 256);
});

test('/health is ok', async () => {
  const r = await http(srv, 'GET', '/health');
  assert.equal(r.status, 200);
  assert.deepEqual(r.json, { status: 'ok' });
});

test('greedy chat equals particle run --messages, token for token', async () => {
  const r = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 24 });
  const file = writeTmp('hi.json', JSON.stringify(hi));
  const want = runParticle(['--messages', file, '--temperature', '0', '-n', '24']);
  assert.equal(r.choices[0].message.content, want);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-[0-9A-Za-z]{24}$/);
  assert.equal(r.usage.completion_tokens, 24);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('greedy completion equals particle run --prompt', async () => {
  const prompt = 'The quick brown fox';
  const r = await ai.completions.create({ model: 'tiny', prompt, temperature: 0, max_tokens: 20 });
  const want = runParticle(['--prompt', prompt, '--temperature', '0', '-n', '20']);
  assert.equal(r.choices[0].text, want);
  assert.equal(r.object, 'text_completion');
});

test('streamed chat deltas add up to the non-streamed answer; usage chunk last', async () => {
  const msgs = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Count to five.' }];
  const full = await ai.chat.completions.create({ model: 'tiny', messages: msgs, temperature: 0, max_tokens: 30 });
  const stream = await ai.chat.completions.create({ model: 'tiny', messages: msgs, temperature: 0,
    max_tokens: 30, stream: true, stream_options: { include_usage: true } });
  let text = '', chunks = 0, finish = null, usage = null, role = null, ids = new Set();
  for await (const c of stream) {
    ids.add(c.id);
    assert.equal(c.object, 'chat.completion.chunk');
    if (c.usage) { usage = c.usage; assert.equal(c.choices.length, 0); continue; }
    const ch = c.choices[0];
    if (ch.delta.role) role = ch.delta.role;
    text += ch.delta.content ?? '';
    if (ch.finish_reason) finish = ch.finish_reason;
    chunks++;
  }
  assert.equal(text, full.choices[0].message.content);
  assert.equal(role, 'assistant');
  assert.equal(finish, 'length');
  assert.equal(ids.size, 1, 'every chunk has the same id');
  assert.ok(chunks >= 2);
  assert.equal(usage.completion_tokens, 30);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
});

test('streamed completion equals the non-streamed one', async () => {
  const prompt = 'Once upon a time';
  const full = await ai.completions.create({ model: 'tiny', prompt, temperature: 0, max_tokens: 16 });
  const stream = await ai.completions.create({ model: 'tiny', prompt, temperature: 0, max_tokens: 16, stream: true });
  let text = '', finish = null;
  for await (const c of stream) {
    if (!c.choices.length) continue;
    text += c.choices[0].text;
    finish = c.choices[0].finish_reason ?? finish;
  }
  assert.equal(text, full.choices[0].text);
  assert.equal(finish, 'length');
});

test('a follow-up turn reuses the KV prefix: usage.prompt_tokens_details.cached_tokens', async () => {
  const turn1 = [{ role: 'user', content: 'Tell me a story about a dragon and a knight.' }];
  const r1 = await ai.chat.completions.create({ model: 'tiny', messages: turn1, temperature: 0, max_tokens: 12 });
  const turn2 = [...turn1, { role: 'assistant', content: r1.choices[0].message.content },
    { role: 'user', content: 'And then?' }];
  const r2 = await ai.chat.completions.create({ model: 'tiny', messages: turn2, temperature: 0, max_tokens: 8 });
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= r1.usage.prompt_tokens - 1, `cached ${cached} of turn 1's ${r1.usage.prompt_tokens}`);
  assert.ok(cached < r2.usage.prompt_tokens);
  // and the answer is the same as without the cache (a fresh server-independent check: run)
  const file = writeTmp('turn2.json', JSON.stringify(turn2));
  assert.equal(r2.choices[0].message.content, runParticle(['--messages', file, '--temperature', '0', '-n', '8']));
});

test('cache_prompt false evaluates the whole prompt and gives the same answer', async () => {
  const a = await http(srv, 'POST', '/v1/chat/completions', { messages: hi, temperature: 0, max_tokens: 8 });
  const b = await http(srv, 'POST', '/v1/chat/completions', { messages: hi, temperature: 0, max_tokens: 8, cache_prompt: false });
  assert.equal(b.json.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(b.json.choices[0].message.content, a.json.choices[0].message.content);
  const bad = await http(srv, 'POST', '/v1/chat/completions', { messages: hi, cache_prompt: 'no' });
  assert.equal(bad.status, 400);
});

test('stop strings cut the answer before the stop and report finish_reason stop', async () => {
  const base = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 40 });
  const text = base.choices[0].message.content;
  // a stop string from the middle of the greedy answer
  const at = Math.floor(text.length / 2);
  const stop = text.slice(at, at + 3);
  assert.ok(stop.length === 3);
  const r = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 40, stop: [stop, 'zzzzzz'] });
  assert.equal(r.choices[0].message.content, text.slice(0, text.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
  const r2 = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 40, stop });
  assert.equal(r2.choices[0].message.content, r.choices[0].message.content);
});

test('same seed, same text, equal to particle run with the same flags', async () => {
  const opts = { model: 'tiny', messages: hi, temperature: 0.9, top_p: 0.9, top_k: 40, seed: 1234, max_tokens: 20 };
  const a = await ai.chat.completions.create(opts);
  const b = await ai.chat.completions.create(opts);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const file = writeTmp('seed.json', JSON.stringify(hi));
  const want = runParticle(['--messages', file, '--temperature', '0.9', '--top-p', '0.9', '--top-k', '40',
    '--seed', '1234', '-n', '20']);
  assert.equal(a.choices[0].message.content, want);
  const c = await ai.chat.completions.create({ ...opts, seed: 99 });
  assert.notEqual(c.choices[0].message.content, a.choices[0].message.content);
});

test('logprobs and top_logprobs: one entry per token, sorted alternatives', async () => {
  const r = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 6,
    logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.logprob <= 0);
    for (let i = 1; i < 3; i++) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    assert.equal(t.top_logprobs[0].logprob, t.logprob, 'greedy picks the most likely token');
    assert.ok(Array.isArray(t.bytes));
  }
  // the tokens' bytes decode (invalid sequences as U+FFFD) to the reply text
  assert.equal(new TextDecoder().decode(Buffer.concat(lp.map((t) => Buffer.from(t.bytes)))),
    r.choices[0].message.content);
});

test('abort mid-stream: the server keeps serving and the next answer is right', async () => {
  const ctl = new AbortController();
  const stream = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0,
    max_tokens: 3000, stream: true }, { signal: ctl.signal });
  let n = 0;
  try {
    for await (const c of stream) { if (++n === 3) ctl.abort(); }
  } catch { /* the client reports the abort */ }
  assert.ok(n >= 3);
  const r = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 24 });
  const file = writeTmp('hi2.json', JSON.stringify(hi));
  assert.equal(r.choices[0].message.content, runParticle(['--messages', file, '--temperature', '0', '-n', '24']));
  let m;
  for (let i = 0; i < 50; i++) { // the server notices within a token; give it up to 5 s
    m = await http(srv, 'GET', '/metrics');
    if (/particle_requests_cancelled_total [1-9]/.test(m.text)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(m.text, /particle_requests_cancelled_total [1-9]/);
  assert.match(m.text, /particle_generated_tokens_total \d+/);
});

test('n > 1 and other bad requests are 400 through the client', async () => {
  await assert.rejects(ai.chat.completions.create({ model: 'tiny', messages: hi, n: 2 }),
    (e) => e.status === 400 && /n=1/.test(e.message));
  await assert.rejects(ai.chat.completions.create({ model: 'tiny', messages: [{ role: 'wizard', content: 'x' }] }),
    (e) => e.status === 400 && /unknown role/.test(e.message));
  await assert.rejects(ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: -1 }),
    (e) => e.status === 400 && e.error?.param === 'temperature');
});

test('a prompt longer than the context is 400 and says by how much', async () => {
  const long = 'word '.repeat(6000);
  const r = await http(srv, 'POST', '/v1/completions', { prompt: long, max_tokens: 1 });
  assert.equal(r.status, 400);
  assert.match(r.json.error.message, /\d+ more than the context of \d+ tokens/);
  assert.equal(r.json.error.code, 'context_length_exceeded');
});

test('/tokenize and /detokenize round-trip; with_pieces', async () => {
  const t = await http(srv, 'POST', '/tokenize', { content: 'Hello world' });
  assert.equal(t.status, 200);
  assert.ok(t.json.tokens.length >= 2);
  const d = await http(srv, 'POST', '/detokenize', { tokens: t.json.tokens });
  assert.equal(d.json.content, 'Hello world');
  const p = await http(srv, 'POST', '/tokenize', { content: 'Hello world', with_pieces: true });
  assert.equal(p.json.tokens.map((x) => x.piece).join(''), 'Hello world');
});

test('model text with NUL and control bytes survives as JSON escapes (no truncation)', async () => {
  const ids = Array.from({ length: 64 }, (_, i) => i); // byte-level vocabulary: bytes 0..63
  const d = await http(srv, 'POST', '/detokenize', { tokens: ids });
  assert.equal(d.status, 200);
  assert.ok(d.text.includes('\\u0000'));
  assert.equal(d.json.content.length, 64);
  assert.equal(d.json.content.charCodeAt(0), 0);
  const back = await http(srv, 'POST', '/tokenize', { content: 'a\u0001b' });
  assert.equal(back.status, 200);
});

test('/apply-template: add_generation_prompt false is passed explicitly; chat_template_kwargs reach the template', async () => {
  const on = await http(srv, 'POST', '/apply-template', { messages: hi });
  assert.match(on.json.prompt, /<\|im_start\|>assistant\n$/);
  const off = await http(srv, 'POST', '/apply-template', { messages: hi, add_generation_prompt: false });
  assert.doesNotMatch(off.json.prompt, /assistant/);
  const nothink = await http(srv, 'POST', '/apply-template', { messages: hi, chat_template_kwargs: { enable_thinking: false } });
  assert.match(nothink.json.prompt, /<think>\n\n<\/think>\n\n$/);
  const bad = await http(srv, 'POST', '/apply-template', { messages: hi, chat_template_kwargs: { enable_thinking: 'no' } });
  assert.equal(bad.status, 400);
});

test('chat_template_kwargs change the generation prompt of a chat request', async () => {
  const a = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 2 });
  const b = await ai.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0, max_tokens: 2,
    chat_template_kwargs: { enable_thinking: false } });
  assert.ok(b.usage.prompt_tokens > a.usage.prompt_tokens);
});

test('content parts: text parts are joined; images are refused with 400', async () => {
  const parts = [{ role: 'user', content: [{ type: 'text', text: 'Hello there,' }, { type: 'text', text: 'who are you?' }] }];
  const a = await http(srv, 'POST', '/apply-template', { messages: parts });
  assert.match(a.json.prompt, /Hello there,\nwho are you\?/);
  await assert.rejects(ai.chat.completions.create({ model: 'tiny', messages: [{ role: 'user',
    content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] }), (e) => e.status === 400);
});

test('/metrics is Prometheus text with tokens, queue and per-layer expert counters', async () => {
  const r = await http(srv, 'GET', '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/plain; version=0.0.4/);
  for (const name of ['requests_total', 'prompt_tokens_total', 'generated_tokens_total', 'decode_tokens_per_second',
    'queue_depth', 'slots_busy', 'peak_rss_bytes', 'expert_cache_hits_total', 'http_responses_total'])
    assert.match(r.text, new RegExp(`^# TYPE particle_${name} `, 'm'));
  assert.match(r.text, /^particle_expert_layer_hits_total\{layer="0"\} \d+$/m);
  assert.match(r.text, /^particle_generated_tokens_total [1-9]/m);
});

test('raw SSE framing: data lines, [DONE] last, no usage without include_usage', async () => {
  const r = await http(srv, 'POST', '/v1/chat/completions', { messages: hi, max_tokens: 3, temperature: 0, stream: true });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const ev = parseSSE(r.text);
  assert.equal(ev.at(-1), '[DONE]');
  assert.ok(ev.slice(0, -1).every((e) => !e.usage));
  assert.equal(ev.at(-2).choices[0].finish_reason, 'length');
});
