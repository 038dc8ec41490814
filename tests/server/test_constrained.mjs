// test_constrained.mjs - constrained decoding through the openai client: response_format
// json_object and json_schema (every completed answer parses and validates), unsupported
// schema keywords answer 400 naming the keyword, tool_choice required / named force a call
// (streamed and not), tool_choice none and auto leave the text alone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, client, http, parseSSE } from './lib.mjs';

let srv, ai;
before(async () => { srv = await startServer([]); ai = client(srv); });
after(async () => { assert.equal((await srv.stop()).code, 0, srv.stderr()); });

const msgs = [{ role: 'user', content: 'Give me a person as JSON.' }];
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];

test('json_object: every completed answer is a JSON object', async () => {
  let complete = 0;
  for (const seed of SEEDS) {
    const r = await ai.chat.completions.create({ model: 'tiny', messages: msgs, temperature: 1, seed,
      max_tokens: 200, response_format: { type: 'json_object' } });
    const c = r.choices[0];
    if (c.finish_reason !== 'stop') continue;
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
    complete++;
  }
  assert.ok(complete >= 1, 'at least one answer completed within 200 tokens');
});

const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 },
  age: { type: 'integer' }, pet: { enum: ['cat', 'dog'] } }, required: ['name', 'age', 'pet'],
  additionalProperties: false };

test('json_schema: every completed answer validates (JSON and streamed)', async () => {
  let complete = 0;
  for (const seed of SEEDS) {
    const opts = { model: 'tiny', messages: msgs, temperature: 1, seed, max_tokens: 120,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema } } };
    const r = await ai.chat.completions.create(opts);
    const c = r.choices[0];
    if (c.finish_reason === 'stop') {
      const v = JSON.parse(c.message.content);
      assert.deepEqual(Object.keys(v), ['name', 'age', 'pet']);
      assert.equal(typeof v.name, 'string');
      assert.ok([...v.name].length <= 12);
      assert.ok(Number.isInteger(v.age));
      assert.ok(['cat', 'dog'].includes(v.pet));
      complete++;
    }
    // the stream gives the same text
    let text = '';
    for await (const ch of await ai.chat.completions.create({ ...opts, stream: true }))
      text += ch.choices[0]?.delta?.content ?? '';
    assert.equal(text, c.message.content);
  }
  assert.ok(complete >= 1, 'at least one answer completed');
});

test('an unsupported schema keyword is 400 and names its path', async () => {
  await assert.rejects(ai.chat.completions.create({ model: 'tiny', messages: msgs, max_tokens: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object',
      properties: { when: { type: 'string', pattern: '^a' } } } } } }),
  (e) => e.status === 400 && /\/properties\/when\/pattern/.test(e.message));
});

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'] } } },
  { type: 'function', function: { name: 'add', parameters: { type: 'object',
    properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] } } },
];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

test('tool_choice required: the answer is a tool call with valid arguments', async () => {
  let calls = 0;
  for (const seed of SEEDS.slice(0, 5)) {
    const r = await ai.chat.completions.create({ model: 'tiny', messages: ask, tools, tool_choice: 'required',
      temperature: 1, seed, max_tokens: 120 });
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    const tc = c.message.tool_calls;
    assert.ok(tc.length >= 1);
    for (const call of tc) {
      assert.equal(call.type, 'function');
      assert.ok(['get_weather', 'add'].includes(call.function.name));
      const args = JSON.parse(call.function.arguments);
      if (call.function.name === 'add') assert.ok(Number.isInteger(args.a) && Number.isInteger(args.b));
      else assert.equal(typeof args.city, 'string');
      assert.match(call.id, /\S/);
    }
    calls++;
  }
  assert.ok(calls >= 1);
});

test('a named tool_choice forces that function; streamed deltas assemble to the same call', async () => {
  let opts, c;
  for (const seed of [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]) { // a seed whose call completes
    opts = { model: 'tiny', messages: ask, tools, temperature: 0.7, seed, max_tokens: 200,
      tool_choice: { type: 'function', function: { name: 'add' } } };
    c = (await ai.chat.completions.create(opts)).choices[0];
    if (c.finish_reason !== 'length') break;
  }
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
  assert.equal(c.message.tool_calls[0].function.name, 'add');
  const args = JSON.parse(c.message.tool_calls[0].function.arguments);
  assert.ok(Number.isInteger(args.a) && Number.isInteger(args.b));
  const s = await http(srv, 'POST', '/v1/chat/completions', { ...opts, stream: true });
  const ev = parseSSE(s.text);
  assert.equal(ev.at(-1), '[DONE]');
  const calls = {};
  let finish = null;
  for (const e of ev.slice(0, -1)) {
    const ch = e.choices[0];
    if (!ch) continue;
    finish = ch.finish_reason ?? finish;
    for (const d of ch.delta?.tool_calls ?? []) {
      calls[d.index] ??= { name: '', arguments: '', id: null };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].name += d.function.name;
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls[0].name, 'add');
  assert.deepEqual(JSON.parse(calls[0].arguments), args);
});

test('tool_choice none and auto: greedy text as without tools is not forced', async () => {
  const r = await ai.chat.completions.create({ model: 'tiny', messages: ask, tools, tool_choice: 'none',
    temperature: 0, max_tokens: 16 });
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('reasoning: a prompt that opens <think> sends the reply to reasoning_content (deepseek), or to content (none)', async () => {
  const tmpl = '{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}' +
    '{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}';
  const { writeTmp } = await import('./lib.mjs');
  const file = writeTmp('think.jinja', tmpl);
  const t = await startServer(['--chat-template-file', file]);
  try {
    const tai = client(t);
    const body = { model: 'tiny', messages: ask, temperature: 0, max_tokens: 16 };
    const a = (await tai.chat.completions.create(body)).choices[0].message;
    const b = (await tai.chat.completions.create({ ...body, reasoning_format: 'none' })).choices[0].message;
    assert.ok(a.reasoning_content.length > 0, JSON.stringify(a));
    assert.equal(a.content, '');
    assert.equal(b.reasoning_content, undefined);
    assert.equal(b.content, a.reasoning_content);
    // streamed: reasoning_content deltas add up to the same text
    let r = '';
    for await (const c of await tai.chat.completions.create({ ...body, stream: true }))
      r += c.choices[0]?.delta?.reasoning_content ?? '';
    assert.equal(r, a.reasoning_content);
  } finally {
    assert.equal((await t.stop()).code, 0);
  }
  const n = await startServer(['--chat-template-file', file, '--reasoning-format', 'none']);
  try {
    const m = (await client(n).chat.completions.create({ model: 'tiny', messages: ask, temperature: 0, max_tokens: 16 })).choices[0].message;
    assert.equal(m.reasoning_content, undefined);
    assert.ok(m.content.length > 0);
  } finally {
    assert.equal((await n.stop()).code, 0);
  }
});
