// The chat: the websocket channel's protocol through the gateway's /ws (the gateway adds the
// channel's token; the page never sees it). Replies stream in as `delta` frames and end with
// a `message` frame; tool hints show while tools run; Stop sends /stop (the reply streamed so
// far stays in its bubble, marked as stopped, as the session keeps it; the kernel's
// "Stopping." answer shows in the status line); New chat starts a fresh chat id (a new
// session).
import { el, getJson } from './api.js';
import { renderMarkdown } from './markdown.js';

const STORAGE_KEY = 'oxibot.chat';
// The final text the router sends for a stopped turn's stream.
const STOPPED_REPLY = '(stopped)';
// How the session ends a stopped turn's kept answer (the kernel's STOPPED_NOTE).
const STOPPED_NOTE = '(Stopped before finishing.)';
// The kernel's answers to `/stop` itself.
const STOP_ACK = /^(Stopping|Nothing is running)/;

// A stored assistant text split into what was written and whether the turn was stopped.
export function splitStopped(text) {
  const trimmed = String(text).trimEnd();
  if (!trimmed.endsWith(STOPPED_NOTE)) return { text, stopped: false };
  return { text: trimmed.slice(0, -STOPPED_NOTE.length).trimEnd(), stopped: true };
}

// Marks an assistant bubble as a stopped turn (the same in the live chat and after a reload).
export function markStopped(node) {
  node.classList.add('stopped');
  if (!node.querySelector('.stopped-note')) node.append(el('div', { class: 'stopped-note muted' }, '■ stopped before finishing'));
}

function freshChatId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return 'web-' + Array.from(bytes, b => b.toString(16).padStart(2, '0')).join('');
}

function currentChatId() {
  let id = localStorage.getItem(STORAGE_KEY);
  if (!id) {
    id = freshChatId();
    localStorage.setItem(STORAGE_KEY, id);
  }
  return id;
}

export async function chatView(main) {
  const info = await getJson('/api/info').catch(() => ({ chat: false }));
  if (!info.chat) {
    main.replaceChildren(el('section', { class: 'card' },
      el('h2', {}, 'Chat is off'),
      el('p', {}, 'The chat goes through the websocket channel. Set ', el('code', {}, 'channels.websocket.enabled'),
        ' to ', el('code', {}, 'true'), ' in the config: the running gateway starts the channel without a restart; then reload this page.')));
    return null;
  }
  const log = el('div', { id: 'chat-log', class: 'chat-log', 'aria-live': 'polite' });
  const input = el('textarea', { id: 'chat-input', rows: 2, placeholder: 'Message oxibot…' });
  const status = el('span', { id: 'chat-status', class: 'muted' }, 'connecting…');
  const sendButton = el('button', { id: 'chat-send', type: 'submit' }, 'Send');
  const stopButton = el('button', { id: 'chat-stop', type: 'button', class: 'secondary', hidden: true }, 'Stop');
  const newButton = el('button', { id: 'new-chat', type: 'button', class: 'secondary' }, 'New chat');
  const form = el('form', { class: 'composer' }, input, el('div', { class: 'buttons' }, stopButton, sendButton));
  main.replaceChildren(el('div', { class: 'chat' },
    el('div', { class: 'toolbar' }, status, newButton), log, form));

  let socket = null;
  let closed = false;
  let waiting = 0;
  let stopsSent = 0;
  const streams = new Map();
  let retry = null;

  const setWaiting = n => {
    waiting = Math.max(0, n);
    stopButton.hidden = waiting === 0;
  };
  const scroll = () => { log.scrollTop = log.scrollHeight; };
  const bubble = (role, text) => {
    const body = el('div', { class: 'body' });
    if (role.startsWith('assistant')) body.append(renderMarkdown(text)); else body.textContent = text;
    const node = el('div', { class: `msg ${role}` }, body);
    log.append(node);
    scroll();
    return node;
  };
  const streamBubble = id => {
    if (!streams.has(id)) streams.set(id, { node: bubble('assistant streaming', ''), text: '' });
    return streams.get(id);
  };

  async function loadHistory(chatId) {
    const transcript = await getJson('/api/session?key=' + encodeURIComponent('websocket:' + chatId)).catch(() => null);
    for (const message of transcript?.messages || []) {
      if (message.role === 'user' && message.text) bubble('user', message.text);
      if (message.role === 'assistant' && message.text) {
        const { text, stopped } = splitStopped(message.text);
        const node = bubble('assistant done', text);
        if (stopped) markStopped(node);
      }
    }
  }

  function connect() {
    const chatId = currentChatId();
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    socket = new WebSocket(`${scheme}://${location.host}/ws?chat_id=${encodeURIComponent(chatId)}`);
    const mine = socket;
    socket.onopen = () => { status.textContent = 'connected'; };
    socket.onclose = () => {
      if (closed || mine !== socket) return;
      status.textContent = 'disconnected; reconnecting…';
      retry = setTimeout(connect, 1000);
    };
    socket.onmessage = event => {
      let frame;
      try { frame = JSON.parse(event.data); } catch { return; }
      onFrame(frame);
    };
  }

  function onFrame(frame) {
    switch (frame.type) {
      case 'ready':
        status.textContent = 'connected';
        status.dataset.chat = frame.chat_id;
        break;
      case 'delta': {
        const stream = streamBubble(frame.stream_id);
        stream.text += frame.text;
        stream.node.dataset.deltas = String(Number(stream.node.dataset.deltas || 0) + 1);
        stream.node.querySelector('.body').replaceChildren(renderMarkdown(stream.text));
        scroll();
        break;
      }
      case 'tool_hint': {
        const stream = streamBubble(frame.stream_id);
        let hints = stream.node.querySelector('.hints');
        if (!hints) stream.node.prepend(hints = el('div', { class: 'hints' }));
        hints.append(el('div', { class: 'hint' }, '⚙ ', frame.text));
        scroll();
        break;
      }
      case 'message': {
        const stream = frame.stream_id !== undefined ? streams.get(frame.stream_id) : null;
        if (!stream && stopsSent > 0 && STOP_ACK.test(frame.text)) {
          stopsSent--;
          status.textContent = frame.text;
          break;
        }
        const node = stream ? stream.node : bubble('assistant', '');
        if (frame.text === STOPPED_REPLY) markStopped(node);
        else node.querySelector('.body').replaceChildren(renderMarkdown(frame.text));
        node.classList.remove('streaming');
        node.classList.add('done');
        if (stream) streams.delete(frame.stream_id);
        setWaiting(waiting - 1);
        scroll();
        break;
      }
      case 'approval': {
        // A tool call waits for a yes: the call as it will run, and one button per answer,
        // each sent as the text a person could type (the kernel checks who sent it).
        const box = el('div', { class: 'approval', role: 'dialog', 'data-code': frame.code },
          el('p', {}, `Approval needed: ${frame.tool}`), el('pre', {}, frame.shown));
        const buttons = el('div', { class: 'buttons' });
        for (const [label, answer] of [['Approve', `/approve ${frame.code}`], ['Always', `/approve ${frame.code} always`], ['Deny', `/deny ${frame.code}`]]) {
          const button = el('button', { type: 'button' }, label);
          button.addEventListener('click', () => {
            if (!send(answer)) return;
            setWaiting(waiting + 1);
            buttons.replaceChildren(el('span', {}, `${label} sent`));
          });
          buttons.append(button);
        }
        box.append(buttons);
        log.append(box);
        scroll();
        break;
      }
      case 'error':
        log.append(el('p', { class: 'error' }, frame.error));
        scroll();
        break;
      default:
        break;
    }
  }

  function send(text) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      log.append(el('p', { class: 'error' }, 'not connected yet; try again in a moment'));
      return false;
    }
    socket.send(JSON.stringify({ type: 'message', text }));
    return true;
  }

  form.addEventListener('submit', event => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || !send(text)) return;
    bubble('user', text);
    input.value = '';
    setWaiting(waiting + 1);
  });
  input.addEventListener('keydown', event => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener('click', () => {
    if (send('/stop')) stopsSent++;
  });
  newButton.addEventListener('click', () => {
    localStorage.setItem(STORAGE_KEY, freshChatId());
    log.replaceChildren();
    streams.clear();
    setWaiting(0);
    stopsSent = 0;
    const old = socket;
    socket = null;
    if (old) old.close();
    connect();
  });

  await loadHistory(currentChatId());
  connect();
  input.focus();
  return () => {
    closed = true;
    clearTimeout(retry);
    if (socket) socket.close();
  };
}
