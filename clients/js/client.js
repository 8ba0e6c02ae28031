// client.js - the connection: auth, heartbeats, watch list, rooms,
// reconnect with resume, page lifecycle (reloads resume their session),
// degradation.
import { createBackoff } from './backoff.js';
import { createPresenceBuffer } from './buffer.js';
import { createActivityTracker } from './activity.js';
import { createCursorPublisher, viewportFraction } from './cursor.js';
import { RoomModel } from './rooms.js';
import { timersFrom } from './timers.js';

const WATCH_CHUNK = 200; // users per watch message (stays far below 64 KiB)

function wsBase(url) {
  let u = String(url).replace(/^http(s?):/i, 'ws$1:');
  if (!/\/v1\/ws(\?|$)/.test(u)) u = u.replace(/\/+$/, '') + '/v1/ws';
  return u;
}
function httpBase(url) {
  return wsBase(url).replace(/^ws(s?):/i, 'http$1:').replace(/\/v1\/ws.*$/, '');
}
function tokenExp(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const exp = JSON.parse(globalThis.atob(part + '==='.slice((part.length + 3) % 4))).exp;
    return typeof exp === 'number' ? exp * 1000 : null;
  } catch { return null; }
}

// What the SDK keeps in sessionStorage (per tab, so per page and its
// reloads): the user's chosen status and custom status, always; the session
// id only from pagehide until the next page of the tab reads it. A duplicated
// tab (which copies sessionStorage) therefore never takes over the session
// of the live tab it was copied from.
const STORE_VERSION = 1;
function storeKey(url, user, device) {
  return `presenced:${httpBase(url)}:${user || ''}:${device || ''}`;
}
function storeRead(storage, key) {
  if (!storage) return null;
  try {
    const r = JSON.parse(storage.getItem(key) || 'null');
    return r && r.v === STORE_VERSION ? r : null;
  } catch { return null; }
}
function storeWrite(storage, key, rec) {
  if (!storage) return;
  try { storage.setItem(key, JSON.stringify({ v: STORE_VERSION, ...rec })); } catch { /* full, or private mode */ }
}
function defaultStorage(win) {
  try { return win && win.sessionStorage ? win.sessionStorage : null; } catch { return null; } // a sandboxed frame throws
}

class Emitter {
  constructor() { this.l = new Set(); }
  on(fn) { this.l.add(fn); return () => this.l.delete(fn); }
  emit(...a) { for (const fn of [...this.l]) { try { fn(...a); } catch (e) { queueMicrotask(() => { throw e; }); } } }
}

export function createClient(options = {}) {
  const {
    url, token, user, device,
    bufferMs = 200, idleMs = 5 * 60 * 1000, unknownAfterMs = 30000,
    backoff: backoffOpts = {}, random = Math.random,
    trackActivity = true, lifecycle = true, protocols = ['presenced.v1'],
    hiddenAwayMs = 60000,
  } = options;
  if (!url) throw new TypeError('createClient: url is required');
  const WS = options.WebSocket || globalThis.WebSocket;
  if (typeof WS !== 'function') throw new TypeError('createClient: no WebSocket (pass options.WebSocket)');
  const t = timersFrom(options.timers);
  const win = 'window' in options ? options.window : globalThis.window;
  const doc = 'document' in options ? options.document : globalThis.document;
  const nav = 'navigator' in options ? options.navigator : globalThis.navigator;
  const storage = 'storage' in options ? options.storage : defaultStorage(win);
  const skey = storeKey(url, user, device);

  const backoff = createBackoff({ ...backoffOpts, random });
  const stateEv = new Emitter(), presenceEv = new Emitter(), errorEv = new Emitter(), welcomeEv = new Emitter();
  const privacyEv = new Emitter();
  const buffer = createPresenceBuffer({ windowMs: bufferMs, timers: t, onFlush: (m, c) => presenceEv.emit(m, c) });

  let state = 'connecting';
  let ws = null;
  let welcome = null;
  let sessionId = null;
  let self = user || null;
  let lastToken = typeof token === 'string' ? token : null;
  let hbTimer = null, reconnectTimer = null, unknownTimer = null, refreshTimer = null;
  let closedByUser = false;
  let drainAt = null, drainTimer = null; // a draining server's reconnect: when to come back
  let active = true;
  let desired = { status: null, statusExpiresAt: null, custom: null, customExpiresAt: null };
  let hiddenTimer = null; // hiddenAwayMs after visibilitychange to hidden
  let unloading = false; // between pagehide and pageshow: nothing may be sent
  let refN = 0;
  const pendingRefs = new Map(); // ref -> {resolve, reject}
  const watchCount = new Map(); // user -> refcount
  const listTier = new Set(); // users watched with tier list
  const fresh = new Set(); // users whose next presence resets the version baseline
  const rooms = new Map(); // id -> room handle
  let serverOffset = 0;
  let privacy = null; // last known privacy settings (privacy_changed), frozen
  let privacySeq = 0; // counts privacy_changed messages
  let kicked = null; // the session_ended message of an admin kick

  function setState(s) { if (s !== state) { state = s; stateEv.emit(s); } }
  const isOpen = () => ws && welcome && ws.readyState === 1;
  function rawSend(obj) {
    if (!ws || ws.readyState !== 1) return false;
    try { ws.send(JSON.stringify(obj)); return true; } catch { return false; }
  }
  function send(obj) { return isOpen() ? rawSend(obj) : false; }
  function request(obj) {
    if (!isOpen()) return Promise.reject(Object.assign(new Error('not connected'), { code: 'not_connected' }));
    const ref = `c${++refN}`;
    return new Promise((resolve, reject) => {
      pendingRefs.set(ref, { resolve, reject });
      rawSend({ ...obj, ref });
    });
  }

  // The previous page of this tab (a reload) left its session and the
  // user's choices: resume the one, keep the other. The session id is
  // taken, not copied (see storeKey).
  // With a token the user is known only from the welcome: choices stored
  // for another user (the tab signed in anew) are dropped there.
  const stored = storeRead(storage, skey);
  let storedFor = null; // the user `desired` came from storage for, until the welcome
  const touched = { status: false, custom: false }; // set by this page
  if (stored) {
    if (stored.desired && typeof stored.desired === 'object') {
      desired = { ...desired, ...stored.desired };
      storedFor = typeof stored.user === 'string' ? stored.user : null;
    }
    if (typeof stored.sessionId === 'string' && stored.sessionId) sessionId = stored.sessionId;
    storeWrite(storage, skey, { desired, user: storedFor || undefined });
  }
  function remember(withSession) {
    const who = self || storedFor || undefined;
    storeWrite(storage, skey, withSession && sessionId ? { desired, user: who, sessionId } : { desired, user: who });
  }

  // ---- connection ----
  async function connect() {
    reconnectTimer = null;
    if (closedByUser) return;
    let tok = null;
    if (token) {
      try { tok = typeof token === 'function' ? await token() : token; } catch (e) { errorEv.emit(e); return scheduleReconnect(); }
      lastToken = tok;
      if (closedByUser) return;
    }
    const q = new URLSearchParams();
    if (!token && user) q.set('user', user);
    if (device) q.set('device', device);
    if (sessionId) q.set('resume', sessionId);
    const base = wsBase(url);
    const full = base + (q.toString() ? (base.includes('?') ? '&' : '?') + q : '');
    let sock;
    try { sock = new WS(full, protocols); } catch (e) { errorEv.emit(e); return scheduleReconnect(); }
    ws = sock;
    welcome = null;
    sock.onopen = () => { if (ws === sock && tok) rawSend({ type: 'auth', token: tok }); };
    sock.onmessage = (ev) => { if (ws === sock) onMessage(ev.data); };
    sock.onerror = () => {};
    sock.onclose = (ev) => { if (ws === sock) onClose(ev.code, ev.reason); };
  }

  function scheduleReconnect(delay) {
    if (closedByUser || reconnectTimer !== null) return;
    setState(welcomeSeen ? 'reconnecting' : 'connecting');
    reconnectTimer = t.setTimeout(connect, delay ?? backoff.next());
  }
  let welcomeSeen = false;

  function onClose(code) {
    ws = null;
    const wasOpen = welcome !== null;
    welcome = null;
    stopHeartbeat();
    if (refreshTimer !== null) { t.clearTimeout(refreshTimer); refreshTimer = null; }
    for (const { reject } of pendingRefs.values()) reject(new Error('connection closed'));
    pendingRefs.clear();
    for (const r of rooms.values()) r._disconnected();
    if (wasOpen || unknownTimer === null) degrade();
    if (closedByUser) { setState('closed'); return; }
    if (code === 4001 || ((code === 4403 || code === 4401) && typeof token !== 'function')) {
      // Our session was resumed elsewhere, or the token expired (or was
      // refused) with no way to get another.
      closedByUser = true; setState('closed'); return;
    }
    if (code === 4000 && kicked) {
      // An administrator ended this session: do not come straight back.
      const e = Object.assign(new Error(kicked.message || 'session ended by an administrator'), { code: 'kicked' });
      kicked = null; closedByUser = true; sessionId = null; errorEv.emit(e); setState('closed'); return;
    }
    if (code === 4000) sessionId = null; // the session ended: start a new one
    if (drainAt !== null) {
      // The server said when to come back (a restart): then, resuming the
      // session, spread like everyone else's.
      const wait = Math.max(0, drainAt - t.now());
      drainAt = null;
      if (drainTimer !== null) { t.clearTimeout(drainTimer); drainTimer = null; }
      scheduleReconnect(wait);
      return;
    }
    scheduleReconnect();
  }

  // {"type":"reconnect","afterMs":N}: the server drains (a restart or a
  // deploy) and closes this socket in N ms. Come back after N plus a small
  // jitter of our own, resuming the session within its grace; close the
  // socket then ourselves if the server has not.
  function onReconnect(m) {
    const after = Number.isFinite(m.afterMs) && m.afterMs > 0 ? m.afterMs : 0;
    const jitter = Math.random() * Math.min(250, 50 + after / 20);
    drainAt = t.now() + after + jitter;
    if (drainTimer !== null) t.clearTimeout(drainTimer);
    drainTimer = t.setTimeout(() => {
      drainTimer = null;
      if (ws && typeof ws.close === 'function') { try { ws.close(1000); } catch { /* gone */ } }
    }, after + jitter);
  }

  function degrade() {
    buffer.markAll('stale');
    if (unknownTimer === null) {
      unknownTimer = t.setTimeout(() => { unknownTimer = null; if (!isOpen()) buffer.markAll('unknown'); }, unknownAfterMs);
    }
  }

  function startHeartbeat(ms) {
    stopHeartbeat();
    const tick = () => { hbTimer = t.setTimeout(tick, ms); send({ type: 'heartbeat' }); };
    hbTimer = t.setTimeout(tick, ms);
  }
  function stopHeartbeat() { if (hbTimer !== null) { t.clearTimeout(hbTimer); hbTimer = null; } }

  function onWelcome(m) {
    welcome = m;
    welcomeSeen = true;
    kicked = null;
    backoff.reset();
    if (unknownTimer !== null) { t.clearTimeout(unknownTimer); unknownTimer = null; }
    if (m.user) self = m.user;
    const resumed = !!m.resumed && m.sessionId === sessionId;
    if (storedFor !== null && m.user && m.user !== storedFor) {
      // Another user's choices: forget those this page did not make.
      if (!touched.status) { desired.status = null; desired.statusExpiresAt = null; }
      if (!touched.custom) { desired.custom = null; desired.customExpiresAt = null; }
    }
    storedFor = null;
    sessionId = m.sessionId || null;
    if (m.heartbeatMs) startHeartbeat(m.heartbeatMs);
    if (typeof token === 'function' && lastToken) armRefresh(lastToken);
    setState('open');
    if (sessionId && !resumed) reassert();
    else if (!active) send({ type: 'activity', active: false });
    const users = [...watchCount.keys()];
    for (const u of users) fresh.add(u);
    for (const tier of ['live', 'list']) {
      const us = users.filter((u) => (listTier.has(u) ? 'list' : 'live') === tier);
      for (let i = 0; i < us.length; i += WATCH_CHUNK) {
        send({ type: 'watch', users: us.slice(i, i + WATCH_CHUNK), ...(tier === 'list' ? { tier } : {}) });
      }
    }
    for (const r of rooms.values()) r._rejoin();
    welcomeEv.emit(m);
  }

  // A new session: apply what the user chose before.
  function reassert() {
    const now = t.now();
    if (desired.status) {
      const left = desired.statusExpiresAt ? desired.statusExpiresAt - now : null;
      if (left === null || left > 0) send({ type: 'status', status: desired.status, ...(left ? { expiresInMs: left } : {}) });
    }
    if (desired.custom) {
      const left = desired.customExpiresAt ? desired.customExpiresAt - now : null;
      if (left === null || left > 0) send({ type: 'custom', ...desired.custom, ...(left ? { expiresInMs: left } : {}) });
    }
    if (!active) send({ type: 'activity', active: false });
  }

  function armRefresh(tok) {
    const exp = tokenExp(tok);
    if (!exp) return;
    const at = Math.max(1000, exp - t.now() - 60000);
    refreshTimer = t.setTimeout(async () => {
      refreshTimer = null;
      try {
        const fresh2 = await token();
        lastToken = fresh2;
        if (isOpen()) { rawSend({ type: 'auth', token: fresh2 }); armRefresh(fresh2); }
      } catch (e) { errorEv.emit(e); }
    }, at);
  }

  function onMessage(data) {
    let m;
    try { m = JSON.parse(typeof data === 'string' ? data : String(data)); } catch { return; }
    if (!m || typeof m.type !== 'string') return;
    if (m.ref !== undefined && pendingRefs.has(String(m.ref)) && (m.type === 'ack' || m.type === 'error' || m.type === 'pong')) {
      const p = pendingRefs.get(String(m.ref)); pendingRefs.delete(String(m.ref));
      if (m.type === 'error') { const e = new Error(m.message || m.code); e.code = m.code; p.reject(e); } else p.resolve(m);
      if (m.type !== 'error' || !String(m.ref).startsWith('r')) return;
    }
    switch (m.type) {
      case 'welcome': onWelcome(m); break;
      case 'reconnect': onReconnect(m); break;
      case 'presence': {
        const p = m.presence; if (!p || !watchCount.has(p.user)) break;
        buffer.push(p, { force: fresh.delete(p.user) });
        break;
      }
      case 'presence_list': // the list tier's batch: one entry per user that changed
        for (const p of Array.isArray(m.presence) ? m.presence : []) {
          if (p && watchCount.has(p.user)) buffer.push(p, { force: fresh.delete(p.user) });
        }
        break;
      case 'pong': if (typeof m.time === 'number') serverOffset = m.time - t.now(); break;
      case 'room_snapshot': case 'room_delta': case 'room_joined': case 'ephemeral': {
        const r = rooms.get(m.room); if (r) r._onMessage(m); break;
      }
      case 'error': {
        const r = [...rooms.values()].find((x) => x._ref === m.ref);
        if (r) { r._onError(m); break; }
        errorEv.emit(Object.assign(new Error(m.message || m.code), { code: m.code }));
        if (m.code === 'unauthorized' && !welcome && ws) {
          // The token was refused. A fixed one will not get better: stop.
          // A token function gets another try with backoff.
          if (typeof token !== 'function') closedByUser = true;
          try { ws.close(1000); } catch { /* gone */ }
        }
        break;
      }
      case 'privacy_changed': {
        const p = m.privacy;
        if (!p || typeof p !== 'object') break;
        privacySeq++;
        setPrivacyState(p);
        break;
      }
      case 'ack': { for (const r of rooms.values()) r._onAck(m.ref); break; }
      case 'session_ended':
        if (m.reason !== 'leave') sessionId = null;
        if (m.reason === 'kicked') kicked = m;
        break;
      default: break;
    }
  }

  function setPrivacyState(p) {
    const next = Object.freeze({
      online: typeof p.online === 'string' ? p.online : (privacy ? privacy.online : 'everyone'),
      lastSeen: typeof p.lastSeen === 'string' ? p.lastSeen : (privacy ? privacy.lastSeen : 'everyone'),
      invisible: typeof p.invisible === 'boolean' ? p.invisible : (privacy ? privacy.invisible : false),
    });
    if (privacy && next.online === privacy.online && next.lastSeen === privacy.lastSeen && next.invisible === privacy.invisible) return;
    privacy = next;
    privacyEv.emit(privacy);
  }

  // ---- rooms ----
  function makeRoom(id, meta, roomToken) {
    const model = new RoomModel(id);
    const changeEv = new Emitter(), ephEv = new Emitter(), roomErrEv = new Emitter();
    let phase = 'idle'; // idle | joining | leaving | joined | left
    let joinedOnce = false;
    let leaveRef = null;
    let myMeta = meta;
    let readyResolve; const ready = new Promise((r) => { readyResolve = r; });
    const room = {
      id,
      _ref: null,
      get members() { return model.members; },
      get count() { return model.count; },
      get mode() { return model.mode; },
      get epoch() { return model.epoch; },
      get seq() { return model.seq; },
      get joined() { return phase === 'joined'; },
      ready,
      onChange(fn) { return changeEv.on(fn); },
      onEphemeral(fn) { return ephEv.on(fn); },
      onError(fn) { return roomErrEv.on(fn); },
      patch(p) {
        if (p && typeof p === 'object' && !Array.isArray(p) && myMeta && typeof myMeta === 'object') myMeta = mergePatch(myMeta, p);
        else myMeta = p;
        return phase === 'joined' ? request({ type: 'patch', room: id, meta: p }) : Promise.resolve(null);
      },
      publish(kind, data) { return phase === 'joined' ? send({ type: 'ephemeral', room: id, kind, data }) : false; },
      cursor(opts = {}) {
        return createCursorPublisher({ timers: t, ...opts, send: (pos) => room.publish(opts.kind || 'cursor', pos) });
      },
      leave() {
        rooms.delete(id);
        phase = 'left';
        return isOpen() ? request({ type: 'room_leave', room: id }).catch(() => null) : Promise.resolve(null);
      },
      _join(since) {
        if (!isOpen()) return;
        phase = 'joining';
        const ref = room._ref = `r${++refN}`;
        const msg = { type: 'join', room: id, ref };
        if (myMeta !== undefined) msg.meta = myMeta;
        if (since) msg.since = since;
        if (!roomToken) { rawSend(msg); return; }
        // A room token is bound to the connection: ask for one per connection.
        const w = welcome;
        Promise.resolve()
          .then(() => (typeof roomToken === 'function' ? roomToken({ room: id, connectionId: w.connectionId, user: self }) : roomToken))
          .then((tok) => {
            if (welcome !== w || room._ref !== ref || phase === 'left' || !isOpen()) return; // superseded
            if (myMeta !== undefined) msg.meta = myMeta;
            rawSend(tok ? { ...msg, token: String(tok) } : msg);
          }, (e) => {
            if (room._ref !== ref) return;
            phase = 'idle';
            roomErrEv.emit(Object.assign(e instanceof Error ? e : new Error(String(e)), { code: e && e.code ? e.code : 'room_token' }));
          });
      },
      _rejoin() { if (phase !== 'left') room._join(joinedOnce ? model.since : undefined); },
      _disconnected() { if (phase !== 'left') phase = 'idle'; },
      _resync() {
        // A gap or another epoch: leave and join again with what we have.
        const mine = self && model._members.get(self);
        if (mine) myMeta = mine.meta;
        phase = 'leaving';
        leaveRef = `l${++refN}`;
        rawSend({ type: 'room_leave', room: id, ref: leaveRef });
        room._join(model.since);
        phase = 'leaving';
      },
      _onAck(ref) { if (ref === leaveRef) { leaveRef = null; phase = 'joining'; } },
      _onError(m) { phase = 'idle'; roomErrEv.emit(Object.assign(new Error(m.message || m.code), { code: m.code })); },
      _onMessage(m) {
        if (m.type === 'ephemeral') {
          if (m.user !== self) ephEv.emit(m);
          return;
        }
        if (phase === 'leaving' || phase === 'left' || phase === 'idle') return;
        const r = model.apply(m);
        if (r === 'applied' || r === 'diverged') changeEv.emit(model.members, room);
        if (r === 'resync') room._resync();
        else if (r === 'diverged') { model.forget(); room._resync(); } // a snapshot, not deltas
        if (m.type === 'room_joined' && phase === 'joining') {
          phase = 'joined'; joinedOnce = true;
          const mine = self && model._members.get(self);
          if (mine) myMeta = mine.meta;
          readyResolve(room);
          changeEv.emit(model.members, room);
        }
      },
      _model: model,
    };
    return room;
  }

  function mergePatch(target, patch) {
    const out = { ...target };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else if (v && typeof v === 'object' && !Array.isArray(v)) out[k] = mergePatch(out[k] && typeof out[k] === 'object' && !Array.isArray(out[k]) ? out[k] : {}, v);
      else out[k] = v;
    }
    return out;
  }

  // ---- activity and page lifecycle (browser only; every global guarded) ----
  function setActive(a) {
    active = a;
    send({ type: 'activity', active: a });
  }
  const tracker = trackActivity && (win || doc)
    ? createActivityTracker({ target: win || doc, idleMs, timers: t, onChange: setActive })
    : null;
  const listeners = [];
  function listen(target, ev, fn) {
    if (target && typeof target.addEventListener === 'function') {
      target.addEventListener(ev, fn, { capture: true });
      listeners.push([target, ev, fn]);
    }
  }
  function wake() {
    if (closedByUser) return;
    if (isOpen()) { send({ type: 'heartbeat' }); return; }
    if (reconnectTimer !== null) { t.clearTimeout(reconnectTimer); reconnectTimer = null; connect(); }
  }
  function clearHidden() { if (hiddenTimer !== null) { t.clearTimeout(hiddenTimer); hiddenTimer = null; } }
  // A hidden tab goes away after hiddenAwayMs, not at once: a page that
  // unloads (a reload) is hidden and gets its pagehide in one task, in
  // either order (the standard: hidden first; Chromium: pagehide first), so
  // the pagehide either cancels the timer or keeps it from being armed.
  function armHidden() {
    clearHidden();
    if (typeof hiddenAwayMs !== 'number' || !(hiddenAwayMs >= 0) || hiddenAwayMs === Infinity) return;
    hiddenTimer = t.setTimeout(() => {
      hiddenTimer = null;
      if (unloading || closedByUser || !doc || doc.visibilityState !== 'hidden') return;
      active = false; send({ type: 'activity', active: false });
    }, hiddenAwayMs);
  }
  function onVisible() { clearHidden(); active = true; if (tracker) tracker.input(); send({ type: 'activity', active: true }); wake(); }
  if (lifecycle) {
    listen(doc, 'visibilitychange', () => {
      if (unloading) return;
      if (doc.visibilityState === 'visible') onVisible();
      else if (doc.visibilityState === 'hidden') armHidden();
    });
    listen(doc, 'freeze', () => { if (unloading) return; active = false; send({ type: 'activity', active: false }); });
    listen(doc, 'resume', () => { if (!unloading) onVisible(); });
    listen(win, 'pagehide', () => { suspend(); });
    listen(win, 'pageshow', (e) => {
      if (!e || !e.persisted || !unloading) return;
      // Back from the back/forward cache: resume the session (within its
      // grace nobody saw anything), or start a new one.
      unloading = false;
      remember(false);
      if (closedByUser === 'pagehide') { closedByUser = false; if (reconnectTimer === null) connect(); }
    });
    listen(win, 'online', () => wake());
    if (doc && doc.visibilityState === 'hidden') armHidden();
  }

  // pagehide: the page is unloading (a reload, a navigation, the tab
  // closing) or entering the back/forward cache. Send nothing: no leave and
  // no away, since a reload comes straight back. Close the socket, which
  // starts the server's reconnect grace (5 s): the next page of this tab
  // resumes the session within it and nobody sees a thing; a tab closed for
  // good shows offline when the grace ends. The session id goes to
  // sessionStorage for that next page.
  function suspend() {
    if (unloading) return;
    unloading = true;
    clearHidden();
    if (closedByUser) return; // closed, or left: nothing to resume
    remember(true);
    closedByUser = 'pagehide';
    if (reconnectTimer !== null) { t.clearTimeout(reconnectTimer); reconnectTimer = null; }
    stopHeartbeat();
    if (ws && typeof ws.close === 'function') { try { ws.close(1000); } catch { /* gone */ } }
    if (!ws) setState('closed');
  }

  // An explicit leave: the session ends now (offline at once for others).
  function leaveNow() {
    clearHidden();
    if (isOpen()) {
      rawSend({ type: 'leave' });
    } else if (sessionId && nav && typeof nav.sendBeacon === 'function') {
      const body = JSON.stringify({ ...(self ? { user: self } : {}), sessionId, leave: true });
      const q = lastToken ? `?token=${encodeURIComponent(lastToken)}` : '';
      try { nav.sendBeacon(`${httpBase(url)}/v1/heartbeat${q}`, body); } catch { /* best effort */ }
    }
    closedByUser = 'pagehide'; // a page restored from the back/forward cache starts anew
    sessionId = null;
    remember(false);
    if (reconnectTimer !== null) { t.clearTimeout(reconnectTimer); reconnectTimer = null; }
    if (ws && ws.readyState !== 1 && typeof ws.close === 'function') { try { ws.close(); } catch { /* gone */ } }
    if (!ws) setState('closed');
  }

  // ---- public API ----
  const client = {
    get state() { return state; },
    get sessionId() { return sessionId; },
    get user() { return self; },
    get welcome() { return welcome; },
    get presence() { return buffer.view; },
    get active() { return active; },
    get privacy() { return privacy; },
    onState(fn) { return stateEv.on(fn); },
    onPrivacy(fn) { return privacyEv.on(fn); },
    onPresence(fn) { return presenceEv.on(fn); },
    onError(fn) { return errorEv.on(fn); },
    onWelcome(fn) { return welcomeEv.on(fn); },
    getPresence(u) { return buffer.get(u); },
    serverNow() { return t.now() + serverOffset; },
    // tier 'list' batches these users' transitions over the server's
    // watch-batch-ms (a friend list); 'live' (the default) sends each at
    // once. A user's tier is that of its first watch() still held.
    watch(users, { tier = 'live' } = {}) {
      const list = [...new Set(Array.isArray(users) ? users : [users])];
      const added = [];
      for (const u of list) {
        const n = watchCount.get(u) || 0;
        watchCount.set(u, n + 1);
        if (n === 0) {
          added.push(u); fresh.add(u);
          if (tier === 'list') listTier.add(u); else listTier.delete(u);
        }
      }
      for (let i = 0; i < added.length; i += WATCH_CHUNK) {
        send({ type: 'watch', users: added.slice(i, i + WATCH_CHUNK), ...(tier === 'list' ? { tier } : {}) });
      }
      let done = false;
      return () => { if (!done) { done = true; release(list, false); } };
    },
    unwatch(users) { release(Array.isArray(users) ? users : [users], true); },
    setStatus(status, { expiresInMs } = {}) {
      desired.status = status; desired.statusExpiresAt = expiresInMs ? t.now() + expiresInMs : null;
      touched.status = true;
      remember(false);
      return sendOrQueue({ type: 'status', status, ...(expiresInMs ? { expiresInMs } : {}) });
    },
    setCustom(custom, { expiresInMs } = {}) {
      const c = custom ? { ...(custom.text ? { text: custom.text } : {}), ...(custom.emoji ? { emoji: custom.emoji } : {}) } : {};
      desired.custom = Object.keys(c).length ? c : null;
      desired.customExpiresAt = expiresInMs ? t.now() + expiresInMs : null;
      touched.custom = true;
      remember(false);
      return sendOrQueue({ type: 'custom', ...c, ...(expiresInMs ? { expiresInMs } : {}) });
    },
    setActive(a) { setActive(!!a); },
    setPrivacy(settings = {}) {
      // Durable on the server: sent only on an open session, never queued.
      const msg = { type: 'privacy' };
      for (const k of ['online', 'lastSeen', 'invisible']) if (settings[k] !== undefined) msg[k] = settings[k];
      const seq = privacySeq;
      return request(msg).then(() => {
        // The ack comes once the change is stored. privacy_changed (sent to
        // every session) is the authority; until it arrives, assume ours.
        if (privacySeq === seq) { const { type, ...p } = msg; setPrivacyState(p); }
        return privacy;
      });
    },
    heartbeat() { return send({ type: 'heartbeat' }); },
    ping() { return request({ type: 'ping' }).then((m) => { serverOffset = m.time - t.now(); return m; }); },
    join(id, { meta, token: roomToken } = {}) {
      let r = rooms.get(id);
      if (r) return r;
      r = makeRoom(id, meta, roomToken);
      rooms.set(id, r);
      r._join();
      return r;
    },
    room(id) { return rooms.get(id); },
    cursor: createCursorPublisher,
    viewportFraction: (x, y) => viewportFraction(x, y, win),
    leave() { leaveNow(); },
    close() {
      closedByUser = true;
      for (const h of [hbTimer, reconnectTimer, unknownTimer, refreshTimer, hiddenTimer, drainTimer]) if (h !== null) t.clearTimeout(h);
      hbTimer = reconnectTimer = unknownTimer = refreshTimer = hiddenTimer = drainTimer = null;
      if (tracker) tracker.stop();
      for (const [tg, ev, fn] of listeners.splice(0)) tg.removeEventListener(ev, fn, { capture: true });
      buffer.dispose();
      if (ws) { try { ws.close(1000); } catch { /* gone */ } } else setState('closed');
    },
  };

  function release(list, force) {
    const gone = [];
    for (const u of list) {
      const n = watchCount.get(u) || 0;
      if (n === 0) continue;
      if (force || n === 1) { watchCount.delete(u); listTier.delete(u); fresh.delete(u); gone.push(u); buffer.remove(u); } else watchCount.set(u, n - 1);
    }
    for (let i = 0; i < gone.length; i += WATCH_CHUNK) send({ type: 'unwatch', users: gone.slice(i, i + WATCH_CHUNK) });
  }
  function sendOrQueue(msg) {
    // Queued by `desired`: a new session re-applies it; a resumed one kept it.
    return isOpen() ? request(msg) : Promise.resolve(null);
  }

  connect();
  return client;
}
