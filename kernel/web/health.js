// Plugins and channels (state, pid, restarts, last error), refreshed every second; token
// usage per day, as a bar chart (inline SVG, prompt and completion tokens stacked) over the
// table; then small charts, all inline SVG without a library: tokens per source per day (with
// each source's calls, cache hit rate, reasoning tokens and cost in a table under it),
// cost per day (when the config prices the models), latency per turn, restarts per plugin,
// and each session's context fill as a bar; in cluster mode, the cluster first. Each cell
// carries its column's name (`data-label`), so on a phone the tables stack into one block per
// row instead of running off screen.
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
    ...(status.cluster ? [el('h2', {}, 'Cluster'), clusterTable(status.cluster, cell)] : []),
    el('h2', {}, 'Channels'), channels.length ? el('div', { class: 'scroll' }, table(channels)) : el('p', { class: 'muted' }, 'No channel is enabled.'),
    el('h2', {}, 'Plugins'), el('div', { class: 'scroll', id: 'plugins' }, table(tools)),
    el('h2', {}, 'Plugin restarts'), restartsChart(status.plugins),
    el('h2', {}, 'Token usage'),
    ...(status.usage.length ? [usageChart(status.usage), el('div', { class: 'scroll' }, usage)] : [el('p', { class: 'muted' }, 'No turns in the last two weeks.')]),
    ...(status.sources?.length ? [el('h2', {}, 'Tokens by source'), sourceChart(status.sources), sourceTotals(status.sources)] : []),
    ...(status.usage.some(d => typeof d.cost === 'number') ? [el('h2', {}, 'Cost'), costChart(status.usage)] : []),
    ...(status.turns?.length ? [el('h2', {}, 'Latency per turn'), latencyChart(status.turns)] : []),
    ...(status.contexts?.length ? [el('h2', {}, 'Context fill'), contextBars(status.contexts)] : []));
}

// Cluster mode: this node, the NATS servers and the connection, the kernel that runs the cron
// jobs, the sessions this node owns, the kernel that runs each channel, and every node of the
// cluster with how many sessions it owns.
function clusterTable(cluster, cell) {
  const heads = ['Node', 'NATS', 'Connection', 'Scheduler', 'Sessions owned', 'Channels', 'Nodes'];
  const sessions = cluster.sessions.length ? `${cluster.sessions.length}: ${cluster.sessions.join(', ')}` : '0';
  const channels = Object.entries(cluster.channels ?? {}).map(([name, node]) => `${name} on ${node ?? 'no kernel yet'}`);
  const nodes = (cluster.nodes ?? []).map(n => `${n.node} (${n.sessions} session${n.sessions === 1 ? '' : 's'})`);
  const values = [cluster.node, cluster.nats, cluster.connection, cluster.scheduler ?? 'nobody yet', sessions,
    channels.join(', ') || 'none', nodes.join(', ') || 'none seen yet'];
  return el('div', { class: 'scroll' }, el('table', { id: 'cluster', class: 'stack' },
    el('thead', {}, el('tr', {}, heads.map(h => el('th', {}, h)))),
    el('tbody', {}, el('tr', { class: 'state-' + cluster.connection }, values.map((value, n) => cell(heads[n], value))))));
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

// What spends tokens, each in its own colour, stacked in this order.
const SOURCES = ['user', 'cron', 'heartbeat', 'subagent', 'system', 'dream:analysis', 'dream:edit', 'consolidation',
  'memory_flush', 'embedding'];
const SOURCE_COLOURS = { user: '#3b7d6a', cron: '#d08c3f', heartbeat: '#b45f9e', subagent: '#5f8fb4', system: '#8fb8aa',
  'dream:analysis': '#7a6fc4', 'dream:edit': '#a99de0', consolidation: '#c4a13b', memory_flush: '#8a7d5a', embedding: '#6c9a3f' };
// A phase without a colour of its own takes its source's (`dream:x` is Dream's).
const colourOf = source => SOURCE_COLOURS[source] || SOURCE_COLOURS[source.split(':')[0] + ':analysis'] || '#999';

// Vertical bars of stacked parts over a baseline: `bars` are { label, title, parts: [{ value,
// fill }] }; the tallest bar fills the height; `top` says what the tallest stands for.
function bars(id, label, items, top) {
  const width = 600, height = 130, head = 16, foot = 18;
  const most = Math.max(1e-9, ...items.map(b => b.parts.reduce((sum, p) => sum + p.value, 0)));
  const slot = width / Math.max(items.length, 7);
  const scale = value => (value / most) * (height - head - foot);
  const every = Math.ceil(items.length / 12);
  const drawn = items.map((b, n) => {
    const x = n * slot + slot * 0.15, w = Math.max(1, slot * 0.7);
    let y = height - foot;
    const rects = b.parts.map(p => {
      const h = scale(p.value);
      y -= h;
      return svg('rect', { x, y, width: w, height: h, fill: p.fill });
    });
    const text = n % every === 0 && b.label ? [svg('text', { x: x + w / 2, y: height - 5, 'text-anchor': 'middle' }, b.label)] : [];
    return svg('g', { class: 'bar' }, svg('title', {}, b.title), rects, text);
  });
  return svg('svg', { id, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label },
    svg('text', { x: 0, y: 11 }, top(most)), drawn);
}

function figure(chart, ...caption) {
  return el('figure', { class: 'chart' }, chart, el('figcaption', { class: 'muted' }, caption.flat()));
}

// Tokens per source per day, oldest on the left, sources stacked; the caption is the legend.
function sourceChart(rows) {
  const days = [...new Set(rows.map(r => r.day))].sort();
  const seen = [...new Set(rows.map(r => r.source))].sort((a, b) => rank(a) - rank(b));
  const items = days.map(day => {
    const today = rows.filter(r => r.day === day).sort((a, b) => rank(a.source) - rank(b.source));
    const title = today.map(r => `${r.source} ${r.prompt + r.completion} (${r.prompt ? Math.round(100 * r.cached / r.prompt) : 0}% cached)`).join(', ');
    return { label: day.slice(5), title: `${day}: ${title}`, parts: today.map(r => ({ value: r.prompt + r.completion, fill: colourOf(r.source) })) };
  });
  // A swatch is an SVG square: the page's policy allows no inline style.
  const swatch = source => svg('svg', { class: 'swatch', 'data-source': source, width: 10, height: 10, viewBox: '0 0 10 10' },
    svg('rect', { width: 10, height: 10, rx: 2, fill: colourOf(source) }));
  const legend = seen.flatMap(source => [swatch(source), ` ${source} `]);
  return figure(bars('sources-chart', 'Tokens per source per day', items, most => `${Math.round(most)} tokens`), legend, ' tokens per day (UTC)');
}

// Each source's sums over the days shown: calls, tokens, the prompt-cache hit rate (the
// cheapest saving), reasoning tokens, cost and the mean time of a model call.
function sourceTotals(rows) {
  const sums = new Map();
  for (const r of rows) {
    const s = sums.get(r.source) || { calls: 0, prompt: 0, cached: 0, completion: 0, reasoning: 0, cost: 0, priced: true, ms: 0, timed: 0 };
    s.calls += r.calls || 0; s.prompt += r.prompt; s.cached += r.cached; s.completion += r.completion;
    s.reasoning += r.reasoning || 0; s.ms += r.call_ms || 0; s.timed += r.timed_calls || 0;
    if (typeof r.cost === 'number') s.cost += r.cost; else s.priced = false;
    sums.set(r.source, s);
  }
  const heads = ['Source', 'Calls', 'Tokens', 'Cache hits', 'Reasoning', 'Cost', 'Time per call'];
  const cell = (n, value) => el('td', { 'data-label': heads[n] }, String(value));
  const body = [...sums.entries()].sort((a, b) => rank(a[0]) - rank(b[0])).map(([source, s]) => el('tr', { 'data-source': source },
    [source, s.calls, s.prompt + s.completion, s.prompt ? `${Math.round((100 * s.cached) / s.prompt)}%` : '—', s.reasoning,
      s.priced ? s.cost.toFixed(4) : '—', s.timed ? `${Math.round(s.ms / s.timed)} ms` : '—'].map((value, n) => cell(n, value))));
  return el('div', { class: 'scroll' }, el('table', { id: 'source-totals', class: 'stack' },
    el('thead', {}, el('tr', {}, heads.map(h => el('th', {}, h)))), el('tbody', {}, body)));
}

function rank(source) {
  const n = SOURCES.indexOf(source);
  return n < 0 ? SOURCES.length : n;
}

// The cost of each day, in the prices' currency.
function costChart(days) {
  const ordered = [...days].sort((a, b) => a.day.localeCompare(b.day));
  const items = ordered.map(d => ({ label: d.day.slice(5), title: `${d.day}: ${typeof d.cost === 'number' ? d.cost.toFixed(4) : 'unpriced'}`,
    parts: [{ value: d.cost || 0, fill: '#d08c3f' }] }));
  return figure(bars('cost-chart', 'Cost per day', items, most => most.toFixed(4)), 'cost per day (UTC), in the currency of agents.defaults.pricing');
}

// How long each of the latest turns took, oldest on the left, coloured by source.
function latencyChart(turns) {
  const items = turns.map(t => ({ label: '', title: `${t.at} ${t.session} (${t.source}): ${(t.ms / 1000).toFixed(1)} s`,
    parts: [{ value: t.ms / 1000, fill: colourOf(t.source) }] }));
  const slowest = Math.max(...turns.map(t => t.ms)) / 1000;
  const seconds = value => value < 1 ? `${Math.round(value * 1000)} ms` : `${value.toFixed(1)} s`;
  return figure(bars('latency-chart', 'Seconds per turn', items, seconds),
    `time per turn, the latest ${turns.length} (slowest ${seconds(slowest)})`);
}

// One bar per plugin: how often it restarted after dying (a meter, red once it has).
function restartsChart(plugins) {
  const most = Math.max(1, ...plugins.map(p => p.restarts));
  return meterRows('restarts-chart', plugins.map(p => ({
    key: { 'data-plugin': p.name }, name: p.name, value: p.restarts, max: most, low: 0.5, high: 0.5,
    title: `${p.name}: ${p.restarts} restart${p.restarts === 1 ? '' : 's'}`, text: String(p.restarts),
  })), 'restarts after dying, per plugin, since the gateway started');
}

// Rows of a name, a meter and a number; the caption says what they count.
function meterRows(id, rows, caption) {
  return el('div', { id, class: 'chart meters' }, rows.map(r => el('div', { class: 'meter-row', ...r.key },
    el('span', { class: 'meter-name' }, r.name),
    el('meter', { min: 0, max: r.max, low: r.low, high: r.high, optimum: 0, value: r.value, title: r.title }),
    el('span', { class: 'muted' }, r.text))), el('p', { class: 'muted caption' }, caption));
}

// Each session's prompt after its last turn against the context window, as a meter.
function contextBars(contexts) {
  return meterRows('contexts', contexts.map(c => ({
    key: { 'data-session': c.session }, name: c.session, value: c.tokens, max: c.window, low: c.window * 0.6,
    high: c.window * 0.85, title: `${c.tokens} of ${c.window} tokens`,
    text: `${Math.round((100 * c.tokens) / Math.max(1, c.window))}% of ${c.window}`,
  })), "each session's prompt after its last turn, against the model's context window");
}
