// test_parallel.mjs - --parallel 4: concurrent requests are batched through one forward pass
// and each answer equals the same request served alone; --cache-prompts keeps conversations'
// KV prefixes across other requests (cached_tokens on the follow-up).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, http } from './lib.mjs';

let srv;
before(async () => { srv = await startServer(['--parallel', '4', '--cache-prompts', '2']); });
after(async () => { assert.equal((await srv.stop()).code, 0, srv.stderr()); });

const prompts = ['The river', 'A lantern in the dark', 'Seven stars', 'Once, at the harbour', 'Copper and salt', 'Meadow'];

test('greedy answers of 6 concurrent requests (4 slots) equal each alone', async () => {
  const alone = [];
  for (const p of prompts)
    alone.push((await http(srv, 'POST', '/v1/completions', { prompt: p, max_tokens: 24, temperature: 0 })).json.choices[0].text);
  const together = await Promise.all(prompts.map((p, i) => http(srv, 'POST', '/v1/completions',
    { prompt: p, max_tokens: 24, temperature: 0, stream: i % 2 === 1 })));
  for (let i = 0; i < prompts.length; i++) {
    assert.equal(together[i].status, 200);
    const text = i % 2 === 1
      ? together[i].text.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)).choices[0]?.text ?? '').join('')
      : together[i].json.choices[0].text;
    assert.equal(text, alone[i], `prompt ${i}`);
  }
  const m = await http(srv, 'GET', '/metrics');
  assert.match(m.text, /^particle_slots 4$/m);
  assert.match(m.text, /^particle_engine_sequences 6$/m);
  // batched: fewer decode passes than decoded tokens
  const num = (n) => Number(m.text.match(new RegExp(`^particle_${n} (\\d+)`, 'm'))[1]);
  assert.ok(num('decode_steps_total') < num('decode_tokens_total'), 'decode steps were batched');
});

test('seeded sampling is the same batched or alone', async () => {
  const body = (seed) => ({ messages: [{ role: 'user', content: 'Say something' }], max_tokens: 16, temperature: 0.9, seed });
  const alone = (await http(srv, 'POST', '/v1/chat/completions', body(5))).json.choices[0].message.content;
  const rs = await Promise.all([5, 6, 7, 5].map((s) => http(srv, 'POST', '/v1/chat/completions', body(s))));
  assert.equal(rs[0].json.choices[0].message.content, alone);
  assert.equal(rs[3].json.choices[0].message.content, alone);
});

test('--cache-prompts: a conversation keeps its prefix while others run', async () => {
  const conv = [{ role: 'user', content: 'Tell me a long story about a dragon who collects lanterns.' }];
  const r1 = await http(srv, 'POST', '/v1/chat/completions', { messages: conv, max_tokens: 8, temperature: 0 });
  // other conversations in between (more than --parallel of them, one after the other)
  for (const p of prompts.slice(0, 4))
    await http(srv, 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: p }], max_tokens: 4, temperature: 0 });
  const next = [...conv, { role: 'assistant', content: r1.json.choices[0].message.content }, { role: 'user', content: 'More.' }];
  const r2 = await http(srv, 'POST', '/v1/chat/completions', { messages: next, max_tokens: 4, temperature: 0 });
  assert.ok(r2.json.usage.prompt_tokens_details.cached_tokens >= r1.json.usage.prompt_tokens - 1,
    JSON.stringify(r2.json.usage));
});
