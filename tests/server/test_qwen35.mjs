// test_qwen35.mjs - the server's prefix reuse on a model with recurrent state (qwen35moe,
// issue 18): every chat prompt gets checkpoints at its message boundaries as it is
// prefilled, so a conversation edited in its middle restores the boundary checkpoint
// before the edit and evaluates from there (reported as cache_n reused, cache_replayed_n
// of them evaluated again), with logprobs identical to a fresh evaluation of the edited
// conversation (cache_prompt false) - same pieces, F32 KV.  Also Qwen3.5's XML tool calls
// (the embedded template makes the server parse the qwen3-xml form): a forced call through
// the openai client comes back as tool_calls with arguments typed by the schema, and its
// streamed deltas assemble to the same call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startServer, http, client, parseSSE, PARTICLE, TMP } from './lib.mjs';

const MODEL = path.join(TMP, 'q35-tiny.gguf');
let srv;
before(async () => {
  const mk = spawnSync(PARTICLE, ['mkmodel', '--arch', 'qwen35moe', '--preset', 'tiny', '--quant',
    'q8_0', '-o', MODEL], { encoding: 'utf8', timeout: 120000 });
  assert.equal(mk.status, 0, `mkmodel: ${mk.stderr}`);
  srv = await startServer(['--kv-type', 'f32', '--checkpoints', '8', '-np', '1'], { model: MODEL });
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `server exit: ${JSON.stringify(r)} ${srv.stderr()}`);
});

const long = (w, n) => Array.from({ length: n }, (_, i) => `${w}${i}`).join(' ');
const conv = (edit) => [
  { role: 'system', content: `You are terse. ${long('rule', 12)}` },
  { role: 'user', content: `First question: ${long('apple', 20)}` },
  { role: 'assistant', content: `First answer: ${long('berry', 20)}` },
  { role: 'user', content: `Second question: ${long('cherry', 10)} ${edit} ${long('date', 10)}` },
  { role: 'assistant', content: `Second answer: ${long('elder', 20)}` },
  { role: 'user', content: `Third question: ${long('fig', 15)}` },
];

async function chat(messages, extra = {}) {
  const r = await http(srv, 'POST', '/v1/chat/completions', { messages, temperature: 0,
    max_tokens: 3, logprobs: true, top_logprobs: 5, ...extra }, {}, 60000);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

// ids of the rendered messages (the server's own template and tokenizer)
async function ids(messages, addGen) {
  const t = await http(srv, 'POST', '/apply-template', { messages, add_generation_prompt: addGen });
  assert.equal(t.status, 200, t.text);
  const k = await http(srv, 'POST', '/tokenize', { content: t.json.prompt, add_special: true,
    parse_special: true });
  assert.equal(k.status, 200, k.text);
  return k.json.tokens.map((x) => (typeof x === 'number' ? x : x.id));
}

const common = (a, b) => { let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++; return i; };

test('qwen35moe: an edit in the middle restores the boundary before it, logprobs as fresh', async () => {
  const a = conv('kiwi');
  const b = conv('lemon lime');
  const first = await chat(a);
  assert.equal(first.timings.cache_n, 0);
  const edited = await chat(b);
  // reused: the shared prefix; replayed: from the checkpoint at the boundary before the
  // edited message (its first 3 messages as the server renders them) up to that prefix
  const full = await ids(b, true);
  const keep = common(await ids(a, true), full);
  const boundary = common(await ids(b.slice(0, 3), false), full);
  assert.ok(boundary > 0 && boundary < keep, `boundary ${boundary}, keep ${keep}`);
  assert.equal(edited.timings.cache_n, keep);
  assert.equal(edited.timings.cache_replayed_n, keep - boundary);
  assert.equal(edited.timings.prompt_n, full.length - boundary);
  assert.equal(edited.usage.prompt_tokens_details.cached_tokens, keep);
  // a fresh evaluation of the edited conversation: the same bytes
  const fresh = await chat(b, { cache_prompt: false });
  assert.equal(fresh.timings.cache_n, 0);
  assert.deepEqual(edited.choices[0].logprobs, fresh.choices[0].logprobs);
  assert.equal(edited.choices[0].message.content, fresh.choices[0].message.content);
  const m = await http(srv, 'GET', '/metrics');
  const rep = m.text.match(/^particle_prompt_replayed_tokens_total (\d+)/m);
  assert.ok(rep && Number(rep[1]) >= keep - boundary, m.text.slice(0, 300));
});

// tool_choice named: the grammar forces <tool_call><function=add><parameter=a>INT... (integer
// parameters: bounded, so a random tiny model completes the call); the XML values come back
// as JSON integers (the schema's type), streamed the same.
test('qwen35moe: a forced XML tool call comes back typed through the openai client', async () => {
  const ai = client(srv);
  const tools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object',
    properties: { a: { type: 'integer' }, b: { type: 'integer' }, note: { type: 'string' } },
    required: ['a', 'b'] } } }];
  let opts, c;
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    opts = { model: 'tiny', messages: [{ role: 'user', content: 'Add 2 and 3.' }], tools,
      tool_choice: { type: 'function', function: { name: 'add' } }, temperature: 0.7, seed,
      max_tokens: 120 };
    c = (await ai.chat.completions.create(opts)).choices[0];
    if (c.finish_reason !== 'length') break;
  }
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'add');
  assert.match(call.id, /^call_/);
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args), ['a', 'b']);
  assert.ok(Number.isInteger(args.a) && Number.isInteger(args.b), call.function.arguments);
  const st = await http(srv, 'POST', '/v1/chat/completions', { ...opts, stream: true }, {}, 60000);
  const ev = parseSSE(st.text);
  assert.equal(ev.at(-1), '[DONE]');
  let name = '', argText = '', finish = null;
  for (const e of ev.slice(0, -1)) {
    const ch = e.choices[0];
    if (!ch) continue;
    finish = ch.finish_reason ?? finish;
    for (const d of ch.delta?.tool_calls ?? []) {
      assert.equal(d.index, 0);
      name += d.function?.name ?? '';
      argText += d.function?.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(name, 'add');
  assert.deepEqual(JSON.parse(argText), args);
});
