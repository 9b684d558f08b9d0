// The page's calls to the gateway's JSON API. State-changing calls carry the
// x-oxibot-request header the gateway requires against cross-site requests.

export async function getJson(path) {
  const response = await fetch(path, { credentials: 'same-origin' });
  return answer(response);
}

export async function send(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { 'x-oxibot-request': '1' } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  return answer(await fetch(path, init));
}

async function answer(response) {
  const value = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(value.error || `${response.status} ${response.statusText}`);
  return value;
}

// Creates an element with attributes and children; text children become text nodes, so no
// string is ever parsed as HTML.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function errorBox(error) {
  return el('p', { class: 'error' }, String(error.message || error));
}
