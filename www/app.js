// The presenced demo: a room view built on the JavaScript SDK (served at /sdk/).
// Development mode (auth = none): the user id is chosen freely with ?user=.
// URL parameters: room (default "lobby"), user, name, device.
import { createClient, formatLastSeen } from '/sdk/index.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const ID_RE = /^[A-Za-z0-9\-_.~:@]{1,128}$/;

// ---- identity (kept per tab, so a reload is the same user) ----
function randomGuest() { return `Guest-${String(1000 + Math.floor(Math.random() * 9000))}`; }
function toId(name) {
  const id = String(name).trim().replace(/\s+/g, '-').replace(/[^A-Za-z0-9\-_.~:@]/g, '').slice(0, 64);
  return id || randomGuest();
}
const stored = (() => { try { return JSON.parse(sessionStorage.getItem('presenced-demo') || 'null'); } catch { return null; } })();
const roomId = ID_RE.test(params.get('room') || '') ? params.get('room') : 'lobby';
let displayName = params.get('name') || stored?.name || params.get('user') || randomGuest();
const userId = ID_RE.test(params.get('user') || '') ? params.get('user') : (stored?.user || toId(displayName).toLowerCase());
const device = ['desktop', 'mobile', 'tablet', 'web', 'other'].includes(params.get('device'))
  ? params.get('device') : (/iPad|Tablet/i.test(navigator.userAgent) ? 'tablet' : /Mobi/i.test(navigator.userAgent) ? 'mobile' : 'web');
const PALETTE = ['#e5484d', '#f76b15', '#d6a000', '#30a46c', '#12a594', '#0090ff', '#3e63dd', '#8e4ec6', '#d6409f', '#6e56cf'];
function colorOf(id) { let h = 2166136261; for (const c of id) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0; return PALETTE[h % PALETTE.length]; }
const myColor = colorOf(userId);
function remember() { try { sessionStorage.setItem('presenced-demo', JSON.stringify({ user: userId, name: displayName })); } catch { /* private mode */ } }
remember();

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

// ---- the client ----
const client = createClient({ url: location.origin, user: userId, device });
const room = client.join(roomId, { meta: { name: displayName, color: myColor } });
window.__presenced = { client, room, userId, roomId };
window.__renders = 0;

$('url').textContent = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`;
$('room-name').textContent = roomId;
$('me-user').textContent = userId;
$('name').value = displayName;
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
if (!watched.has(userId)) { watched.add(userId); client.watch(userId); }

// ---- rendering (coalesced to one per frame; window.__renders counts them) ----
let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  // rAF is paused in hidden tabs; a timeout keeps hidden tabs correct too.
  setTimeout(() => { renderQueued = false; render(); }, 16);
}

function presenceOf(u) {
  const p = client.getPresence(u);
  if (!p) return { status: 'unknown', devices: {}, stale: false };
  return p;
}

function render() {
  window.__renders++;
  const state = client.state;
  $('state').textContent = state;
  $('state').className = `state ${state}`;
  $('conn-dot').className = `conn-dot ${state}`;
  document.body.dataset.conn = state;

  // me
  const me = presenceOf(userId);
  const myStatus = me.status;
  $('me-avatar').style.setProperty('--c', myColor);
  $('me-avatar').querySelector('.initials').textContent = initials(displayName);
  $('me-avatar').querySelector('.dot').className = `dot s-${myStatus}`;
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
    const inRoom = members.has(u);
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
    const stale = p.stale ? ' stale' : '';
    return `<li class="member${stale}${inRoom ? '' : ' gone'}" data-user="${esc(u)}" data-status="${esc(status)}">
      <span class="avatar" style="--c:${esc(k.color)}"><span class="initials">${esc(initials(k.name))}</span><span class="dot s-${esc(status)}" title="${esc(STATUS_LABEL[status])}"></span></span>
      <div class="who"><div class="name-line"><span class="name">${esc(k.name)}</span>${u === userId ? '<span class="you">you</span>' : ''}</div>
      ${custom}<div class="sub">${sub}</div></div></li>`;
  }).join('');
  $('online-count').textContent = `${online} online`;
  $('room-count').textContent = room.joined ? `${room.count} here` : '–';
  $('stage-empty').hidden = [...members.keys()].some((u) => u !== userId);
  for (const [u, el] of cursors) if (!members.has(u)) { el.remove(); cursors.delete(u); }
}

client.onState(() => scheduleRender());
client.onPresence(() => scheduleRender());
room.onChange((members) => { track(members); scheduleRender(); });
room.onError((e) => console.warn('room error', e.code, e.message));
setInterval(scheduleRender, 20000); // keeps "last seen" texts current

// ---- landing information: welcome + round trip ----
client.onWelcome(async (w) => {
  $('welcome').textContent = JSON.stringify(w, null, 2);
  try {
    const t0 = performance.now();
    await client.ping();
    $('rtt').textContent = `${(performance.now() - t0).toFixed(1)} ms`;
  } catch { /* reconnecting */ }
});
room.ready.then(() => room.ready).then(async () => {
  while (!$('rtt').textContent.endsWith('ms')) await new Promise((r) => setTimeout(r, 20));
  document.body.dataset.ready = 'yes';
});

// ---- cursors ----
const stage = $('stage');
const cursorLayer = $('cursors');
const cursors = new Map(); // user -> element
const publisher = room.cursor();
function stageFraction(e) {
  const r = stage.getBoundingClientRect();
  const f = (v) => Math.round(Math.min(1, Math.max(0, v)) * 10000) / 10000;
  return { x: f((e.clientX - r.left) / r.width), y: f((e.clientY - r.top) / r.height) };
}
stage.addEventListener('pointermove', (e) => publisher.update(stageFraction(e)));
stage.addEventListener('pointerleave', () => publisher.update(null));
room.onEphemeral((m) => {
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
});

// ---- hidden tab: show as away; the SDK re-asserts presence when visible again ----
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'hidden') { publisher.update(null); client.setActive(false); }
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
  const b = e.target.closest('button[data-status]'); if (!b) return;
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
  const text = $('custom-text').value.trim();
  const ms = expiryMs();
  client.setCustom(text || chosenEmoji ? { text, emoji: chosenEmoji } : null, ms ? { expiresInMs: ms } : {})
    .catch((err) => flash(`Could not set custom status: ${err.message}`, true));
});
$('custom-clear').addEventListener('click', () => {
  $('custom-text').value = ''; chosenEmoji = ''; setEmojiButton();
  client.setCustom(null).catch(() => {});
});
$('name-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const n = $('name').value.trim().slice(0, 40);
  if (!n || n === displayName) return;
  displayName = n; remember();
  room.patch({ name: n }).catch(() => {});
  scheduleRender();
});

scheduleRender();
