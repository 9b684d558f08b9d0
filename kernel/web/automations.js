// Scheduled jobs: schedule, next run, last status and run history; pause or resume, run now,
// remove.
import { el, errorBox, getJson, send } from './api.js';

export async function automationsView(main) {
  await render(main);
  return null;
}

async function render(main) {
  try {
    const data = await getJson('/api/cron');
    const jobs = data.jobs.map(job => card(main, job, data.scheduled_here));
    const note = data.scheduled_here ? [] : [el('p', { class: 'muted' }, 'Another oxibot process runs these jobs; Run now is not available here.')];
    main.replaceChildren(el('h2', {}, 'Automations'), ...note,
      jobs.length ? el('div', { id: 'jobs', class: 'cards' }, jobs)
        : el('p', { class: 'muted' }, 'No scheduled jobs. Ask the assistant to remind you of something, or use oxibot cron add.'));
  } catch (error) {
    main.replaceChildren(errorBox(error));
  }
}

function describe(schedule) {
  if (!schedule) return '';
  if (schedule.kind === 'every') return `every ${Math.round((schedule.everyMs || 0) / 1000)} s`;
  if (schedule.kind === 'at') return `once at ${when(schedule.atMs)}`;
  return `${schedule.expr || ''}${schedule.tz ? ' (' + schedule.tz + ')' : ''}`;
}

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : '—';
}

function card(main, job, scheduledHere) {
  const state = job.state || {};
  const action = (label, method, path, extra = {}) => {
    const button = el('button', { type: 'button', class: 'secondary', ...extra }, label);
    button.addEventListener('click', async () => {
      if (label === 'Remove' && !confirm(`Remove the job "${job.name}"?`)) return;
      try {
        await send(method, `${path}?id=${encodeURIComponent(job.id)}`);
      } catch (error) {
        alert(error.message);
      }
      render(main);
    });
    return button;
  };
  const history = (state.runHistory || []).slice().reverse().map(run =>
    el('li', {}, when(run.runAtMs), ' · ', el('span', { class: run.status === 'ok' ? 'ok' : 'error' }, run.status),
      run.error ? ` · ${run.error}` : ''));
  return el('section', { class: 'card job', 'data-id': job.id },
    el('h3', {}, job.name || job.id, job.enabled ? '' : el('span', { class: 'badge' }, 'paused')),
    el('p', { class: 'muted' }, describe(job.schedule)),
    el('p', {}, job.payload?.message || ''),
    el('dl', {},
      el('dt', {}, 'Replies to'), el('dd', {}, job.replies_to || '—'),
      el('dt', {}, 'Next run'), el('dd', {}, job.enabled ? when(state.nextRunAtMs) : '—'),
      el('dt', {}, 'Last status'), el('dd', {}, state.lastStatus || 'never run', state.lastError ? ` (${state.lastError})` : '')),
    history.length ? el('details', {}, el('summary', {}, `Run history (${history.length})`), el('ul', {}, history)) : null,
    el('div', { class: 'buttons' },
      job.enabled ? action('Pause', 'POST', '/api/cron/pause') : action('Resume', 'POST', '/api/cron/resume'),
      action('Run now', 'POST', '/api/cron/run', { disabled: !scheduledHere }),
      action('Remove', 'DELETE', '/api/cron')));
}
