// Plugins and channels (state, pid, restarts, last error), refreshed every second, and
// token usage per day.
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
  const row = p => el('tr', { 'data-plugin': p.name, class: 'state-' + p.state },
    el('td', {}, p.name), el('td', {}, p.kind), el('td', { class: 'state' }, p.state), el('td', {}, p.pid ?? '—'),
    el('td', { class: 'restarts' }, String(p.restarts)), el('td', { class: 'reason' }, p.last_error || ''));
  const table = plugins => el('table', {},
    el('thead', {}, el('tr', {}, ['Name', 'Kind', 'State', 'PID', 'Restarts', 'Last error'].map(h => el('th', {}, h)))),
    el('tbody', {}, plugins.map(row)));
  const channels = status.plugins.filter(p => p.kind === 'channel');
  const tools = status.plugins.filter(p => p.kind !== 'channel');
  const usage = el('table', { id: 'usage' },
    el('thead', {}, el('tr', {}, ['Day (UTC)', 'Turns', 'Prompt', 'Cached', 'Completion', 'Cost'].map(h => el('th', {}, h)))),
    el('tbody', {}, status.usage.map(d => el('tr', {}, el('td', {}, d.day), el('td', {}, d.turns),
      el('td', {}, d.prompt), el('td', {}, d.cached), el('td', {}, d.completion),
      el('td', {}, d.cost === null || d.cost === undefined ? '—' : d.cost.toFixed(4))))));
  main.replaceChildren(
    el('h2', {}, 'Channels'), channels.length ? el('div', { class: 'scroll' }, table(channels)) : el('p', { class: 'muted' }, 'No channel is enabled.'),
    el('h2', {}, 'Plugins'), el('div', { class: 'scroll', id: 'plugins' }, table(tools)),
    el('h2', {}, 'Token usage'), status.usage.length ? el('div', { class: 'scroll' }, usage) : el('p', { class: 'muted' }, 'No turns in the last two weeks.'));
}
