// admin.js - the admin page (/admin/): reads the server through the admin
// API only (docs/api.md), with the key the operator types in, kept in this
// tab's sessionStorage and sent as "Authorization: Bearer <key>".
//
// Every poll (?poll=ms, default 2000) reads /v1/admin/stats, /nodes and
// /rooms?top=20, and again the room and the user shown. The chart draws users online from the samples of this
// tab, at most KEEP of them (the server keeps no history). A refused key
// (401, or 403 when the admin API is off) brings the key form back with the
// server's message; a server that does not answer shows a banner and the
// page keeps polling until it is back.
'use strict';

(() => {
  const KEY_NAME = 'presenced.adminKey';
  const KEEP = 300;
  const TOP = 20;
  const params = new URLSearchParams(location.search);
  const POLL_MS = Math.max(200, Number(params.get('poll')) || 2000);
  const $ = (id) => document.getElementById(id);
  const samples = []; // {at, users}
  let timer = null;
  let openRoom = null;
  let shownUser = null;

  // ---- the API ----

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(path, { method = 'GET', body, key = sessionStorage.getItem(KEY_NAME) } = {}) {
    let r;
    try {
      r = await fetch(path, {
        method,
        headers: { Authorization: `Bearer ${key || ''}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        cache: 'no-store',
      });
    } catch (e) {
      throw new ApiError(0, 'unreachable', 'the server does not answer');
    }
    let json = null;
    try { json = await r.json(); } catch (e) { /* not JSON: said below */ }
    if (!r.ok) {
      const err = json && json.error;
      const code = typeof err === 'string' ? err : err && err.code;
      const message = (typeof err === 'string' ? json.message : err && err.message) || r.statusText;
      throw new ApiError(r.status, code || `http_${r.status}`, message);
    }
    if (!json) throw new ApiError(r.status, 'bad_answer', 'the server answered something that is not JSON');
    return json;
  }

  // A refused key: back to the form. Anything else: the banner.
  function failed(e) {
    if (e.status === 401 || e.status === 403) {
      signOut(`${e.status} ${e.code}: ${e.message}`);
      return;
    }
    setState('closed', e.status ? 'error' : 'server unreachable');
    banner(e.status ? `${e.status} ${e.code}: ${e.message}` : 'The server does not answer: it may be down or restarting. Retrying…');
  }

  // ---- page state ----

  function setState(cls, text) {
    $('state').textContent = text;
    $('state').className = `state ${cls}`;
    $('conn-dot').className = `conn-dot ${cls}`;
  }

  function banner(text) {
    $('banner').textContent = text || '';
    $('banner').hidden = !text;
  }

  function el(tag, attrs = {}, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'class') n.className = v;
      else if (k === 'text') n.textContent = v;
      else if (k.startsWith('data-')) n.setAttribute(k, v);
      else n[k] = v;
    }
    for (const k of kids) if (k != null) n.append(k);
    return n;
  }

  const fmt = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));
  const time = (ms) => new Date(ms).toLocaleTimeString('en-GB', { hour12: false });
  function ago(ms) {
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return `${Math.floor(s / 86400)} d ago`;
  }
  function uptime(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 120) return `${s} s`;
    if (s < 7200) return `${Math.floor(s / 60)} min`;
    if (s < 172800) return `${Math.floor(s / 3600)} h`;
    return `${Math.floor(s / 86400)} d`;
  }

  // ---- signing in and out ----

  function showGate(message) {
    stopPolling();
    $('dash').hidden = true;
    $('foot').hidden = true;
    $('signout').hidden = true;
    $('node-chip').hidden = true;
    $('gate').hidden = false;
    $('key-error').textContent = message || '';
    $('key-error').hidden = !message;
    document.body.dataset.mode = 'gate';
    setState('', 'signed out');
    $('key').focus();
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY_NAME);
    banner('');
    showGate(message);
  }

  async function signIn(key) {
    $('key-submit').disabled = true;
    try {
      await api('/v1/admin/stats', { key });
    } catch (e) {
      if (e.status === 401) showGate(`The key was refused (${e.status} ${e.code}: ${e.message}).`);
      else if (e.status === 403) showGate(`${e.status} ${e.code}: ${e.message}.`);
      else showGate(e.status ? `${e.status} ${e.code}: ${e.message}` : 'The server does not answer.');
      return;
    } finally {
      $('key-submit').disabled = false;
    }
    sessionStorage.setItem(KEY_NAME, key);
    showDash();
  }

  function showDash() {
    $('gate').hidden = true;
    $('dash').hidden = false;
    $('foot').hidden = false;
    $('signout').hidden = false;
    $('keep').textContent = KEEP;
    document.body.dataset.mode = 'dash';
    poll();
  }

  function stopPolling() {
    clearTimeout(timer);
    timer = null;
  }

  // ---- polling ----

  async function poll() {
    stopPolling();
    try {
      const [stats, nodes, rooms] = await Promise.all([
        api('/v1/admin/stats'), api('/v1/admin/nodes'), api(`/v1/admin/rooms?top=${TOP}`)]);
      banner('');
      setState('open', 'live');
      renderStats(stats);
      renderNodes(nodes.nodes);
      const ce = nodes.clusterError || '';
      $('nodes-error').textContent = ce && `${ce[0].toUpperCase()}${ce.slice(1)}: only this node is shown.`;
      $('nodes-error').hidden = !nodes.clusterError;
      renderRooms(rooms.rooms);
      if (openRoom) await loadMembers(openRoom, false);
      if (shownUser) await lookUp(shownUser, { keepResult: true, quiet: true });
      $('last-poll').textContent = `Last read ${time(stats.at)}.`;
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    } catch (e) {
      failed(e);
      if (e.status === 401 || e.status === 403) return;
    }
    if (document.body.dataset.mode === 'dash') timer = setTimeout(poll, POLL_MS);
  }

  function renderStats(s) {
    for (const n of document.querySelectorAll('[data-stat]')) n.textContent = fmt(s[n.dataset.stat]);
    samples.push({ at: s.at, users: s.usersOnline });
    if (samples.length > KEEP) samples.splice(0, samples.length - KEEP);
    drawChart();
  }

  // An area chart of the samples, scaled to their maximum (at least 1).
  function drawChart() {
    const svg = $('chart');
    const W = 600, H = 160, PAD = 6;
    const max = Math.max(1, ...samples.map((p) => p.users));
    const t0 = samples[0].at, t1 = samples[samples.length - 1].at;
    const span = Math.max(1, t1 - t0);
    const x = (p) => (samples.length === 1 ? W : ((p.at - t0) / span) * W);
    const y = (p) => H - PAD - (p.users / max) * (H - 2 * PAD);
    const pts = samples.map((p) => `${x(p).toFixed(1)},${y(p).toFixed(1)}`);
    if (samples.length === 1) pts.unshift(`0,${y(samples[0]).toFixed(1)}`);
    const ns = 'http://www.w3.org/2000/svg';
    svg.replaceChildren();
    for (let i = 1; i < 4; i++) {
      const g = document.createElementNS(ns, 'line');
      g.setAttribute('x1', 0); g.setAttribute('x2', W);
      g.setAttribute('y1', (H * i) / 4); g.setAttribute('y2', (H * i) / 4);
      g.setAttribute('class', 'gridline');
      svg.append(g);
    }
    const area = document.createElementNS(ns, 'polygon');
    area.setAttribute('points', `${pts[0].split(',')[0]},${H} ${pts.join(' ')} ${W},${H}`);
    area.setAttribute('class', 'area');
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', pts.join(' '));
    line.setAttribute('class', 'line');
    svg.append(area, line);
    svg.dataset.samples = String(samples.length);
    svg.dataset.last = String(samples[samples.length - 1].users);
    $('chart-from').textContent = time(t0);
    $('chart-to').textContent = `${time(t1)} · now ${fmt(samples[samples.length - 1].users)}`;
    $('chart-max').textContent = `max ${fmt(max)}`;
    $('chart-range').textContent = `${samples.length} sample${samples.length === 1 ? '' : 's'}, every ${POLL_MS / 1000} s`;
  }

  function badge(text, cls) {
    return el('span', { class: `badge ${cls}`, text });
  }

  function renderNodes(nodes) {
    $('nodes').replaceChildren(...nodes.map((n) => {
      if (n.summary === false) { // a live lease, but no summary put lately
        return el('li', { class: 'node', 'data-node': n.node },
          el('div', { class: 'node-head' }, el('strong', { text: n.node }), el('code', { class: 'muted', text: `epoch ${n.epoch}` })),
          el('div', { class: 'badges' }, badge('lease alive, no summary yet', 'warn')));
      }
      const badges = el('div', { class: 'badges' });
      if (n.draining) badges.append(badge('draining', 'warn'));
      else if (!n.ready) badges.append(badge('not ready', 'bad'));
      else badges.append(badge('ready', 'good'));
      for (const d of n.degraded) badges.append(badge(`${d} degraded`, 'bad'));
      if (n.degraded.length === 0) badges.append(badge('dependencies ok', 'good soft'));
      const li = el('li', { class: `node${n.degraded.length ? ' degraded' : ''}`, 'data-node': n.node },
        el('div', { class: 'node-head' },
          el('strong', { text: n.node }),
          n.epoch ? el('code', { class: 'muted', text: `epoch ${n.epoch}`, title: 'this start of the node' }) : null,
          n.self ? el('span', { class: 'tag', text: 'this node' }) : null),
        badges,
        el('dl', { class: 'facts' },
          el('dt', { text: 'started' }), el('dd', { text: `${time(n.startedAt)} (up ${uptime(n.uptimeMs)})` }),
          el('dt', { text: 'users · sessions' }), el('dd', { 'data-field': 'counts', text: `${fmt(n.usersOnline)} · ${fmt(n.sessions)}` }),
          el('dt', { text: 'connections' }), el('dd', { text: `${fmt(n.connections)} (${fmt(n.websockets)} WebSocket, ${fmt(n.streams)} SSE)` }),
          el('dt', { text: 'rooms · members' }), el('dd', { text: `${fmt(n.rooms)} · ${fmt(n.roomMembers)}` }),
          el('dt', { text: 'workers' }), el('dd', { text: String(n.workers) }),
          n.liveNodes != null ? el('dt', { text: 'live nodes' }) : null,
          n.liveNodes != null ? el('dd', { text: String(n.liveNodes) }) : null));
      return li;
    }));
    $('nodes-count').textContent = `${nodes.length}`;
    if (nodes[0]) {
      $('node-name').textContent = nodes[0].node;
      $('node-chip').hidden = false;
    }
  }

  function renderRooms(rooms) {
    $('rooms').replaceChildren(...rooms.map((r) => {
      const tr = el('tr', { 'data-room': r.room, class: r.room === openRoom ? 'on' : '', tabIndex: 0, title: 'show the members' },
        el('td', {}, el('code', { text: r.room })),
        el('td', { class: 'num', text: fmt(r.members) }),
        el('td', { class: 'num', text: fmt(r.visible) }));
      const open = () => loadMembers(r.room, true);
      tr.addEventListener('click', open);
      tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') open(); });
      return tr;
    }));
    $('rooms-empty').hidden = rooms.length > 0;
  }

  async function loadMembers(room, fromClick) {
    let r;
    try {
      r = await api(`/v1/admin/rooms/${encodeURIComponent(room)}`);
    } catch (e) {
      if (fromClick) failed(e);
      return;
    }
    openRoom = room;
    for (const tr of $('rooms').children) tr.classList.toggle('on', tr.dataset.room === room);
    $('members-room').textContent = room;
    $('members').replaceChildren(...r.members.map((m) => {
      const b = el('button', { type: 'button', class: 'link', text: m.user, title: 'look this user up' });
      b.addEventListener('click', () => { $('user-id').value = m.user; lookUp(m.user); });
      return el('li', { 'data-user': m.user, 'data-visible': String(m.visible) }, b,
        el('span', { class: 'muted', text: ` ${m.sessions} session${m.sessions === 1 ? '' : 's'}` }),
        badge(m.visible ? 'visible' : 'hidden', m.visible ? 'good soft' : 'warn'));
    }));
    if (r.members.length === 0) $('members').append(el('li', { class: 'hint', text: 'Nobody is in this room now.' }));
    $('members-box').hidden = false;
  }

  // ---- a user ----

  // quiet: a poll's refresh of the user shown, whose errors the poll shows.
  async function lookUp(uid, { keepResult = false, quiet = false } = {}) {
    if (!quiet) $('user-error').hidden = true;
    if (!keepResult) $('kick-result').hidden = true;
    if (!uid) return;
    let u;
    try {
      u = await api(`/v1/admin/users/${encodeURIComponent(uid)}`);
    } catch (e) {
      if (quiet) return;
      if (e.status === 401 || e.status === 403) { failed(e); return; }
      $('user-error').textContent = e.status ? `${e.status} ${e.code}: ${e.message}` : 'The server does not answer.';
      $('user-error').hidden = false;
      $('user').hidden = true;
      shownUser = null;
      return;
    }
    if (quiet && u.user !== shownUser) return; /* another lookup came first */
    shownUser = u.user;
    renderUser(u);
  }

  function renderUser(u) {
    const p = u.presence;
    $('user-name').textContent = u.user;
    $('user-dot').className = `dot s-${p.status}`;
    $('user-status').textContent = p.status;
    $('user-custom').textContent = p.custom ? `${p.custom.emoji || ''} ${p.custom.text || ''}`.trim() : '';
    const pv = u.privacy;
    $('user-privacy').replaceChildren(
      badge(`online: ${pv.online}`, pv.online === 'everyone' ? 'soft' : 'warn'),
      badge(`last seen: ${pv.lastSeen}`, pv.lastSeen === 'everyone' ? 'soft' : 'warn'),
      badge(pv.invisible ? 'invisible' : 'visible', pv.invisible ? 'warn' : 'good soft'));
    if (u.contacts == null) {
      $('user-relations').replaceChildren(badge(`unknown: ${u.storeError || 'the store did not answer'}`, 'bad'));
    } else {
      const blocked = u.blocked.length ? `: ${u.blocked.join(', ')}${u.blocks > u.blocked.length ? ', …' : ''}` : '';
      $('user-relations').textContent = `${fmt(u.contacts)} contact${u.contacts === 1 ? '' : 's'} · blocks ${fmt(u.blocks)}${blocked}`;
    }
    const devs = Object.entries(p.devices || {});
    $('user-devices').textContent = devs.length ? devs.map(([d, s]) => `${d} (${s})`).join(', ') : 'none';
    $('user-count').textContent = `${u.sessionCount} on node ${u.node}`;
    $('sessions').replaceChildren(...u.sessions.map((s) => {
      const kick = el('button', { type: 'button', class: 'danger small', text: 'Kick' });
      kick.addEventListener('click', () => kickUser(u.user, s.session));
      const custom = s.custom ? `${s.custom.emoji || ''} ${s.custom.text || ''}`.trim() : '';
      return el('tr', { 'data-session': s.session, 'data-device': s.device },
        el('td', {}, el('code', { text: `${s.session.slice(0, 8)}…`, title: s.session })),
        el('td', { text: s.device }),
        el('td', {}, el('code', { text: s.protocol || '–' })),
        el('td', {}, el('span', { class: `dot s-${s.status}` }), ` ${s.status}${s.idle ? ' (idle)' : ''}`),
        el('td', { class: 'wrap', text: custom || '–' }),
        el('td', {}, s.connected ? badge(s.transport === 'http' ? 'HTTP' : 'connected', 'good soft') : badge('in grace', 'warn')),
        el('td', { text: ago(s.connectedAt), title: new Date(s.connectedAt).toISOString() }),
        el('td', {}, kick));
    }));
    $('sessions-empty').hidden = u.sessions.length > 0;
    $('kick-all').disabled = u.sessions.length === 0;
    $('user').hidden = false;
    $('user').dataset.user = u.user;
  }

  // POST /v1/admin/users/{id}/kick, after a confirm(); the answer says how
  // many sessions ended here; then the user is read again.
  async function kickUser(uid, session) {
    const what = session ? `session ${session.slice(0, 12)}… of ${uid}` : `every session of ${uid}`;
    if (!window.confirm(`End ${what}? The user's client gets session_ended (kicked).`)) return;
    const reason = $('kick-reason').value.trim();
    const body = {};
    if (session) body.session = session;
    if (reason) body.reason = reason;
    let r;
    try {
      r = await api(`/v1/admin/users/${encodeURIComponent(uid)}/kick`, { method: 'POST', body });
    } catch (e) {
      if (e.status === 401 || e.status === 403) { failed(e); return; }
      showKick(`Kick failed: ${e.status ? `${e.status} ${e.code}: ${e.message}` : 'the server does not answer'}`, true);
      return;
    }
    showKick(`Kicked ${r.kicked} session${r.kicked === 1 ? '' : 's'} of ${r.user}.`, false);
    await lookUp(uid, { keepResult: true });
  }

  function showKick(text, bad) {
    $('kick-result').textContent = text;
    $('kick-result').className = `result${bad ? ' bad' : ''}`;
    $('kick-result').hidden = false;
  }

  // ---- wiring ----

  $('key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const key = $('key').value.trim();
    if (!key) { showGate('Type the admin key first.'); return; }
    signIn(key);
  });
  $('signout').addEventListener('click', () => signOut(''));
  $('lookup').addEventListener('submit', (ev) => { ev.preventDefault(); lookUp($('user-id').value.trim()); });
  $('kick-all').addEventListener('click', () => shownUser && kickUser(shownUser, null));
  $('members-close').addEventListener('click', () => { openRoom = null; $('members-box').hidden = true; renderRoomsSelection(); });
  function renderRoomsSelection() { for (const tr of $('rooms').children) tr.classList.remove('on'); }

  if (sessionStorage.getItem(KEY_NAME)) signIn(sessionStorage.getItem(KEY_NAME));
  else showGate('');
})();
