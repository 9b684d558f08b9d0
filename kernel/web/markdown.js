// A small Markdown renderer that builds DOM nodes and never parses HTML: every piece of text
// becomes a text node, so a model's `<script>` shows as the characters it is. Covers what
// chat replies use: paragraphs, headings, fenced code, lists nested by indentation (ordered
// inside unordered and the other way round), GFM tables, quotes, rules, and inline code,
// bold, italics and links (http, https and mailto only).
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
    if (ITEM.test(line)) {
      const [list, next] = parseList(lines, i);
      fragment.append(list);
      i = next;
      continue;
    }
    if (isTableStart(lines, i)) {
      const [table, next] = parseTable(lines, i);
      fragment.append(table);
      i = next;
      continue;
    }
    const paragraph = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*```|\s*~~~|\s*>)/.test(lines[i]) && !ITEM.test(lines[i]) && !isTableStart(lines, i)) {
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

// A list item: its indentation, its marker and its text.
const ITEM = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;
// How much deeper than its parent's marker a nested list's marker is indented, at least.
const NESTING = 2;

const indentOf = line => line.match(/^\s*/)[0].replace(/\t/g, '    ').length;

// The list starting at lines[start]; a deeper-indented item opens a list inside the item
// above it, a shallower one or one of the other kind (bullets, numbers) ends this list.
// Returns the list and the index of the first line after it.
function parseList(lines, start) {
  const first = lines[start].match(ITEM);
  const base = indentOf(lines[start]);
  const ordered = /\d/.test(first[2]);
  const list = el(ordered ? 'ol' : 'ul', ordered && parseInt(first[2], 10) !== 1 ? { start: parseInt(first[2], 10) } : {});
  let item = null;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      let next = i + 1;
      while (next < lines.length && !lines[next].trim()) next++;
      if (next < lines.length && (ITEM.test(lines[next]) ? indentOf(lines[next]) >= base : indentOf(lines[next]) > base)) { i = next; continue; }
      break;
    }
    const indent = indentOf(line);
    const match = line.match(ITEM);
    if (match && indent >= base + NESTING && item) {
      const [nested, next] = parseList(lines, i);
      item.append(nested);
      i = next;
      continue;
    }
    if (match && indent >= base - 1) {
      if (/\d/.test(match[2]) !== ordered) break;
      item = el('li', {}, inline(match[3]));
      list.append(item);
      i++;
      continue;
    }
    if (!match && indent > base && item) {
      item.append(' ', inline(line.trim()));
      i++;
      continue;
    }
    break;
  }
  return [list, i];
}

// The cells of one table row: outer pipes dropped, split on pipes not escaped as `\|`.
function cells(line) {
  const row = line.trim().replace(/^\|/, '').replace(/(^|[^\\])\|$/, '$1');
  return row.split(/(?<!\\)\|/).map(cell => cell.trim().replace(/\\\|/g, '|'));
}

const DELIMITER = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

// A GFM table: a row with a pipe, then a delimiter row (`---|:--:`) with as many cells.
function isTableStart(lines, i) {
  return i + 1 < lines.length && lines[i].includes('|') && DELIMITER.test(lines[i + 1])
    && cells(lines[i]).length === cells(lines[i + 1]).length;
}

function parseTable(lines, start) {
  const aligns = cells(lines[start + 1]).map(d => (d.startsWith(':') && d.endsWith(':') ? 'center' : d.endsWith(':') ? 'right' : d.startsWith(':') ? 'left' : null));
  const cell = (tag, text, n) => el(tag, aligns[n] ? { class: `align-${aligns[n]}` } : {}, inline(text));
  const row = (tag, line) => el('tr', {}, aligns.map((_, n) => cell(tag, cells(line)[n] ?? '', n)));
  const body = [];
  let i = start + 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes('|')) body.push(row('td', lines[i++]));
  const table = el('table', { class: 'md-table' }, el('thead', {}, row('th', lines[start])), body.length ? el('tbody', {}, body) : null);
  return [el('div', { class: 'scroll' }, table), i];
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
