// test_demo_model.mjs - the server on the committed trained demo model (issue 20): a model
// whose greedy answers are English, so equality with `particle run` is checked on real text,
// and the answer has the shape the model was trained to give ("A/An <word> is ...").
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { startServer, client, writeTmp, PARTICLE } from './lib.mjs';

const DEMO = 'models-demo/demo-qwen3moe-q8_0.gguf';
let srv, ai;
before(async () => {
  assert.ok(fs.existsSync(DEMO), `${DEMO} is committed`);
  srv = await startServer([], { model: DEMO });
  ai = client(srv);
});
after(async () => {
  const r = await srv.stop();
  assert.equal(r.code, 0, `server exit: ${JSON.stringify(r)} ${srv.stderr()}`);
});

function run(args) {
  const r = spawnSync(PARTICLE, ['run', '-m', DEMO, '--no-lock', '--quiet', ...args],
    { encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error(`particle run failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

for (const q of ['What is a volcano?', 'What is a river?']) {
  test(`greedy chat on the trained model equals particle run: ${q}`, async () => {
    const messages = [{ role: 'user', content: q }];
    const r = await ai.chat.completions.create({ model: 'demo', messages, temperature: 0,
      max_tokens: 64, repeat_penalty: 1.3 });
    const want = run(['--messages', writeTmp('demo.json', JSON.stringify(messages)),
      '--temperature', '0', '--repetition-penalty', '1.3', '-n', '64']);
    const got = r.choices[0].message.content;
    assert.equal(got, want);
    assert.match(got, /^An? [a-z-]+ is /, 'the definition shape the model learned');
    assert.equal(r.choices[0].finish_reason, 'stop', 'the model ends its own answer');
  });
}

test('streamed answer on the trained model equals the non-streamed one', async () => {
  const messages = [{ role: 'user', content: 'Tell me a fortune.' }];
  const full = await ai.chat.completions.create({ model: 'demo', messages, temperature: 0,
    max_tokens: 64, repeat_penalty: 1.3 });
  const stream = await ai.chat.completions.create({ model: 'demo', messages, temperature: 0,
    max_tokens: 64, repeat_penalty: 1.3, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  assert.equal(text, full.choices[0].message.content);
  assert.ok(/[a-z]+ [a-z]+ [a-z]+/.test(text), `English words: ${text}`);
});
