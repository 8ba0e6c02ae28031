// The presenced demo: a room view built on the JavaScript SDK (served at /sdk/).
// The page asks the server how it authenticates (a probe socket: a welcome
// before the pong means auth = none) and then:
//  - auth = none (development): a clearly labelled development identity,
//    chosen freely with ?user= (kept per tab);
//  - auth = jwt: a token from ?token= (then removed from the address bar) or
//    pasted into the page, kept per tab; the user is the token's sub.
// URL parameters: room (default "lobby"), user, name, device, token,
// hiddenAwayMs (how long a hidden tab waits before it shows away; 60000).
// A reload resumes the session (the SDK keeps it in sessionStorage): nobody
// sees this page leave and come back.
import { createClient, formatLastSeen } from '/sdk/index.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const ID_RE = /^[A-Za-z0-9\-_.~:@]{1,128}$/;
const WS_URL = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`;

// ---- how does this server authenticate? ----
function probeAuth(timeoutMs = 4000) {
  return new Promise((resolve) => {
    let ws, done = false;
    const finish = (mode) => { if (done) return; done = true; clearTimeout(timer); try { ws.close(1000); } catch { /* gone */ } resolve(mode); };
    const timer = setTimeout(() => finish('none'), timeoutMs);
    try { ws = new WebSocket(WS_URL, ['presenced.v1']); } catch { finish('none'); return; }
    ws.onopen = () => ws.send(JSON.stringify({ type: 'ping', ref: 'auth-probe' }));
    ws.onmessage = (ev) => {
      let m; try { m = JSON.parse(ev.data); } catch { return; }
      if (m.type === 'welcome') finish('none'); // sent at once only without authentication
      else if (m.type === 'pong') finish('jwt');
    };
    ws.onerror = () => finish('none');
  });
}
function jwtClaims(tok) {
  try {
    const part = tok.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(decodeURIComponent(escape(atob(part + '==='.slice((part.length + 3) % 4)))));
  } catch { return null; }
}

// ---- identity (kept per tab, so a reload is the same user) ----
function randomGuest() { return `Guest-${String(1000 + Math.floor(Math.random() * 9000))}`; }
function toId(name) {
  const id = String(name).trim().replace(/\s+/g, '-').replace(/[^A-Za-z0-9\-_.~:@]/g, '').slice(0, 64);
  return id || randomGuest();
}
const stored = (() => { try { return JSON.parse(sessionStorage.getItem('presenced-demo') || 'null'); } catch { return null; } })() || {};
const roomId = ID_RE.test(params.get('room') || '') ? params.get('room') : 'lobby';
let displayName = params.get('name') || stored.name || '';
let userId = '';
let token = null;
const device = ['desktop', 'mobile', 'tablet', 'web', 'other'].includes(params.get('device'))
  ? params.get('device') : (/iPad|Tablet/i.test(navigator.userAgent) ? 'tablet' : /Mobi/i.test(navigator.userAgent) ? 'mobile' : 'web');
const HIDDEN_AWAY_MS = /^\d{1,9}$/.test(params.get('hiddenAwayMs') || '') ? Number(params.get('hiddenAwayMs')) : 60000;
const PALETTE = ['#e5484d', '#f76b15', '#d6a000', '#30a46c', '#12a594', '#0090ff', '#3e63dd', '#8e4ec6', '#d6409f', '#6e56cf'];
function colorOf(id) { let h = 2166136261; for (const c of id) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0; return PALETTE[h % PALETTE.length]; }
let myColor = '#888';
function remember() {
  try { sessionStorage.setItem('presenced-demo', JSON.stringify({ user: token ? undefined : userId, name: displayName, token: token || undefined })); } catch { /* private mode */ }
}

// ---- labels and icons ----
const STATUS_LABEL = { online: 'Online', away: 'Away', busy: 'Busy', dnd: 'Do not disturb', offline: 'Offline', unknown: 'Unknown' };
const SHORTCODES = { ':calendar:': '📅', ':coffee:': '☕', ':headphones:': '🎧', ':palm_tree:': '🌴', ':house:': '🏠', ':rocket:': '🚀', ':pizza:': '🍕', ':zzz:': '💤', ':tada:': '🎉', ':computer:': '💻', ':thermometer_face:': '🤒', ':car:': '🚗' };
const EMOJI = ['📅', '🎧', '☕', '🍕', '🚀', '💻', '🏠', '🌴', '🤒', '💤', '🎉', '🚗'];
const SVG = {
  desktop: '<svg viewBox="0 0 16 16" aria-hidden="true"><rect x="1.5" y="2.5" width="13" height="8.5" rx="1.2"/><path d="M6 14h4M8 11v3"/></svg>',
  web: '<svg viewBox="0 0 16 16" aria-hidden="true"><circle cx="8" cy="8" r="6.3"/><path d="M1.8 8h12.4M8 1.7c-3 3.4-3 9.2 0 12.6M8 1.7c3 3.4 3 9.2 0 12.6"/></svg>',
  mobile: '<svg viewBox="0 0 16 16" aria-hidden="true"><rect x="4.5" y="1.5" width="7" height="13" rx="1.4"/><path d="M7.2 12.3h1.6"/></svg>',
  tablet: '<svg viewBox="0 0 16 16" aria-hidden="true"><rect x="2.5" y="1.5" width="11" height="13" rx="1.4"/><path d="M7.2 12.3h1.6"/></svg>',
  other: '<svg viewBox="0 0 16 16" aria-hidden="true"><circle cx="8" cy="8" r="5.5"/><path d="M8 5.5v3M8 10.5v.1"/></svg>',
};
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
const showEmoji = (e) => (e ? SHORTCODES[e] || e : '');
const initials = (n) => String(n).split(/[\s\-_.]+/).filter(Boolean).slice(0, 2).map((w) => [...w][0].toUpperCase()).join('') || '?';

// ---- the client (created once the identity is known, see start()) ----
let client = null;
let room = null;
let publisher = null;
window.__renders = 0;

$('url').textContent = WS_URL;
$('room-name').textContent = roomId;
document.title = `${roomId} · presenced demo`;
const share = new URL(location.href); share.search = `?room=${encodeURIComponent(roomId)}`;
$('share-link').href = share.href;

// Everyone ever seen in the room (members who left stay, shown offline with last seen).
const known = new Map(); // user -> { name, color, joinedAt }
const watched = new Set();
function track(members) {
  for (const [u, m] of members) {
    const meta = m.meta && typeof m.meta === 'object' ? m.meta : {};
    known.set(u, { name: String(meta.name || u).slice(0, 40), color: /^#[0-9a-f]{3,8}$/i.test(meta.color || '') ? meta.color : colorOf(u), joinedAt: m.joinedAt });
    if (!watched.has(u)) { watched.add(u); client.watch(u); }
  }
}

// ---- rendering (coalesced to one per frame; window.__renders counts them) ----
let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  // rAF is paused in hidden tabs; a timeout keeps hidden tabs correct too.
  setTimeout(() => { renderQueued = false; render(); }, 16);
}

function presenceOf(u) {
  const p = client && client.getPresence(u);
  if (!p) return { status: 'unknown', devices: {}, stale: false };
  return p;
}

function render() {
  if (!client || document.body.dataset.mode === 'gate') return;
  window.__renders++;
  const state = client.state;
  $('state').textContent = state;
  $('state').className = `state ${state}`;
  $('conn-dot').className = `conn-dot ${state}`;
  document.body.dataset.conn = state;

  // me
  const me = presenceOf(userId);
  const myStatus = me.status;
  const priv = client.privacy;
  const invisible = !!(priv && priv.invisible);
  document.body.dataset.invisible = invisible ? 'yes' : 'no';
  $('me-avatar').style.setProperty('--c', myColor);
  $('me-avatar').querySelector('.initials').textContent = initials(displayName);
  $('me-avatar').querySelector('.dot').className = `dot s-${myStatus}${invisible ? ' invisible' : ''}`;
  if (!privacyBusy) $('invisible').checked = invisible; // not while a change is on its way
  $('invisible').disabled = !priv || privacyBusy || state !== 'open';
  $('invisible-banner').hidden = !invisible;
  $('invisible-note').hidden = invisible;
  for (const [id, key] of [['vis-online', 'online'], ['vis-lastseen', 'lastSeen']]) {
    if (priv && !privacyBusy) $(id).value = priv[key];
    $(id).disabled = !priv || privacyBusy || state !== 'open';
  }
  for (const b of $('status-buttons').querySelectorAll('button')) {
    const on = b.dataset.status === myStatus;
    b.setAttribute('aria-checked', String(on));
    b.classList.toggle('on', on);
  }
  $('activity').textContent = client.active ? 'You are active in this tab.' : 'This tab is hidden or idle: you show as away.';

  // members
  const now = client.serverNow();
  const members = room.members;
  const rows = [];
  for (const [u, k] of known) {
    const p = presenceOf(u);
    // You are in the room while joined, even when it hides you from others.
    const inRoom = u === userId ? room.joined : members.has(u);
    let status = p.status;
    if (status === 'unknown' && !inRoom && state === 'open') status = 'offline';
    rows.push({ u, k, p, status, inRoom });
  }
  const rank = { online: 0, busy: 1, dnd: 2, away: 3, unknown: 4, offline: 5 };
  rows.sort((a, b) => (a.u === userId ? -1 : b.u === userId ? 1 : 0)
    || (rank[a.status] - rank[b.status]) || a.k.name.localeCompare(b.k.name));
  let online = 0;
  $('members').innerHTML = rows.map(({ u, k, p, status, inRoom }) => {
    if (status !== 'offline' && status !== 'unknown') online++;
    const custom = p.custom && (p.custom.text || p.custom.emoji)
      ? `<div class="custom-line"><span class="emoji">${esc(showEmoji(p.custom.emoji))}</span><span class="custom-text">${esc(p.custom.text || '')}</span></div>` : '';
    const devices = Object.entries(p.devices || {}).map(([d, s]) =>
      `<span class="device s-${esc(s)}" title="${esc(d)}: ${esc(STATUS_LABEL[s] || s)}">${SVG[d] || SVG.other}</span>`).join('');
    let sub;
    if (status === 'offline') sub = `<span class="lastseen">${esc(formatLastSeen(p.lastSeen ? p : null, now))}</span>`;
    else if (status === 'unknown') sub = `<span class="muted">${p.stale ? 'reconnecting…' : 'status unknown'}</span>`;
    else sub = `<span class="status-label">${esc(STATUS_LABEL[status])}</span>${devices ? `<span class="devices">${devices}</span>` : ''}`;
    const mine = u === userId;
    const hidden = mine && invisible;
    if (hidden) sub = `<span class="invisible-label">Invisible</span><span class="muted">· others see you offline</span>`;
    const stale = p.stale ? ' stale' : '';
    return `<li class="member${stale}${inRoom ? '' : ' gone'}${hidden ? ' invisible' : ''}" data-user="${esc(u)}" data-status="${esc(status)}"${mine ? ` data-invisible="${hidden ? 'yes' : 'no'}"` : ''}>
      <span class="avatar" style="--c:${esc(k.color)}"><span class="initials">${esc(initials(k.name))}</span><span class="dot s-${esc(status)}${hidden ? ' invisible' : ''}" title="${esc(hidden ? 'Invisible' : STATUS_LABEL[status])}"></span></span>
      <div class="who"><div class="name-line"><span class="name">${esc(k.name)}</span>${mine ? '<span class="you">you</span>' : ''}</div>
      ${custom}<div class="sub">${sub}</div></div></li>`;
  }).join('');
  $('online-count').textContent = `${online} online`;
  $('room-count').textContent = room.joined ? `${room.count} here${hiddenNow() ? ' · you hidden' : ''}` : '–';
  $('stage-empty').hidden = [...members.keys()].some((u) => u !== userId);
  for (const [u, el] of cursors) if (!members.has(u)) { el.remove(); cursors.delete(u); }
}

// ---- cursors ----
const stage = $('stage');
const cursorLayer = $('cursors');
const cursors = new Map(); // user -> element
function stageFraction(e) {
  const r = stage.getBoundingClientRect();
  const f = (v) => Math.round(Math.min(1, Math.max(0, v)) * 10000) / 10000;
  return { x: f((e.clientX - r.left) / r.width), y: f((e.clientY - r.top) / r.height) };
}
// Rooms hide invisible members and those who show their online status to
// fewer than everyone: they publish no cursor.
const hiddenNow = () => { const p = client && client.privacy; return !!(p && (p.invisible || p.online !== 'everyone')); };
stage.addEventListener('pointermove', (e) => { if (publisher && !hiddenNow()) publisher.update(stageFraction(e)); });
stage.addEventListener('pointerleave', () => { if (publisher && !hiddenNow()) publisher.update(null); });
function onEphemeral(m) {
  if (m.kind !== 'cursor') return;
  let el = cursors.get(m.user);
  const pos = m.data;
  if (!pos || typeof pos.x !== 'number' || typeof pos.y !== 'number') { if (el) el.hidden = true; return; }
  const k = known.get(m.user) || { name: m.user, color: colorOf(m.user) };
  if (!el) {
    el = document.createElement('div');
    el.className = 'cursor';
    el.dataset.user = m.user;
    el.innerHTML = '<svg viewBox="0 0 16 20" aria-hidden="true"><path d="M1 1l13 9.5-6 .8-3.2 6.2z"/></svg><span class="label"></span>';
    cursorLayer.append(el);
    cursors.set(m.user, el);
  }
  el.style.setProperty('--c', k.color);
  el.querySelector('.label').textContent = k.name;
  el.hidden = false;
  el.style.left = `${pos.x * 100}%`;
  el.style.top = `${pos.y * 100}%`;
  window.__cursorsDrawn = (window.__cursorsDrawn || 0) + 1;
}

// ---- hidden tab: the SDK shows you away after hiddenAwayMs, online when visible ----
// The page only takes its cursor away, and never while it unloads: a reload
// hides the page and fires pagehide in one go (in either order), and must
// send nothing at all.
let unloading = false;
addEventListener('pagehide', () => { unloading = true; });
addEventListener('pageshow', () => { unloading = false; });
document.addEventListener('visibilitychange', () => {
  if (!client || unloading) return;
  if (document.visibilityState === 'hidden') {
    setTimeout(() => {
      if (!unloading && document.visibilityState === 'hidden' && publisher && !hiddenNow()) publisher.update(null);
    }, 0);
  }
  scheduleRender();
});

// ---- status picker ----
function expiryMs() {
  const v = $('expiry').value;
  if (v === 'today') { const end = new Date(); end.setHours(23, 59, 59, 999); return Math.max(60000, end - Date.now()); }
  return Number(v) || 0;
}
function flash(msg, bad) {
  const el = $('activity'); el.textContent = msg; el.classList.toggle('bad', !!bad);
  setTimeout(() => { el.classList.remove('bad'); scheduleRender(); }, 2500);
}
$('status-buttons').addEventListener('click', (e) => {
  const b = e.target.closest('button[data-status]'); if (!b || !client) return;
  const s = b.dataset.status;
  const ms = (s === 'busy' || s === 'dnd') ? expiryMs() : 0;
  client.setStatus(s, ms ? { expiresInMs: ms } : {}).catch((err) => flash(`Could not set status: ${err.message}`, true));
});
let chosenEmoji = '';
function setEmojiButton() { $('emoji-btn').textContent = chosenEmoji || '😀'; $('emoji-btn').classList.toggle('empty', !chosenEmoji); }
setEmojiButton();
$('emoji-grid').innerHTML = EMOJI.map((e) => `<button type="button" data-emoji="${e}">${e}</button>`).join('') + '<button type="button" data-emoji="" title="No emoji">∅</button>';
$('emoji-btn').addEventListener('click', () => {
  const g = $('emoji-grid'); g.hidden = !g.hidden; $('emoji-btn').setAttribute('aria-expanded', String(!g.hidden));
});
$('emoji-grid').addEventListener('click', (e) => {
  const b = e.target.closest('button[data-emoji]'); if (!b) return;
  chosenEmoji = b.dataset.emoji; setEmojiButton();
  $('emoji-grid').hidden = true; $('emoji-btn').setAttribute('aria-expanded', 'false');
});
$('custom-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (!client) return;
  const text = $('custom-text').value.trim();
  const ms = expiryMs();
  client.setCustom(text || chosenEmoji ? { text, emoji: chosenEmoji } : null, ms ? { expiresInMs: ms } : {})
    .catch((err) => flash(`Could not set custom status: ${err.message}`, true));
});
$('custom-clear').addEventListener('click', () => {
  $('custom-text').value = ''; chosenEmoji = ''; setEmojiButton();
  if (client) client.setCustom(null).catch(() => {});
});
$('name-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const n = $('name').value.trim().slice(0, 40);
  if (!n || n === displayName || !room) return;
  displayName = n; remember();
  if (known.has(userId)) known.get(userId).name = n;
  room.patch({ name: n }).catch(() => {});
  scheduleRender();
});

// ---- privacy: the invisible switch and the menu (saved on the server) ----
let privacyBusy = false;
async function changePrivacy(settings, what) {
  if (!client || privacyBusy) return;
  privacyBusy = true;
  if ((settings.invisible === true || (settings.online && settings.online !== 'everyone')) && publisher) publisher.update(null); // take the cursor away first
  scheduleRender();
  try {
    await client.setPrivacy(settings);
  } catch (err) {
    flash(`Could not change ${what}: ${err.message}`, true);
  } finally {
    privacyBusy = false;
    scheduleRender();
  }
}
$('invisible').addEventListener('change', (e) => changePrivacy({ invisible: e.target.checked }, 'invisibility'));
$('vis-online').addEventListener('change', (e) => changePrivacy({ online: e.target.value }, 'who sees you online'));
$('vis-lastseen').addEventListener('change', (e) => changePrivacy({ lastSeen: e.target.value }, 'who sees your last seen'));

// ---- tokens (auth = jwt) ----
function showGate(message) {
  document.body.dataset.mode = 'gate';
  $('token-gate').hidden = false;
  $('state').textContent = 'signed out';
  $('state').className = 'state closed';
  $('conn-dot').className = 'conn-dot closed';
  $('authnote').hidden = true;
  $('token-error').hidden = !message;
  $('token-error').textContent = message || '';
  $('token-input').focus();
}
$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('token-input').value.trim();
  const claims = jwtClaims(t);
  if (!claims || !ID_RE.test(String(claims.sub || ''))) { showGate('That does not look like a JWT with a sub (user id).'); return; }
  token = t; remember();
  location.reload(); // a clean page for the new identity
});
$('token-change').addEventListener('click', () => {
  token = null; remember();
  if (client) client.close();
  showGate('');
});

// ---- start ----
function start() {
  myColor = colorOf(userId);
  $('me-user').textContent = userId;
  $('name').value = displayName;
  client = token
    ? createClient({ url: location.origin, token, device, hiddenAwayMs: HIDDEN_AWAY_MS })
    : createClient({ url: location.origin, user: userId, device, hiddenAwayMs: HIDDEN_AWAY_MS });
  room = client.join(roomId, { meta: { name: displayName, color: myColor } });
  publisher = room.cursor();
  window.__presenced = { client, room, userId, roomId, mode: token ? 'jwt' : 'none' };
  watched.add(userId); client.watch(userId);
  // You are always listed, even when the room hides you (invisible).
  known.set(userId, { name: displayName, color: myColor, joinedAt: 0 });

  client.onState(() => scheduleRender());
  client.onPresence(() => scheduleRender());
  client.onPrivacy(() => scheduleRender());
  let lastError = null;
  client.onError((e) => {
    lastError = e;
    if (e.code === 'unauthorized') showGate('The server refused this token (bad signature, expired, or for another audience).');
    else if (e.code === 'kicked') flash(`An administrator ended this session: ${e.message}`, true);
  });
  client.onState((s) => {
    if (s !== 'closed' || !token || document.body.dataset.mode === 'gate') return;
    showGate(lastError && lastError.code === 'kicked'
      ? `An administrator ended this session (${lastError.message}). Sign in again to come back.`
      : 'The connection ended: the token expired or was refused. Paste a new one.');
  });
  room.onChange((members) => { track(members); scheduleRender(); });
  room.onError((e) => flash(e.code === 'forbidden' ? `Your token does not allow the room "${roomId}".` : `Room: ${e.message}`, true));
  room.onEphemeral(onEphemeral);
  setInterval(scheduleRender, 20000); // keeps "last seen" texts current

  // Landing information: welcome + round trip.
  client.onWelcome(async (w) => {
    $('welcome').textContent = JSON.stringify(w, null, 2);
    try {
      const t0 = performance.now();
      await client.ping();
      $('rtt').textContent = `${(performance.now() - t0).toFixed(1)} ms`;
    } catch { /* reconnecting */ }
  });
  room.ready.then(async () => {
    while (!$('rtt').textContent.endsWith('ms')) await new Promise((r) => setTimeout(r, 20));
    document.body.dataset.ready = 'yes';
  });
  scheduleRender();
}

async function main() {
  const mode = await probeAuth();
  document.body.dataset.auth = mode;
  if (mode === 'jwt') {
    const fromUrl = params.get('token');
    if (fromUrl) {
      // Out of the address bar (and history) at once.
      const clean = new URL(location.href); clean.searchParams.delete('token');
      history.replaceState(null, '', clean.href);
    }
    token = fromUrl || stored.token || null;
    const claims = token && jwtClaims(token);
    if (!claims || !ID_RE.test(String(claims.sub || ''))) {
      token = null;
      showGate(fromUrl ? 'The token in the address is not a JWT with a sub (user id).' : '');
      return;
    }
    userId = claims.sub;
    displayName = displayName || (typeof claims.name === 'string' && claims.name.slice(0, 40)) || userId;
    remember();
    document.body.dataset.mode = 'token';
    $('authnote').hidden = false;
    $('token-sub').textContent = userId;
    if (typeof claims.exp === 'number') {
      const mins = Math.round((claims.exp * 1000 - Date.now()) / 60000);
      $('token-exp').textContent = mins > 0 ? `, valid for ${mins >= 120 ? `${Math.round(mins / 60)} hours` : `${mins} minutes`}` : ', expired';
    }
    $('id-kind').textContent = 'from your token';
  } else {
    userId = ID_RE.test(params.get('user') || '') ? params.get('user') : (stored.user || '');
    displayName = displayName || params.get('user') || randomGuest();
    if (!userId) userId = toId(displayName).toLowerCase();
    token = null;
    remember();
    document.body.dataset.mode = 'dev';
    $('devnote').hidden = false;
    $('id-kind').textContent = 'development identity';
    $('id-kind').title = 'auth = none: anyone can claim any user id';
    $('id-kind').classList.add('dev');
  }
  start();
}
main();
