// test_gptoss.mjs - the server on a tiny gpt-oss model (issue 17): the harmony template
// (tokenizer.chat_template, the real gpt-oss.jinja) renders the prompt, the reply goes through
// the harmony reply parser (analysis -> reasoning_content, final / plain text -> content), and
// greedy chat equals `particle run` on the same messages (run parses the harmony reply the
// same way: content on stdout); streamed == non-streamed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startServer, client, writeTmp, PARTICLE, TMP } from './lib.mjs';

const MODEL = path.join(TMP, 'gptoss-tiny.gguf');
let srv, ai;
before(async () => {
  const mk = spawnSync(PARTICLE, ['mkmodel', '--arch', 'gpt-oss', '--preset', 'tiny', '-o', MODEL],
    { encoding: 'utf8', timeout: 120000 });
  assert.equal(mk.status, 0, `mkmodel: ${mk.stderr}`);
  srv = await startServer([], { model: MODEL });
  ai = client(srv);
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `server exit: ${JSON.stringify(r)} ${srv.stderr()}`);
});

const messages = [{ role: 'user', content: 'What is the capital of France?' }];

function run(args) {
  const r = spawnSync(PARTICLE, ['run', '-m', MODEL, '--no-lock', '--quiet', ...args],
    { encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error(`particle run failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

test('gpt-oss: harmony prompt, greedy chat equals particle run', async () => {
  const r = await ai.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 24 });
  const raw = run(['--messages', writeTmp('oss.json', JSON.stringify(messages)), '--temperature', '0',
    '-n', '24']);
  const msg = r.choices[0].message;
  // the prompt is the template's harmony rendering: system block + user turn + "<|start|>assistant"
  assert.ok(r.usage.prompt_tokens > 60, `prompt tokens ${r.usage.prompt_tokens}`);
  assert.equal(r.usage.completion_tokens, 24);
  // run prints the reply through the same harmony parser: the content, headers never shown
  assert.equal(msg.content ?? '', raw);
  assert.ok(!raw.includes('<|channel|>'), raw);
});

test('gpt-oss: streamed equals non-streamed', async () => {
  const a = await ai.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 16 });
  const s = await ai.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 16,
    stream: true });
  let content = '', reasoning = '';
  for await (const c of s) {
    content += c.choices[0]?.delta?.content ?? '';
    reasoning += c.choices[0]?.delta?.reasoning_content ?? '';
  }
  assert.equal(content, a.choices[0].message.content ?? '');
  assert.equal(reasoning, a.choices[0].message.reasoning_content ?? '');
});
