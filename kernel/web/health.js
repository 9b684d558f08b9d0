// Plugins and channels (state, pid, restarts, last error), refreshed every second, and
// token usage per day. Each cell carries its column's name (`data-label`), so on a phone the
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
    el('h2', {}, 'Token usage'), status.usage.length ? el('div', { class: 'scroll' }, usage) : el('p', { class: 'muted' }, 'No turns in the last two weeks.'));
}
