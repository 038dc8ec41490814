// lib.mjs - shared helpers for the server tests: start `particle serve` on an ephemeral
// loopback port, the official `openai` client pointed at it, raw HTTP/socket helpers and
// `particle run` for equality checks.  Environment: PARTICLE (binary), PT_MODEL (tiny model),
// PT_TMP (scratch directory).  Every network call goes to 127.0.0.1 and is time-bounded.
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(new URL('../../tools/oracle/package.json', import.meta.url));
export const OpenAI = require('openai').default ?? require('openai');

export const PARTICLE = process.env.PARTICLE || 'build/particle';
export const MODEL = process.env.PT_MODEL;
export const TMP = process.env.PT_TMP || fs.mkdtempSync('/tmp/pt-server-');

// Starts the server; resolves to { port, url, proc, stop(), stderr() } once it prints its URL.
export async function startServer(args = [], { model = MODEL, timeoutMs = 60000 } = {}) {
  const proc = spawn(PARTICLE, ['serve', '-m', model, '--port', '0', '--no-lock', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '', err = '';
  proc.stderr.on('data', (d) => { err += d; if (err.length > 1e6) err = err.slice(-5e5); });
  const port = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server did not start: ${err}`)), timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/serving \S+ at http:\/\/[^ ]*:(\d+) /);
      if (m) { clearTimeout(t); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(t); reject(new Error(`server exited ${code}: ${err}`)); });
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve({ code, sig })));
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    proc,
    exited,
    stderr: () => err,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null) return { code: proc.exitCode };
      proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 15000);
      const r = await exited;
      clearTimeout(t);
      return r;
    },
  };
}

export function client(srv, opts = {}) {
  return new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: opts.apiKey ?? 'none', maxRetries: 0,
    timeout: opts.timeout ?? 60000 });
}

// fetch with a deadline; returns { status, headers, text, json }.
export async function http(srv, method, p, body, headers = {}, timeoutMs = 30000) {
  const r = await fetch(`${srv.url}${p}`, {
    method, headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// Polls GET /metrics until test(text) holds (a condition, not a fixed sleep: sanitizer builds
// on a loaded 2-core machine can take seconds to accept a request); returns the text.
export async function waitMetrics(srv, test, what, timeoutMs = 30000, headers = {}) {
  const t0 = Date.now();
  for (;;) {
    const m = await http(srv, 'GET', '/metrics', undefined, headers).catch(() => null);
    if (m && m.status === 200 && test(m.text)) return m.text;
    if (Date.now() - t0 > timeoutMs) throw new Error(`waited ${timeoutMs} ms for ${what}: ${m?.text?.slice(0, 400)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// The value of one unlabelled metric (particle_NAME) in a /metrics text, NaN if absent.
export function metric(text, name) {
  const m = text.match(new RegExp(`^particle_${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

// Raw TCP exchange: writes each chunk (string or Buffer; a number = pause in ms), optionally
// half-closes, and collects what comes back until the peer closes or timeoutMs.
export function raw(port, chunks, { timeoutMs = 5000, halfClose = false } = {}) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = Buffer.alloc(0), done = false;
    const finish = (why) => {
      if (done) return;
      done = true;
      s.destroy();
      const text = got.toString('latin1');
      const m = text.match(/^HTTP\/1\.[01] (\d{3})/);
      resolve({ status: m ? Number(m[1]) : 0, text, why });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    s.on('data', (d) => { got = Buffer.concat([got, d]); });
    s.on('close', () => { clearTimeout(timer); finish('closed'); });
    // A server that refuses a request while the client is still sending (413 on a body it
    // will not read) closes with unread data, which the kernel turns into a reset: that is
    // the server closing too, not a client-side failure.
    s.on('error', (e) => {
      clearTimeout(timer);
      finish(e.code === 'ECONNRESET' || e.code === 'EPIPE' ? 'closed' : 'error');
    });
    s.on('connect', async () => {
      for (const c of chunks) {
        if (done) return;
        if (typeof c === 'number') { await new Promise((r) => setTimeout(r, c)); continue; }
        await new Promise((r) => s.write(c, () => r()));
        if (done) return;
      }
      if (halfClose) s.end();
    });
  });
}

// `particle run` with the given flags; returns stdout (the reply text).
export function runParticle(args, input) {
  const r = spawnSync(PARTICLE, ['run', '-m', MODEL, '--no-lock', '--quiet', ...args], {
    input, encoding: 'utf8', timeout: 60000,
  });
  if (r.status !== 0) throw new Error(`particle run failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

export function writeTmp(name, text) {
  const p = path.join(TMP, name);
  fs.writeFileSync(p, text);
  return p;
}

// Reads an SSE body into an array of parsed `data:` payloads ("[DONE]" kept as a string).
export function parseSSE(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    for (const line of block.split('\n')) {
      if (!line.startsWith('data: ')) continue;
      const d = line.slice(6);
      events.push(d === '[DONE]' ? d : JSON.parse(d));
    }
  }
  return events;
}

// Process RSS (bytes) and open fds of a pid (Linux /proc).
export function procStats(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(status.match(/VmRSS:\s+(\d+) kB/)[1]) * 1024;
  const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
  return { rss, fds };
}
