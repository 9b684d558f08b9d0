// Every session of every channel, last activity first; one opens as its transcript, with
// tool calls and tool results folded away in <details>, and next to each result that has one
// its audit line: who or what allowed (or refused) the call.
import { el, errorBox, getJson } from './api.js';
import { renderMarkdown } from './markdown.js';
import { markStopped, splitStopped } from './chat.js';

export async function sessionsView(main, key) {
  try {
    if (key) await showTranscript(main, key);
    else await showList(main);
  } catch (error) {
    main.replaceChildren(errorBox(error));
  }
  return null;
}

async function showList(main) {
  const { sessions } = await getJson('/api/sessions');
  const rows = sessions.map(s => el('li', { class: 'session' },
    el('a', { href: '#sessions/' + encodeURIComponent(s.key) },
      el('span', { class: 'key' }, s.key),
      el('span', { class: 'muted when' }, formatTime(s.updated_at), ' · ', `${s.messages} messages`),
      el('span', { class: 'preview' }, s.preview || ''))));
  main.replaceChildren(el('section', {},
    el('h2', {}, 'Sessions'),
    sessions.length ? el('ul', { id: 'session-list', class: 'list' }, rows) : el('p', { class: 'muted' }, 'No sessions yet.')));
}

async function showTranscript(main, key) {
  const transcript = await getJson('/api/session?key=' + encodeURIComponent(key));
  const items = [];
  for (const message of transcript.messages) {
    if (message.role === 'system') continue;
    if (message.role === 'tool') {
      if (message.audit) {
        items.push(el('p', { class: 'audit muted' }, `${message.name || 'a tool'}: ${message.audit}`));
      }
      items.push(el('details', { class: 'tool-result' },
        el('summary', {}, `result of ${message.name || 'a tool'}`), el('pre', {}, message.text)));
      continue;
    }
    const node = el('div', { class: `msg ${message.role}` });
    const { text, stopped } = message.role === 'assistant' ? splitStopped(message.text || '') : { text: message.text, stopped: false };
    if (text) {
      const body = el('div', { class: 'body' });
      if (message.role === 'assistant') body.append(renderMarkdown(text)); else body.textContent = text;
      node.append(body);
    }
    if (stopped) markStopped(node);
    for (const call of message.tool_calls) {
      node.append(el('details', { class: 'tool-call' },
        el('summary', {}, `called ${call.name}`), el('pre', {}, call.arguments || '')));
    }
    if (message.timestamp) node.append(el('div', { class: 'muted when' }, formatTime(message.timestamp)));
    items.push(node);
  }
  main.replaceChildren(el('section', {},
    el('p', {}, el('a', { href: '#sessions' }, '← all sessions')),
    el('h2', { id: 'transcript-key' }, key),
    el('div', { id: 'transcript', class: 'chat-log transcript' }, items)));
}

export function formatTime(text) {
  if (!text) return '';
  const date = new Date(text);
  return isNaN(date) ? text : date.toLocaleString();
}
