/* stats.js - the live status panel: reads GET v1/stats/stream (server-sent events, one JSON
 * snapshot per interval; fields documented in src/server/stats.h) and draws the numbers, two
 * plots over the last minutes and the per-layer expert heat map. */
'use strict';

(function () {
	const $ = (id) => document.getElementById(id);
	const HISTORY_S = 300; /* plots cover the last five minutes */
	const hist = { tps: [], hit: [] }; /* [t_s, value] */
	let last = null;
	let lastDecode = null;
	let connState = 'connecting';

	function fmtBytes(b) {
		if (b == null || !Number.isFinite(b)) return '–';
		const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
		let i = 0;
		while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
		return (i ? b.toFixed(b < 10 ? 2 : 1) : b) + ' ' + u[i];
	}
	const num = (v, d) => (v == null || !Number.isFinite(v) ? '–' : v.toFixed(d));
	const pct = (v) => (v == null || !Number.isFinite(v) ? '–' : (100 * v).toFixed(1) + ' %');

	function showConn() {
		const c = $('conn');
		c.textContent = connState;
		c.className = 'pill' + (connState === 'live' ? ' ok' : connState === 'connecting' ? '' : ' bad');
		c.dataset.state = connState;
	}

	function setBar(id, frac) {
		const f = Math.max(0, Math.min(1, frac || 0));
		const b = $(id);
		b.firstElementChild.style.width = (100 * f).toFixed(1) + '%';
		b.setAttribute('aria-valuenow', String(Math.round(100 * f)));
	}

	function push(arr, t, v) {
		arr.push([t, v]);
		while (arr.length && arr[0][0] < t - HISTORY_S) arr.shift();
	}

	function css(name) {
		return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
	}

	/* Line plot of [t, v] points over the last HISTORY_S seconds; maxV null = auto. */
	function plot(canvas, pts, maxV, color, label) {
		const dpr = window.devicePixelRatio || 1;
		const w = canvas.clientWidth || 300, h = canvas.clientHeight || 70;
		if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
		const g = canvas.getContext('2d');
		g.setTransform(dpr, 0, 0, dpr, 0, 0);
		g.clearRect(0, 0, w, h);
		const now = pts.length ? pts[pts.length - 1][0] : 0;
		/* the window grows with the history, from one minute up to HISTORY_S */
		const span = Math.max(60, Math.min(HISTORY_S, pts.length ? now - pts[0][0] : 0));
		let top = maxV;
		if (top == null) {
			top = 1;
			for (const p of pts) if (p[1] != null && p[1] > top) top = p[1];
			top *= 1.15;
		}
		g.fillStyle = css('--muted');
		g.font = '10px system-ui, sans-serif';
		g.fillText(label + ' (max ' + (maxV == null ? top / 1.15 : maxV).toFixed(maxV === 1 ? 0 : 1) + ')', 4, 11);
		g.fillText('-' + (span >= 120 ? Math.round(span / 60) + ' min' : Math.round(span) + ' s'), 4, h - 3);
		g.strokeStyle = color;
		g.lineWidth = 1.5;
		g.beginPath();
		let pen = false;
		for (const [t, v] of pts) {
			if (v == null) { pen = false; continue; }
			const x = w - ((now - t) / span) * w;
			const y = h - 2 - (v / top) * (h - 16);
			if (pen) g.lineTo(x, y); else g.moveTo(x, y);
			pen = true;
		}
		g.stroke();
	}

	/* Heat map: one row per MoE layer, one cell per expert; colour = log use count relative
	 * to the busiest expert, an outline (or a corner mark on tiny cells) = resident. */
	function heatColor(f) {
		/* dark blue -> teal -> yellow (perceptually ordered, readable on dark and light) */
		const stops = [[30, 40, 80], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
		const x = Math.max(0, Math.min(1, f)) * (stops.length - 1);
		const i = Math.min(stops.length - 2, Math.floor(x)), t = x - i;
		const c = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * t));
		return 'rgb(' + c.join(',') + ')';
	}

	function drawHeat(heat) {
		const canvas = $('heat');
		const rows = heat.uses.length, cols = heat.n_expert;
		if (!rows || !cols) {
			canvas.dataset.rows = '0';
			$('heat-legend').textContent = 'no MoE layers';
			return;
		}
		const avail = Math.max(120, (canvas.parentElement.clientWidth || 300) - 2);
		const cell = Math.max(2, Math.min(18, Math.floor(avail / cols)));
		const ch = Math.max(3, Math.min(14, cell));
		const dpr = window.devicePixelRatio || 1;
		const W = cols * cell, H = rows * ch;
		canvas.style.width = W + 'px';
		canvas.style.height = H + 'px';
		if (canvas.width !== W * dpr || canvas.height !== H * dpr) { canvas.width = W * dpr; canvas.height = H * dpr; }
		const g = canvas.getContext('2d');
		g.setTransform(dpr, 0, 0, dpr, 0, 0);
		g.fillStyle = css('--panel2');
		g.fillRect(0, 0, W, H);
		let max = 0;
		for (const r of heat.uses) for (const u of r) if (u > max) max = u;
		const lmax = Math.log1p(max || 1);
		let nonzeroRows = 0, residentCells = 0;
		for (let r = 0; r < rows; r++) {
			const uses = heat.uses[r], res = heat.resident[r] || '';
			let nz = 0;
			for (let e = 0; e < cols; e++) {
				const u = uses[e] || 0;
				if (u > 0) nz++;
				g.fillStyle = u > 0 ? heatColor(Math.log1p(u) / lmax) : 'rgba(128,128,128,0.18)';
				g.fillRect(e * cell, r * ch, cell - (cell > 3 ? 1 : 0), ch - (ch > 3 ? 1 : 0));
				if (res[e] === '1') {
					/* resident: a dot that contrasts with the cell (dark on bright cells) */
					residentCells++;
					const bright = u > 0 && Math.log1p(u) / lmax > 0.6;
					g.fillStyle = bright ? '#111' : '#fff';
					const d = Math.max(1, Math.floor(Math.min(cell, ch) / 3));
					g.fillRect(e * cell + Math.floor((cell - 1 - d) / 2), r * ch + Math.floor((ch - 1 - d) / 2), d, d);
				}
			}
			if (nz) nonzeroRows++;
		}
		canvas.dataset.rows = String(rows);
		canvas.dataset.cols = String(cols);
		canvas.dataset.nonzeroRows = String(nonzeroRows);
		canvas.dataset.resident = String(residentCells);
		canvas.dataset.cell = cell + 'x' + ch;
		canvas.setAttribute('aria-label', rows + ' MoE layers by ' + cols + ' experts; ' + residentCells +
			' resident; busiest expert used ' + max + ' times');
		const mapped = heat.mode === 'mapped';
		$('heat-legend').textContent = rows + ' layers × ' + cols + ' experts · colour = times used (max ' + max + ')' +
			(mapped ? ' · mapped: every expert resident' : ' · dot = resident in the cache');
		canvas._heat = { heat, cell, ch };
	}

	function heatTip(ev) {
		const canvas = $('heat');
		const h = canvas._heat;
		if (!h) return;
		const rect = canvas.getBoundingClientRect();
		const e = Math.floor((ev.clientX - rect.left) / h.cell), r = Math.floor((ev.clientY - rect.top) / h.ch);
		if (r < 0 || e < 0 || r >= h.heat.uses.length || e >= h.heat.n_expert) return;
		const layer = h.heat.layers ? h.heat.layers[r] : r;
		$('heat-tip').textContent = 'layer ' + layer + ', expert ' + e + ': used ' + (h.heat.uses[r][e] || 0) +
			' times, ' + ((h.heat.resident[r] || '')[e] === '1' ? 'resident' : 'not resident');
	}

	function update(s) {
		last = s;
		const gen = s.gen || {}, mem = s.memory || {}, ex = s.experts || {}, srv = s.server || {};
		const t = (s.t_ms || Date.now()) / 1000;
		if (gen.decode_tok_s > 0) lastDecode = gen.decode_tok_s;
		const idle = !(gen.decode_tok_s > 0) && lastDecode !== null;
		$('st-decode').textContent = num(idle ? lastDecode : gen.decode_tok_s, 1);
		$('st-decode-label').textContent = idle ? 'tok/s decode (last)' : 'tok/s decode';
		$('st-prefill').textContent = gen.prefill_tok_s ? num(gen.prefill_tok_s, 1) + ' tok/s'
			: gen.prefill_tok_s_avg ? num(gen.prefill_tok_s_avg, 1) + ' tok/s (avg)' : '–';
		$('st-ttft').textContent = gen.ttft_s != null && gen.ttft_s >= 0 ? num(gen.ttft_s, 3) + ' s' : '–';
		$('st-slots').textContent = srv.slots_total != null ? srv.slots_busy + ' / ' + srv.slots_total + ' busy' : '–';
		$('st-queue').textContent = srv.queue_depth != null ? String(srv.queue_depth) : '–';
		if (gen.prefill_total > 0) {
			$('st-prefill-prog').textContent = gen.prefill_done + ' / ' + gen.prefill_total + ' tokens';
			setBar('bar-prefill', gen.prefill_done / gen.prefill_total);
		} else {
			$('st-prefill-prog').textContent = 'idle';
			setBar('bar-prefill', 0);
		}
		$('st-rss').textContent = fmtBytes(mem.rss_bytes);
		$('st-peak').textContent = fmtBytes(mem.peak_rss_bytes);
		$('st-budget').textContent = mem.budget_bytes ? 'budget ' + fmtBytes(mem.budget_bytes) : 'no budget';
		if (mem.budget_bytes) {
			const f = mem.rss_bytes / mem.budget_bytes;
			setBar('bar-mem', f);
			const bar = $('bar-mem');
			bar.classList.toggle('warn', f > 0.85 && f <= 1);
			bar.classList.toggle('over', f > 1);
			$('mark-peak').style.left = Math.min(100, (100 * mem.peak_rss_bytes) / mem.budget_bytes).toFixed(1) + '%';
		}
		$('st-hit').textContent = ex.mode === 'mapped' ? 'mapped (all resident)' :
			pct(ex.hit_rate) + (ex.hit_rate_now != null ? ' (now ' + pct(ex.hit_rate_now) + ')' : '');
		$('st-mibtok').textContent = ex.mib_per_token != null ? num(ex.mib_per_token, 2) + ' MiB' : '– (idle)';
		$('st-disk').textContent = ex.disk_mb_s != null ? num(ex.disk_mb_s, 1) + ' MB/s' : '–';
		$('st-io').textContent = ex.io_engine || '–';
		push(hist.tps, t, gen.decode_tok_s || 0);
		push(hist.hit, t, ex.mode === 'mapped' ? 1 : ex.hit_rate_now != null ? ex.hit_rate_now : null);
		plot($('plot-tps'), hist.tps, null, css('--accent'), 'decode tok/s');
		plot($('plot-hit'), hist.hit, 1, '#3fb950', 'hit rate');
		if (s.heat) drawHeat(s.heat);
		if (s.model && s.model.id && !$('model-name').textContent) $('model-name').textContent = s.model.id;
		document.dispatchEvent(new CustomEvent('particle-stats', { detail: s }));
	}

	let retry = 500, timer = null, connecting = false;
	function later(ms) {
		clearTimeout(timer);
		timer = setTimeout(connect, ms);
	}
	/* reconnect now unless live (the API key was just typed in) */
	function kick() {
		if (connState !== 'live' && !connecting) later(0);
	}
	async function connect() {
		connecting = true;
		connState = 'connecting';
		showConn();
		try {
			/* ?stats_ms=N on the page's URL sets the server's interval (tests use 100) */
			const ms = new URLSearchParams(location.search).get('stats_ms');
			const url = 'v1/stats/stream' + (ms && /^\d{1,5}$/.test(ms) ? '?interval_ms=' + ms : '');
			const resp = await fetch(url, { headers: ParticleSSE.authHeaders(), cache: 'no-store' });
			if (!resp.ok) {
				connState = resp.status === 401 ? 'needs API key' : 'stats: HTTP ' + resp.status;
				showConn();
				connecting = false;
				later(resp.status === 404 ? 30000 : 5000);
				return;
			}
			connState = 'live';
			connecting = false;
			showConn();
			retry = 500;
			await ParticleSSE.readSSE(resp, (data) => {
				try { update(JSON.parse(data)); } catch (e) { /* a bad event: skip it */ }
			});
		} catch (e) { /* connection lost */ }
		connState = 'offline';
		connecting = false;
		showConn();
		retry = Math.min(10000, retry * 2);
		later(retry);
	}

	window.ParticleStats = { showConn, last: () => last, drawHeat, kick };
	$('heat').addEventListener('mousemove', heatTip);
	window.addEventListener('resize', () => {
		if (!last) return;
		plot($('plot-tps'), hist.tps, null, css('--accent'), 'decode tok/s');
		plot($('plot-hit'), hist.hit, 1, '#3fb950', 'hit rate');
		if (last.heat) drawHeat(last.heat);
	});
	connect();
})();
