// Plugins and channels (state, pid, restarts, last error), refreshed every second, and
// token usage per day, as a bar chart (inline SVG, prompt and completion tokens stacked) over
// the table. Each cell carries its column's name (`data-label`), so on a phone the
// tables stack into one block per row instead of running off screen.
import { el, errorBox, getJson } from './api.js';

export async function healthView(main) {
  let timer = null;
  let stopped = false;
  const refresh = async () => {
    try {
      const status = await getJson('/api/status');
      if (!stopped) render(main, status);
    } catch (error) {
      if (!stopped) main.replaceChildren(errorBox(error));
    }
    if (!stopped) timer = setTimeout(refresh, 1000);
  };
  await refresh();
  return () => { stopped = true; clearTimeout(timer); };
}

function render(main, status) {
  const cell = (label, value, attributes = {}) => el('td', { 'data-label': label, ...attributes }, value);
  const row = p => el('tr', { 'data-plugin': p.name, class: 'state-' + p.state },
    cell('Name', p.name), cell('Kind', p.kind), cell('State', p.state, { class: 'state' }), cell('PID', p.pid ?? '—'),
    cell('Restarts', String(p.restarts), { class: 'restarts' }), cell('Last error', p.last_error || '', { class: 'reason' }));
  const table = plugins => el('table', { class: 'stack' },
    el('thead', {}, el('tr', {}, ['Name', 'Kind', 'State', 'PID', 'Restarts', 'Last error'].map(h => el('th', {}, h)))),
    el('tbody', {}, plugins.map(row)));
  const usageHeads = ['Day (UTC)', 'Turns', 'Prompt', 'Cached', 'Completion', 'Cost'];
  const channels = status.plugins.filter(p => p.kind === 'channel');
  const tools = status.plugins.filter(p => p.kind !== 'channel');
  const usage = el('table', { id: 'usage', class: 'stack' },
    el('thead', {}, el('tr', {}, usageHeads.map(h => el('th', {}, h)))),
    el('tbody', {}, status.usage.map(d => el('tr', {},
      [d.day, d.turns, d.prompt, d.cached, d.completion, d.cost === null || d.cost === undefined ? '—' : d.cost.toFixed(4)]
        .map((value, n) => cell(usageHeads[n], value))))));
  main.replaceChildren(
    el('h2', {}, 'Channels'), channels.length ? el('div', { class: 'scroll' }, table(channels)) : el('p', { class: 'muted' }, 'No channel is enabled.'),
    el('h2', {}, 'Plugins'), el('div', { class: 'scroll', id: 'plugins' }, table(tools)),
    el('h2', {}, 'Token usage'),
    ...(status.usage.length ? [usageChart(status.usage), el('div', { class: 'scroll' }, usage)] : [el('p', { class: 'muted' }, 'No turns in the last two weeks.')]));
}

const SVG = 'http://www.w3.org/2000/svg';

// An SVG element; every value is an attribute, every child a node or text.
function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

// Tokens per day, oldest on the left: prompt tokens below, completion tokens stacked on top;
// each bar's title gives the numbers (and the cost when known).
function usageChart(days) {
  const width = 600, height = 160, top = 16, bottom = 20;
  const ordered = [...days].sort((a, b) => a.day.localeCompare(b.day));
  const most = Math.max(1, ...ordered.map(d => d.prompt + d.completion));
  const slot = width / Math.max(ordered.length, 7);
  const scale = value => (value / most) * (height - top - bottom);
  const bars = ordered.map((d, n) => {
    const x = n * slot + slot * 0.15, w = slot * 0.7;
    const prompt = scale(d.prompt), completion = scale(d.completion);
    const base = height - bottom;
    const cost = d.cost === null || d.cost === undefined ? '' : `, cost ${d.cost.toFixed(4)}`;
    return svg('g', { class: 'bar' },
      svg('title', {}, `${d.day}: ${d.turns} turns, ${d.prompt} prompt + ${d.completion} completion tokens${cost}`),
      svg('rect', { class: 'prompt', x, y: base - prompt, width: w, height: prompt }),
      svg('rect', { class: 'completion', x, y: base - prompt - completion, width: w, height: completion }),
      svg('text', { x: x + w / 2, y: height - 5, 'text-anchor': 'middle' }, d.day.slice(5)));
  });
  return el('figure', { class: 'chart' },
    svg('svg', { id: 'usage-chart', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'Tokens per day' },
      svg('text', { x: 0, y: 11 }, `${most} tokens`), bars),
    el('figcaption', { class: 'muted' }, el('span', { class: 'key prompt' }), ' prompt ', el('span', { class: 'key completion' }), ' completion tokens per day (UTC)'));
}
