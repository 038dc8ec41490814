/* app.js - the chat: conversations in localStorage, streaming replies from
 * POST v1/chat/completions (SSE read with fetch + ReadableStream, so Stop is an
 * AbortController and an API key can go in a header), settings.  Model text is rendered only
 * through ParticleMd (DOM text nodes, never HTML). */
'use strict';

(function () {
	const $ = (id) => document.getElementById(id);
	const KEY_CONVS = 'particle.conversations.v1';
	const KEY_CUR = 'particle.current.v1';
	const KEY_SET = 'particle.settings.v1';
	const NUM_SETTINGS = ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed'];
	const INT_SETTINGS = { top_k: 1, max_tokens: 1, seed: 1 };

	/* ---- SSE over fetch (shared with stats.js through window.ParticleSSE) ---- */

	/* Calls onEvent(dataString) for each `data:` event of an SSE response body. */
	async function readSSE(resp, onEvent) {
		const reader = resp.body.getReader();
		const dec = new TextDecoder();
		let buf = '', finished = false;
		for (;;) {
			const { value, done } = await reader.read();
			if (done) break;
			buf += dec.decode(value, { stream: true });
			let cut;
			while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
				const block = buf.slice(0, cut);
				buf = buf.slice(cut + (buf[cut] === '\r' ? (buf[cut + 2] === '\r' ? 4 : 3) : (buf[cut + 1] === '\r' ? 3 : 2)));
				const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:'))
					.map((l) => l.slice(l[5] === ' ' ? 6 : 5)).join('\n');
				/* after the last event keep reading to the end: cancelling the body
				 * would count as an aborted request */
				if (data && !finished && onEvent(data) === false) finished = true;
			}
		}
	}

	function authHeaders() {
		const h = {};
		if (settings.api_key) h.Authorization = 'Bearer ' + settings.api_key;
		return h;
	}
	window.ParticleSSE = { readSSE, authHeaders: () => authHeaders() };

	/* ---- storage ---- */

	let store = { order: [], convs: {} };
	let currentId = null;
	let settings = {};

	function load() {
		try {
			const s = JSON.parse(localStorage.getItem(KEY_CONVS) || 'null');
			if (s && Array.isArray(s.order) && s.convs && typeof s.convs === 'object') {
				store.order = s.order.filter((id) => s.convs[id] && Array.isArray(s.convs[id].messages));
				store.convs = s.convs;
			}
		} catch (e) { notice('stored conversations could not be read; starting fresh'); }
		try { settings = JSON.parse(localStorage.getItem(KEY_SET) || '{}') || {}; } catch (e) { settings = {}; }
		currentId = localStorage.getItem(KEY_CUR);
		if (!store.convs[currentId]) currentId = store.order[0] || null;
	}

	function save() {
		try {
			localStorage.setItem(KEY_CONVS, JSON.stringify(store));
			if (currentId) localStorage.setItem(KEY_CUR, currentId);
			else localStorage.removeItem(KEY_CUR);
		} catch (e) {
			notice('browser storage is full: this conversation will not survive a reload');
		}
	}

	function newConv() {
		const id = 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 7);
		store.convs[id] = { id, title: 'New chat', created: Date.now(), messages: [] };
		store.order.unshift(id);
		currentId = id;
		save();
		return store.convs[id];
	}

	function cur() {
		return currentId ? store.convs[currentId] : null;
	}

	/* ---- conversation list ---- */

	function renderList() {
		const ul = $('conv-list');
		ul.textContent = '';
		for (const id of store.order) {
			const c = store.convs[id];
			const li = document.createElement('li');
			li.dataset.id = id;
			if (id === currentId) li.className = 'current';
			const open = document.createElement('button');
			open.type = 'button';
			open.className = 'conv-open';
			open.textContent = c.title || 'Untitled';
			open.title = c.title || '';
			if (id === currentId) open.setAttribute('aria-current', 'true');
			open.addEventListener('click', () => switchTo(id));
			const ren = document.createElement('button');
			ren.type = 'button';
			ren.className = 'conv-act';
			ren.textContent = 'rename';
			ren.setAttribute('aria-label', 'Rename ' + (c.title || 'conversation'));
			ren.addEventListener('click', () => startRename(li, c));
			const del = document.createElement('button');
			del.type = 'button';
			del.className = 'conv-act';
			del.textContent = 'delete';
			del.setAttribute('aria-label', 'Delete ' + (c.title || 'conversation'));
			del.addEventListener('click', () => {
				if (del.dataset.armed) return deleteConv(id);
				del.dataset.armed = '1';
				del.textContent = 'sure?';
				setTimeout(() => { delete del.dataset.armed; del.textContent = 'delete'; }, 3000);
			});
			li.append(open, ren, del);
			ul.appendChild(li);
		}
	}

	function startRename(li, c) {
		const input = document.createElement('input');
		input.value = c.title || '';
		input.setAttribute('aria-label', 'New name');
		input.maxLength = 200;
		li.textContent = '';
		li.appendChild(input);
		input.focus();
		input.select();
		let done = false;
		const finish = (keep) => {
			if (done) return;
			done = true;
			if (keep && input.value.trim()) c.title = input.value.trim().slice(0, 200);
			save();
			renderList();
		};
		input.addEventListener('keydown', (e) => {
			if (e.key === 'Enter') { e.preventDefault(); finish(true); }
			if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); finish(false); }
		});
		input.addEventListener('blur', () => finish(true));
	}

	function deleteConv(id) {
		if (id === currentId) stop();
		delete store.convs[id];
		store.order = store.order.filter((x) => x !== id);
		if (currentId === id) currentId = store.order[0] || null;
		save();
		renderList();
		renderMessages();
	}

	function switchTo(id) {
		if (busy) stop();
		currentId = id;
		save();
		renderList();
		renderMessages();
		closeDrawers();
		$('input').focus();
	}

	/* ---- messages ---- */

	function fmtStats(m) {
		const s = m.stats;
		if (!s) return '';
		const parts = [];
		if (s.completion_tokens != null) parts.push(s.completion_tokens + ' tokens');
		if (s.tok_s) parts.push(s.tok_s.toFixed(1) + ' tok/s');
		if (s.ttft_s != null) parts.push('first token ' + s.ttft_s.toFixed(2) + ' s');
		if (s.cached_tokens) parts.push(s.cached_tokens + ' prompt tokens reused');
		if (s.finish) parts.push(s.finish);
		return parts.join(' · ');
	}

	function msgNode(m, idx, conv) {
		const div = document.createElement('div');
		div.className = 'msg ' + (m.role === 'user' ? 'user' : 'assistant') + (m.error ? ' error' : '');
		div.dataset.idx = idx;
		const who = document.createElement('div');
		who.className = 'who';
		who.textContent = m.role === 'user' ? 'You' : 'Model';
		div.appendChild(who);
		if (m.reasoning) {
			const d = document.createElement('details');
			d.className = 'reasoning';
			const s = document.createElement('summary');
			s.textContent = m.streaming && !m.content ? 'Reasoning…' : 'Reasoning';
			d.append(s, ParticleMd.render(m.reasoning));
			div.appendChild(d);
		}
		const body = ParticleMd.render(m.content || '');
		body.classList.add('body');
		if (m.streaming) body.classList.add('cursor');
		div.appendChild(body);
		if (m.error) {
			const e = document.createElement('div');
			e.className = 'err';
			e.textContent = m.error;
			div.appendChild(e);
		}
		const meta = fmtStats(m);
		if (meta) {
			const md = document.createElement('div');
			md.className = 'meta';
			md.textContent = meta;
			div.appendChild(md);
		}
		if (!m.streaming) {
			const acts = document.createElement('div');
			acts.className = 'actions';
			const btn = (label, fn) => {
				const b = document.createElement('button');
				b.type = 'button';
				b.textContent = label;
				b.dataset.action = label.toLowerCase();
				b.addEventListener('click', fn);
				acts.appendChild(b);
			};
			btn('Copy', () => copyText(m.content || ''));
			if (m.role === 'user') btn('Edit', () => startEdit(div, idx));
			if (m.role === 'assistant' && idx === conv.messages.length - 1)
				btn('Regenerate', () => regenerate());
			div.appendChild(acts);
		}
		return div;
	}

	function renderMessages() {
		const box = $('messages');
		const c = cur();
		box.textContent = '';
		const msgs = c ? c.messages : [];
		msgs.forEach((m, i) => box.appendChild(msgNode(m, i, c)));
		$('empty').hidden = msgs.length > 0;
		box.scrollTop = box.scrollHeight;
	}

	/* Replaces the last message's node (streaming updates), at most once per frame. */
	let pending = false;
	function updateLast() {
		if (pending) return;
		pending = true;
		requestAnimationFrame(() => {
			pending = false;
			const c = cur();
			const box = $('messages');
			if (!c || !c.messages.length) return;
			const i = c.messages.length - 1;
			const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
			const old = box.querySelector('.msg[data-idx="' + i + '"]');
			const node = msgNode(c.messages[i], i, c);
			if (old) box.replaceChild(node, old);
			else box.appendChild(node);
			if (atEnd) box.scrollTop = box.scrollHeight;
		});
	}

	function startEdit(div, idx) {
		if (busy) return;
		const c = cur();
		const m = c.messages[idx];
		div.textContent = '';
		const ta = document.createElement('textarea');
		ta.className = 'edit';
		ta.value = m.content;
		ta.setAttribute('aria-label', 'Edit message');
		const acts = document.createElement('div');
		acts.className = 'actions';
		const send = document.createElement('button');
		send.type = 'button';
		send.className = 'primary';
		send.textContent = 'Save & send';
		send.dataset.action = 'save';
		const cancel = document.createElement('button');
		cancel.type = 'button';
		cancel.textContent = 'Cancel';
		const doSend = () => {
			if (!ta.value.trim()) return;
			c.messages.length = idx; /* the edited message and everything after it */
			c.messages.push({ role: 'user', content: ta.value });
			save();
			renderMessages();
			generate();
		};
		send.addEventListener('click', doSend);
		cancel.addEventListener('click', renderMessages);
		ta.addEventListener('keydown', (e) => {
			if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); doSend(); }
			if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); renderMessages(); }
		});
		acts.append(send, cancel);
		div.append(ta, acts);
		ta.focus();
	}

	function regenerate() {
		if (busy) return;
		const c = cur();
		if (!c || !c.messages.length || c.messages[c.messages.length - 1].role !== 'assistant') return;
		c.messages.pop();
		save();
		renderMessages();
		generate();
	}

	async function copyText(t) {
		try {
			await navigator.clipboard.writeText(t);
			notice('copied');
		} catch (e) {
			const ta = document.createElement('textarea');
			ta.value = t;
			document.body.appendChild(ta);
			ta.select();
			try { document.execCommand('copy'); notice('copied'); } catch (e2) { notice('copy failed'); }
			ta.remove();
		}
	}

	/* ---- generation ---- */

	let busy = false;
	let ctrl = null;

	function requestBody(c) {
		const msgs = [];
		if (settings.system && settings.system.trim()) msgs.push({ role: 'system', content: settings.system });
		for (const m of c.messages) if (!m.error || m.content) msgs.push({ role: m.role, content: m.content || '' });
		const body = { model: modelId || 'particle', messages: msgs, stream: true,
			       stream_options: { include_usage: true } };
		for (const k of NUM_SETTINGS) {
			const v = settings[k];
			if (v === '' || v == null) continue;
			const n = Number(v);
			if (Number.isFinite(n)) body[k] = INT_SETTINGS[k] ? Math.trunc(n) : n;
		}
		return body;
	}

	function setBusy(b) {
		busy = b;
		$('send').hidden = b;
		$('stop').hidden = !b;
	}

	async function generate() {
		const c = cur();
		if (!c || busy) return;
		const body = requestBody(c);
		const m = { role: 'assistant', content: '', streaming: true };
		c.messages.push(m);
		setBusy(true);
		renderMessages();
		ctrl = new AbortController();
		const t0 = performance.now();
		let tFirst = null, nChunks = 0;
		try {
			const resp = await fetch('v1/chat/completions', {
				method: 'POST', signal: ctrl.signal,
				headers: Object.assign({ 'Content-Type': 'application/json' }, authHeaders()),
				body: JSON.stringify(body),
			});
			if (!resp.ok) {
				let msg = 'HTTP ' + resp.status;
				try { const j = await resp.json(); if (j.error && j.error.message) msg += ': ' + j.error.message; } catch (e) { /* not JSON */ }
				if (resp.status === 401) msg += ' (set the API key in Settings)';
				throw new Error(msg);
			}
			await readSSE(resp, (data) => {
				if (data === '[DONE]') return false;
				let j;
				try { j = JSON.parse(data); } catch (e) { return; }
				if (j.error) throw new Error(j.error.message || 'server error');
				const ch = j.choices && j.choices[0];
				if (ch) {
					const d = ch.delta || {};
					if (typeof d.content === 'string' && d.content) m.content += d.content;
					if (typeof d.reasoning_content === 'string' && d.reasoning_content) m.reasoning = (m.reasoning || '') + d.reasoning_content;
					if ((d.content || d.reasoning_content) && tFirst === null) tFirst = performance.now();
					if (d.content || d.reasoning_content) nChunks++;
					if (ch.finish_reason) m.stats = Object.assign(m.stats || {}, { finish: ch.finish_reason });
				}
				if (j.timings) { /* llama-server style: the server's own clock */
					const tm = j.timings;
					m.stats = Object.assign(m.stats || {}, {
						server_tok_s: Number.isFinite(tm.predicted_per_second) ? tm.predicted_per_second : undefined,
						server_ttft_s: Number.isFinite(tm.ttft_ms) ? tm.ttft_ms / 1000 : undefined,
					});
				}
				if (j.usage) {
					m.stats = Object.assign(m.stats || {}, {
						completion_tokens: j.usage.completion_tokens,
						cached_tokens: j.usage.prompt_tokens_details && j.usage.prompt_tokens_details.cached_tokens,
					});
				}
				updateLast();
			});
		} catch (e) {
			if (e.name === 'AbortError') m.stats = Object.assign(m.stats || {}, { finish: 'stopped' });
			else m.error = String(e.message || e);
			if (ctrl) ctrl.abort(); /* an error mid-stream: close the connection too */
		}
		const t1 = performance.now();
		m.streaming = false;
		m.stats = m.stats || {};
		if (tFirst !== null) { /* measured here when the server gave no timings */
			m.stats.ttft_s = m.stats.server_ttft_s ?? (tFirst - t0) / 1000;
			const n = m.stats.completion_tokens || nChunks;
			if (m.stats.server_tok_s) m.stats.tok_s = m.stats.server_tok_s;
			else if (t1 > tFirst && n > 1) m.stats.tok_s = (n - 1) / ((t1 - tFirst) / 1000);
		}
		ctrl = null;
		setBusy(false);
		if (c.title === 'New chat') {
			const first = c.messages.find((x) => x.role === 'user');
			if (first) c.title = first.content.replace(/\s+/g, ' ').trim().slice(0, 48) || 'Untitled';
			renderList();
		}
		save();
		if (c === cur()) renderMessages();
		document.dispatchEvent(new CustomEvent('particle-reply-done'));
	}

	function stop() {
		if (ctrl) ctrl.abort();
	}

	function send() {
		const ta = $('input');
		const text = ta.value;
		if (!text.trim() || busy) return;
		let c = cur();
		if (!c) c = newConv();
		c.messages.push({ role: 'user', content: text });
		c.updated = Date.now();
		ta.value = '';
		if (store.order[0] !== c.id) store.order = [c.id].concat(store.order.filter((x) => x !== c.id));
		save();
		renderList();
		generate();
	}

	/* ---- settings ---- */

	function bindSettings() {
		const fields = ['system', 'api_key'].concat(NUM_SETTINGS);
		for (const k of fields) {
			const inp = $('set-' + k);
			inp.value = settings[k] == null ? '' : settings[k];
			inp.addEventListener('input', () => {
				settings[k] = inp.value;
				try { localStorage.setItem(KEY_SET, JSON.stringify(settings)); } catch (e) { /* full */ }
				if (k === 'api_key') {
					if (window.ParticleStats) ParticleStats.kick();
					if (!modelId) loadModel();
				}
			});
		}
		$('settings-form').addEventListener('submit', (e) => e.preventDefault());
		$('reset-settings').addEventListener('click', () => {
			const key = settings.api_key;
			settings = key ? { api_key: key } : {};
			try { localStorage.setItem(KEY_SET, JSON.stringify(settings)); } catch (e) { /* full */ }
			for (const k of fields) $('set-' + k).value = settings[k] || '';
		});
	}

	/* ---- misc ---- */

	let noticeTimer = null;
	function notice(text) {
		const c = $('conn');
		const old = c.dataset.state || '';
		c.textContent = text;
		clearTimeout(noticeTimer);
		noticeTimer = setTimeout(() => window.ParticleStats && ParticleStats.showConn(), 2500);
		return old;
	}

	function closeDrawers() {
		for (const [panel, btn] of [['side', 'toggle-side'], ['status', 'toggle-status']]) {
			$(panel).classList.remove('open');
			$(btn).setAttribute('aria-expanded', 'false');
		}
	}

	function drawer(panel, btn) {
		$(btn).addEventListener('click', () => {
			const open = !$(panel).classList.contains('open');
			closeDrawers();
			$(panel).classList.toggle('open', open);
			$(btn).setAttribute('aria-expanded', String(open));
		});
	}

	let modelId = null;
	async function loadModel() {
		try {
			const r = await fetch('v1/models', { headers: authHeaders() });
			if (!r.ok) return;
			const j = await r.json();
			const m = j.data && j.data[0];
			if (m && typeof m.id === 'string') {
				modelId = m.id;
				$('model-name').textContent = m.id;
			}
		} catch (e) { /* shown by the stats connection */ }
	}

	function init() {
		load();
		bindSettings();
		renderList();
		renderMessages();
		$('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
		$('input').addEventListener('keydown', (e) => {
			if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
		});
		$('stop').addEventListener('click', stop);
		$('new-chat').addEventListener('click', () => {
			if (busy) stop();
			newConv();
			renderList();
			renderMessages();
			closeDrawers();
			$('input').focus();
		});
		document.addEventListener('keydown', (e) => {
			if (e.key === 'Escape') {
				if (busy) { e.preventDefault(); stop(); } else closeDrawers();
			}
		});
		$('messages').addEventListener('click', (e) => {
			const b = e.target.closest('button[data-action="copy-code"]');
			if (b) copyText(b.closest('.code').querySelector('pre').textContent);
		});
		/* another tab changed the conversations: show them (not mid-reply: ours wins) */
		window.addEventListener('storage', (e) => {
			if (e.key !== KEY_CONVS || busy) return;
			const keep = currentId;
			load();
			if (store.convs[keep]) currentId = keep;
			renderList();
			renderMessages();
		});
		drawer('side', 'toggle-side');
		drawer('status', 'toggle-status');
		loadModel();
		$('input').focus();
	}

	window.ParticleApp = { isBusy: () => busy, stop };
	init();
})();
