/* md.js - a small, SAFE Markdown renderer for untrusted model output.
 *
 * It never parses HTML: every piece of text becomes a DOM text node (createTextNode /
 * textContent), and the only elements created are the fixed set below.  Links are kept only
 * for http: and https: URLs (anything else stays text) and open with rel=noopener.
 * Supported: fenced code blocks (``` or ~~~, with a language label), indented code is NOT
 * treated specially (models rarely mean it), headings (#), block quotes (>), unordered (- * +)
 * and ordered (1.) lists (one level of nesting by indentation), horizontal rules, paragraphs
 * (single newlines become <br>); inline code, **bold**, *italic* / _italic_, ~~strike~~,
 * [text](http...) and bare http(s) URLs.  Half-finished input (a stream in progress) renders
 * as well as it can: an open code fence runs to the end. */
'use strict';

(function (global) {
	const MAX_DEPTH = 8; /* nested quotes/lists: deeper input stays plain text */

	function el(tag, cls) {
		const e = document.createElement(tag);
		if (cls) e.className = cls;
		return e;
	}

	function safeUrl(s) {
		try {
			const u = new URL(s);
			if (u.protocol === 'http:' || u.protocol === 'https:') return u.href;
		} catch (e) { /* not a URL */ }
		return null;
	}

	function link(text, url, parent) {
		const a = el('a');
		a.href = url;
		a.rel = 'noopener noreferrer nofollow';
		a.target = '_blank';
		a.textContent = text;
		parent.appendChild(a);
	}

	/* Bare URLs inside plain text. */
	function textWithUrls(s, parent) {
		const re = /\bhttps?:\/\/[^\s<>"'`]+[^\s<>"'`.,;:!?)\]]/g;
		let last = 0, m;
		while ((m = re.exec(s)) !== null) {
			const url = safeUrl(m[0]);
			if (!url) continue;
			if (m.index > last) parent.appendChild(document.createTextNode(s.slice(last, m.index)));
			link(m[0], url, parent);
			last = m.index + m[0].length;
		}
		if (last < s.length) parent.appendChild(document.createTextNode(s.slice(last)));
	}

	/* Inline spans: code first (its content is literal), then links, then emphasis. */
	function inline(s, parent, depth) {
		depth = depth || 0;
		if (depth > MAX_DEPTH) {
			parent.appendChild(document.createTextNode(s));
			return;
		}
		const re = /(`+)([\s\S]*?[^`])\1(?!`)|\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)|\*\*([^*\n][\s\S]*?)\*\*|(?<![\w\\])__([^_\n][\s\S]*?)__(?!\w)|~~([^~\n][\s\S]*?)~~|\*([^*\s](?:[^*\n]*[^*\s])?)\*|(?:^|(?<=[\s(]))_([^_\s](?:[^_\n]*[^_\s])?)_(?=$|[\s.,;:!?)])/g;
		let last = 0, m;
		while ((m = re.exec(s)) !== null) {
			if (m.index > last) textWithUrls(s.slice(last, m.index), parent);
			if (m[1] !== undefined) {
				const c = el('code');
				c.textContent = m[2].replace(/^ (.*) $/s, '$1');
				parent.appendChild(c);
			} else if (m[3] !== undefined) {
				const url = safeUrl(m[4]);
				if (url) link(m[3], url, parent);
				else parent.appendChild(document.createTextNode(m[0]));
			} else {
				const tag = m[5] !== undefined || m[6] !== undefined ? 'strong'
					: m[7] !== undefined ? 's' : 'em';
				const inner = m[5] ?? m[6] ?? m[7] ?? m[8] ?? m[9];
				const e = el(tag);
				inline(inner, e, depth + 1);
				parent.appendChild(e);
			}
			last = m.index + m[0].length;
		}
		if (last < s.length) textWithUrls(s.slice(last), parent);
	}

	/* Paragraph text: inline spans, single newlines as <br>. */
	function para(lines, parent, tag) {
		const p = el(tag || 'p');
		inline(lines.join('\n'), p);
		/* split text nodes on newlines into <br> (text nodes only: code keeps its newlines) */
		const walk = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
		const nodes = [];
		while (walk.nextNode()) nodes.push(walk.currentNode);
		for (const n of nodes) {
			if (n.parentNode.nodeName === 'CODE' || n.nodeValue.indexOf('\n') < 0) continue;
			const parts = n.nodeValue.split('\n');
			const frag = document.createDocumentFragment();
			parts.forEach((t, i) => {
				if (i) frag.appendChild(el('br'));
				if (t) frag.appendChild(document.createTextNode(t));
			});
			n.parentNode.replaceChild(frag, n);
		}
		parent.appendChild(p);
	}

	const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
	const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
	const HR = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
	const QUOTE = /^ {0,3}> ?(.*)$/;
	const LIST = /^( {0,6})([-*+]|\d{1,9}[.)])\s+(.*)$/;

	function blocks(lines, parent, depth) {
		let i = 0;
		const para_buf = [];
		const flush = () => {
			if (para_buf.length) para(para_buf.splice(0), parent);
		};
		while (i < lines.length) {
			const line = lines[i];
			let m;
			if ((m = FENCE.exec(line))) {
				flush();
				const fence = m[1], lang = m[2];
				const body = [];
				i++;
				const close = new RegExp('^ {0,3}' + (fence[0] === '`' ? '`' : '~') + '{' +
							 fence.length + ',}\\s*$');
				while (i < lines.length && !close.test(lines[i])) {
					body.push(lines[i]);
					i++;
				}
				i++; /* the closing fence (or past the end) */
				const wrap = el('div', 'code');
				const bar = el('div', 'code-bar');
				const label = el('span');
				label.textContent = lang || 'text';
				const copy = el('button', 'copy-code');
				copy.type = 'button';
				copy.textContent = 'copy';
				copy.dataset.action = 'copy-code';
				bar.append(label, copy);
				const pre = el('pre');
				const code = el('code');
				code.textContent = body.join('\n');
				pre.appendChild(code);
				wrap.append(bar, pre);
				parent.appendChild(wrap);
				continue;
			}
			if (line.trim() === '') {
				flush();
				i++;
				continue;
			}
			if ((m = HEADING.exec(line))) {
				flush();
				const h = el('h' + Math.min(6, m[1].length + 2)); /* h3..h6: chat scale */
				inline(m[2], h);
				parent.appendChild(h);
				i++;
				continue;
			}
			if (HR.test(line) && !para_buf.length) {
				parent.appendChild(el('hr'));
				i++;
				continue;
			}
			if (QUOTE.test(line) && depth < MAX_DEPTH) {
				flush();
				const q = [];
				while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
					q.push(m[1]);
					i++;
				}
				const bq = el('blockquote');
				blocks(q, bq, depth + 1);
				parent.appendChild(bq);
				continue;
			}
			if ((m = LIST.exec(line)) && depth < MAX_DEPTH) {
				flush();
				i = list(lines, i, parent, depth);
				continue;
			}
			para_buf.push(line);
			i++;
		}
		flush();
	}

	/* A list from lines[i]: items at the first item's indentation; deeper lines belong to
	 * the item (rendered as nested blocks). */
	function list(lines, i, parent, depth) {
		const first = LIST.exec(lines[i]);
		const indent = first[1].length;
		const ordered = /\d/.test(first[2]);
		const L = el(ordered ? 'ol' : 'ul');
		if (ordered) {
			const start = parseInt(first[2], 10);
			if (start !== 1 && start < 1e9) L.start = start;
		}
		while (i < lines.length) {
			const m = LIST.exec(lines[i]);
			if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
			const item = [m[3]];
			i++;
			while (i < lines.length) {
				const n = LIST.exec(lines[i]);
				if (n && n[1].length <= indent) break;
				if (lines[i].trim() === '' && (i + 1 >= lines.length || !/^\s+\S/.test(lines[i + 1]))) break;
				item.push(lines[i].replace(new RegExp('^ {0,' + (indent + 4) + '}'), ''));
				i++;
			}
			const li = el('li');
			if (item.length === 1) inline(item[0], li);
			else blocks(item, li, depth + 1);
			L.appendChild(li);
			while (i < lines.length && lines[i].trim() === '' && i + 1 < lines.length &&
			       LIST.test(lines[i + 1]) && LIST.exec(lines[i + 1])[1].length === indent) i++;
		}
		parent.appendChild(L);
		return i;
	}

	/* Renders text into a fresh <div class="md"> and returns it. */
	function render(text) {
		const root = el('div', 'md');
		blocks(String(text).replace(/\r\n?/g, '\n').split('\n'), root, 0);
		return root;
	}

	global.ParticleMd = { render, safeUrl };
})(window);
