// A small Markdown renderer that builds DOM nodes and never parses HTML: every piece of text
// becomes a text node, so a model's `<script>` shows as the characters it is. Covers what
// chat replies use: paragraphs, headings, fenced code, lists, quotes, rules, and inline
// code, bold, italics and links (http, https and mailto only).
import { el } from './api.js';

export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      fragment.append(el('pre', {}, el('code', fence[2] ? { 'data-lang': fence[2] } : {}, body.join('\n'))));
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      fragment.append(el(`h${Math.min(heading[1].length + 2, 6)}`, {}, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { fragment.append(el('hr')); i++; continue; }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ''));
      fragment.append(el('blockquote', {}, renderMarkdown(quoted.join('\n'))));
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? 'ol' : 'ul');
      while (i < lines.length && item.test(lines[i])) {
        let content = lines[i++].replace(item, '');
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i])) content += ' ' + lines[i++].trim();
        list.append(el('li', {}, inline(content)));
      }
      fragment.append(list);
      continue;
    }
    const paragraph = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*```|\s*~~~|\s*>)/.test(lines[i]) && !item.test(lines[i])) {
      paragraph.push(lines[i++]);
    }
    const p = el('p');
    paragraph.forEach((text, n) => {
      if (n) p.append(el('br'));
      p.append(inline(text));
    });
    fragment.append(p);
  }
  return fragment;
}

// Inline spans: `code`, **bold**, *italic* / _italic_, [text](url).
const INLINE = /(`+)([^`]+?)\1|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)/;

export function inline(text) {
  const fragment = document.createDocumentFragment();
  let rest = String(text);
  while (rest) {
    const match = rest.match(INLINE);
    if (!match) { fragment.append(document.createTextNode(rest)); break; }
    if (match.index) fragment.append(document.createTextNode(rest.slice(0, match.index)));
    if (match[2] !== undefined) fragment.append(el('code', {}, match[2]));
    else if (match[3] !== undefined || match[4] !== undefined) fragment.append(el('strong', {}, inline(match[3] ?? match[4])));
    else if (match[5] !== undefined || match[6] !== undefined) fragment.append(el('em', {}, inline(match[5] ?? match[6])));
    else fragment.append(link(match[7], match[8]));
    rest = rest.slice(match.index + match[0].length);
  }
  return fragment;
}

function link(label, href) {
  let url = null;
  try { url = new URL(href, location.href); } catch { url = null; }
  if (!url || !['http:', 'https:', 'mailto:'].includes(url.protocol)) return document.createTextNode(`[${label}](${href})`);
  return el('a', { href: url.href, target: '_blank', rel: 'noopener noreferrer' }, inline(label));
}
