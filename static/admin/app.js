// Switchyard status page: plain DOM, no framework. Everything from upstreams (names,
// descriptions, errors) is untrusted text, so it is only ever set with textContent.
'use strict';

const MAX_FEED_ROWS = 200;
const servers = new Map();
// With authentication on, the operator's credential, for this tab only. A browser cannot put
// it on a WebSocket, so the live feed opens with a one-use ticket asked for with it.
const KEY_ITEM = 'switchyard.adminCredential';
let credential = sessionStorage.getItem(KEY_ITEM);

/** The hub refused the credential (or there is none): the page asks for one. */
class CredentialNeeded extends Error {}

function authHeaders() {
  return credential ? { authorization: `Bearer ${credential}` } : {};
}

function refused(r) {
  if (r.status === 403) return new CredentialNeeded('This credential does not carry the switchyard:admin scope.');
  return new CredentialNeeded(credential ? 'The hub did not accept this credential.' : '');
}

function cell(text, cls) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '' : String(text);
  if (cls) td.className = cls;
  return td;
}

async function getJson(path) {
  const r = await fetch(path, { headers: { accept: 'application/json', ...authHeaders() } });
  if (r.status === 401 || r.status === 403) throw refused(r);
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

function renderServers() {
  const body = document.querySelector('#servers tbody');
  body.replaceChildren();
  for (const s of servers.values()) {
    const tr = document.createElement('tr');
    tr.dataset.server = s.id;
    tr.append(
      cell(s.id),
      cell(s.transport),
      cell(s.era ?? '—'),
      // An open circuit is why calls are refused while the process looks fine.
      cell(s.circuit && s.circuit !== 'closed' ? `${s.state} (circuit ${s.circuit})` : s.state, `state-${s.state}`),
      cell(s.tools ?? '—'),
      cell(s.inFlight === undefined ? '—' : s.queued ? `${s.inFlight} +${s.queued} queued` : s.inFlight),
      cell(s.restarts),
      cell(s.lastError ?? ''),
    );
    body.append(tr);
  }
}

function renderTools(tools) {
  const body = document.querySelector('#tools tbody');
  body.replaceChildren();
  for (const t of tools) {
    const tr = document.createElement('tr');
    const flags = document.createElement('td');
    for (const f of t.flags) {
      const span = document.createElement('span');
      span.className = `flag ${f.split(':')[0]}`;
      span.textContent = f;
      flags.append(span);
    }
    tr.append(cell(t.name), cell(t.server), cell(t.upstreamName), cell(t.trust), flags, cell(t.description ?? '', 'desc'));
    body.append(tr);
  }
  document.getElementById('tool-count').textContent = `(${tools.length} tools)`;
  // The catalog is the freshest count of each upstream's tools.
  const counts = new Map();
  for (const t of tools) counts.set(t.server, (counts.get(t.server) ?? 0) + 1);
  for (const s of servers.values()) if (s.state === 'ready') s.tools = counts.get(s.id) ?? 0;
  renderServers();
}

function addCall(e) {
  const body = document.querySelector('#feed tbody');
  const tr = document.createElement('tr');
  tr.className = 'fresh';
  tr.dataset.method = e.method;
  tr.append(
    cell(new Date(e.ts).toLocaleTimeString()),
    cell(e.method),
    cell(e.name ?? ''),
    cell(e.server ?? ''),
    cell(e.outcome, `outcome-${e.outcome}`),
    cell(Math.round(e.latencyMs * 10) / 10),
    cell(e.clientName ? `${e.clientName} (${e.clientEra})` : e.clientEra),
  );
  if (e.errorMessage) tr.title = e.errorMessage;
  body.prepend(tr);
  while (body.rows.length > MAX_FEED_ROWS) body.deleteRow(-1);
  document.getElementById('feed-empty').hidden = true;
}

/** How often the servers' calls in flight and queued are read again while the page is live. */
const LOAD_REFRESH_MS = 3000;

let toolTimer;
function refreshToolsSoon() {
  clearTimeout(toolTimer);
  toolTimer = setTimeout(() => getJson('/admin/tools').then((r) => renderTools(r.tools)).catch(() => {}), 300);
}

async function eventsUrl() {
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/admin/events`;
  if (!credential) return url;
  const r = await fetch('/admin/ticket', { method: 'POST', headers: authHeaders() });
  if (r.status === 401 || r.status === 403) throw refused(r);
  if (!r.ok) throw new Error(`/admin/ticket: HTTP ${r.status}`);
  const { ticket } = await r.json();
  return `${url}?ticket=${encodeURIComponent(ticket)}`;
}

async function connect() {
  const conn = document.getElementById('conn');
  let url;
  try {
    url = await eventsUrl();
  } catch (err) {
    if (err instanceof CredentialNeeded) return askForCredential(err.message);
    conn.textContent = 'disconnected — retrying';
    setTimeout(connect, 2000);
    return;
  }
  const ws = new WebSocket(url);
  // Calls in flight and queued change with no event of their own: read again every few seconds
  // while live (a figure read during the hub's first list fetches stayed 1 until a state change).
  let loads;
  ws.onopen = () => {
    conn.textContent = 'live';
    conn.className = 'badge on';
    loads = setInterval(() => getJson('/admin/servers').then((r) => {
      for (const v of r.servers) servers.set(v.id, v);
      renderServers();
    }).catch(() => {}), LOAD_REFRESH_MS);
  };
  ws.onclose = () => {
    clearInterval(loads);
    conn.textContent = 'disconnected — retrying';
    conn.className = 'badge off';
    setTimeout(connect, 2000);
  };
  ws.onmessage = (m) => {
    let e;
    try {
      e = JSON.parse(m.data);
    } catch {
      return;
    }
    if (e.type === 'hello') {
      document.getElementById('version').textContent = `v${e.version}`;
      servers.clear();
      for (const s of e.servers) servers.set(s.id, s);
      renderServers();
    } else if (e.type === 'serverState') {
      const s = servers.get(e.id) ?? { id: e.id, transport: '', restarts: 0 };
      servers.set(e.id, { ...s, state: e.state, era: e.era, lastError: e.detail ?? s.lastError });
      renderServers();
      // A state change can change the catalog and the counts: re-read both.
      getJson('/admin/servers').then((r) => {
        for (const v of r.servers) servers.set(v.id, v);
        renderServers();
      }).catch(() => {});
      refreshToolsSoon();
    } else if (e.type === 'audit') {
      addCall(e);
    }
  };
}

function askForCredential(message) {
  document.getElementById('login').hidden = false;
  const error = document.getElementById('login-error');
  error.textContent = message;
  error.hidden = !message;
  document.getElementById('conn').textContent = 'needs a credential';
  document.getElementById('login-key').focus();
}

async function start() {
  try {
    const r = await getJson('/admin/servers');
    document.getElementById('version').textContent = `v${r.version}`;
    for (const s of r.servers) servers.set(s.id, s);
    renderServers();
  } catch (err) {
    if (err instanceof CredentialNeeded) return askForCredential(err.message);
    document.getElementById('version').textContent = String(err.message);
  }
  document.getElementById('login').hidden = true;
  document.getElementById('sign-out').hidden = !credential;
  refreshToolsSoon();
  connect();
}

document.getElementById('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const input = document.getElementById('login-key');
  credential = input.value.trim();
  input.value = '';
  sessionStorage.setItem(KEY_ITEM, credential);
  start();
});

document.getElementById('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_ITEM);
  location.reload();
});

start();
