// The page's shell: one view at a time, chosen by the URL's #fragment.
import { el } from './api.js';
import { chatView } from './chat.js';
import { sessionsView } from './sessions.js';
import { memoryView } from './memory.js';
import { automationsView } from './automations.js';
import { healthView } from './health.js';

const views = {
  chat: chatView,
  sessions: sessionsView,
  memory: memoryView,
  automations: automationsView,
  health: healthView,
};

let leave = null;

async function show() {
  const [name, ...rest] = (location.hash.slice(1) || 'chat').split('/');
  const view = views[name] || views.chat;
  for (const link of document.querySelectorAll('#nav a')) {
    link.classList.toggle('active', link.dataset.view === name);
  }
  if (leave) leave();
  leave = null;
  const main = document.getElementById('view');
  main.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
  main.dataset.view = name;
  const argument = rest.length ? decodeURIComponent(rest.join('/')) : null;
  leave = await view(main, argument);
}

window.addEventListener('hashchange', show);
show();
