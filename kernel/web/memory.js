// SOUL.md, USER.md and memory/MEMORY.md: read, edited and saved (the gateway writes the file
// atomically, like an editor); below, the memory repository's log, each change's diff, and
// restore.
import { el, errorBox, getJson, send } from './api.js';

export async function memoryView(main) {
  try {
    const { files } = await getJson('/api/memory');
    const editors = files.map(editor);
    const history = el('section', { id: 'memory-log' }, el('h2', {}, 'History'), el('p', { class: 'muted' }, 'Loading…'));
    main.replaceChildren(el('h2', {}, 'Memory'), el('div', { class: 'editors' }, editors), history);
    showLog(history);
  } catch (error) {
    main.replaceChildren(errorBox(error));
  }
  return null;
}

function editor(file) {
  const id = 'memory-' + file.name.replace(/[^A-Za-z]/g, '-');
  const area = el('textarea', { id, rows: 10, spellcheck: 'false' });
  area.value = file.content ?? '';
  const note = el('span', { class: 'muted' }, file.content === null ? 'not created yet' : '');
  const save = el('button', { type: 'button', id: id + '-save' }, 'Save');
  save.addEventListener('click', async () => {
    save.disabled = true;
    try {
      await send('PUT', '/api/memory?name=' + encodeURIComponent(file.name), { content: area.value });
      note.textContent = 'saved';
      note.className = 'ok';
    } catch (error) {
      note.textContent = error.message;
      note.className = 'error';
    } finally {
      save.disabled = false;
    }
  });
  return el('section', { class: 'card editor' }, el('h3', {}, file.name), area, el('div', { class: 'buttons' }, note, save));
}

async function showLog(section) {
  try {
    const { commits } = await getJson('/api/memory/log');
    const list = el('ul', { class: 'list commits' }, commits.map(commit => {
      const diff = el('pre', { class: 'diff', hidden: true });
      const show = el('button', { type: 'button', class: 'secondary' }, 'Diff');
      const restore = el('button', { type: 'button', class: 'secondary' }, 'Restore before');
      show.addEventListener('click', async () => {
        if (!diff.hidden) { diff.hidden = true; return; }
        const shown = await getJson('/api/memory/diff?sha=' + commit.sha).catch(error => ({ diff: error.message }));
        diff.replaceChildren(...colouredDiff(shown.diff));
        diff.hidden = false;
      });
      restore.addEventListener('click', async () => {
        if (!confirm(`Put the memory files back as they were before "${commit.message}"?`)) return;
        try {
          await send('POST', '/api/memory/restore?sha=' + commit.sha);
          location.reload();
        } catch (error) {
          alert(error.message);
        }
      });
      return el('li', {}, el('div', { class: 'commit' },
        el('code', {}, commit.short), ' ', el('span', {}, commit.message), ' ', el('span', { class: 'muted' }, commit.time),
        el('span', { class: 'buttons' }, show, restore)), diff);
    }));
    section.replaceChildren(el('h2', {}, 'History'),
      commits.length ? list : el('p', { class: 'muted' }, 'No changes recorded yet.'));
  } catch (error) {
    section.replaceChildren(el('h2', {}, 'History'), errorBox(error));
  }
}

function colouredDiff(text) {
  return String(text || '').split('\n').map(line => {
    const kind = line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    return el('span', { class: kind }, line + '\n');
  });
}
