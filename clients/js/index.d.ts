// Hand-written declarations for @presenced/client.

export type Status = 'online' | 'away' | 'busy' | 'dnd' | 'offline';
export type DeviceType = 'desktop' | 'mobile' | 'tablet' | 'web' | 'other';
export type AgeUnit = 'seconds' | 'minutes' | 'today' | 'this_week' | 'this_month' | 'this_year' | 'long_ago';
export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface LastSeen { at: number; ago: AgeUnit; value?: number }
export interface CustomStatus { text?: string; emoji?: string; expiresAt?: number }

/**
 * The server's presence object (docs/protocol.md, Watch lists). `version`
 * is present only in your own presence; others' presence carries none (it is
 * ordered by the stream). An invisible, blocked, hidden or unknown user reads
 * `{user, status: 'offline', devices: {}}`.
 */
export interface Presence {
  user: string;
  status: Status;
  devices: Partial<Record<DeviceType, Exclude<Status, 'offline'>>>;
  custom?: CustomStatus;
  lastSeen?: LastSeen;
  version?: number;
}

/** Who may see your online status / your last seen. */
export type Visibility = 'everyone' | 'contacts' | 'nobody';
/** Your privacy settings (docs/protocol.md, Privacy). */
export interface Privacy {
  readonly online: Visibility;
  readonly lastSeen: Visibility;
  /** Everyone but you sees you offline (last seen frozen), and rooms hide you. */
  readonly invisible: boolean;
}
/** What reads return: `stale` while disconnected; after `unknownAfterMs` the status is 'unknown'. */
export interface PresenceView extends Omit<Presence, 'status'> {
  readonly status: Status | 'unknown';
  readonly stale: boolean;
  readonly lastKnown?: Presence;
}
export type PresenceMap = ReadonlyMap<string, Readonly<PresenceView>>;

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  now(): number;
}

export interface ClientOptions {
  /** Server base (http(s):// or ws(s)://), or the full /v1/ws URL. */
  url: string;
  /** JWT, or a function returning one (called on every connect and before expiry). */
  token?: string | (() => string | Promise<string>);
  /** Development mode (auth = none): the user id sent as ?user=. */
  user?: string;
  device?: DeviceType;
  WebSocket?: new (url: string, protocols?: string | string[]) => any;
  /** Presence coalescing window, default 200 ms. */
  bufferMs?: number;
  /** Idle time before activity:false, default 5 min. */
  idleMs?: number;
  /** Disconnected time after which reads say 'unknown', default 30 s. */
  unknownAfterMs?: number;
  backoff?: { baseMs?: number; capMs?: number };
  random?: () => number;
  timers?: Partial<Timers>;
  trackActivity?: boolean;
  /**
   * Page Lifecycle handling, default true: a reload or a back/forward-cache
   * visit resumes the session (no leave on pagehide; the session id waits in
   * `storage`), hidden tabs go away after `hiddenAwayMs`, `freeze` makes the
   * session away, `resume`/visible makes it active again.
   */
  lifecycle?: boolean;
  /**
   * How long a tab stays hidden (visibilitychange to hidden) before the
   * session goes away (activity:false); undone when it is visible again,
   * never sent while the page unloads. Default 60000; null turns it off.
   */
  hiddenAwayMs?: number | null;
  /**
   * Where the next page of this tab finds the session to resume and the
   * user's chosen status and custom status (re-asserted on a new session).
   * Default `window.sessionStorage`; null keeps nothing across pages.
   */
  storage?: { getItem(key: string): string | null; setItem(key: string, value: string): void } | null;
  protocols?: string[];
  window?: any; document?: any; navigator?: any;
}

export interface Member { user: string; joinedAt: number; meta: unknown }

export interface CursorPublisher<P = CursorPosition> {
  /** Returns false when skipped (unchanged). */
  update(pos: P): boolean;
  stop(): void;
  reset(): void;
}
export type CursorPosition = { x: number; y: number } | { block: string; offset: number } | null;

export interface EphemeralMessage { type: 'ephemeral'; room: string; user: string; kind: string; data: unknown }

export interface Room {
  readonly id: string;
  readonly members: ReadonlyMap<string, Readonly<Member>>;
  readonly count: number;
  readonly mode: 'normal' | 'interval';
  readonly epoch: number;
  readonly seq: number;
  readonly joined: boolean;
  /** Resolves at the first room_joined. */
  readonly ready: Promise<Room>;
  onChange(fn: (members: ReadonlyMap<string, Readonly<Member>>, room: Room) => void): () => void;
  /** Ephemeral messages of others (your own are filtered out). */
  onEphemeral(fn: (msg: EphemeralMessage) => void): () => void;
  onError(fn: (err: Error & { code?: string }) => void): () => void;
  /** RFC 7386 merge patch of your member metadata. */
  patch(meta: unknown): Promise<unknown>;
  publish(kind: string, data: unknown): boolean;
  cursor(opts?: { kind?: string; maxPerSecond?: number }): CursorPublisher;
  leave(): Promise<unknown>;
}

export interface Client {
  readonly state: ConnectionState;
  readonly sessionId: string | null;
  readonly user: string | null;
  readonly welcome: Record<string, unknown> | null;
  readonly presence: PresenceMap;
  readonly active: boolean;
  /** Your privacy settings as last told by the server (`privacy_changed`, sent after every welcome); null before. */
  readonly privacy: Privacy | null;
  onState(fn: (s: ConnectionState) => void): () => void;
  /** Called with the new settings after each change (from any of your sessions, or the admin API). */
  onPrivacy(fn: (privacy: Privacy) => void): () => void;
  /** One call per flush: the whole (immutable) map and the users that changed. */
  onPresence(fn: (map: PresenceMap, changed: readonly string[]) => void): () => void;
  /** Server errors without a request of their own; `unauthorized` (a refused token) and `kicked` (an admin ended the session; the client stays closed) among them. */
  onError(fn: (err: Error & { code?: string }) => void): () => void;
  onWelcome(fn: (welcome: Record<string, unknown>) => void): () => void;
  getPresence(user: string): Readonly<PresenceView> | undefined;
  /** Reference-counted; returns the matching release. */
  watch(users: string | string[], opts?: { tier?: 'live' | 'list' }): () => void;
  unwatch(users: string | string[]): void;
  /**
   * An explicit status sticks until the next setStatus: activity and custom
   * statuses never change it ('online' hands it back to activity). Kept
   * across reloads and re-asserted on every new session, like setCustom.
   */
  setStatus(status: Exclude<Status, 'offline'>, opts?: { expiresInMs?: number }): Promise<unknown>;
  setCustom(custom: { text?: string; emoji?: string } | null, opts?: { expiresInMs?: number }): Promise<unknown>;
  setActive(active: boolean): void;
  /**
   * Changes any subset of your privacy settings. Resolves with the settings
   * once the server has stored them (`ack`); rejects with the server's error
   * (`err.code`: `bad_request`, `store_unavailable`, ...) or `not_connected`.
   */
  setPrivacy(settings: Partial<{ online: Visibility; lastSeen: Visibility; invisible: boolean }>): Promise<Privacy | null>;
  heartbeat(): boolean;
  ping(): Promise<{ type: 'pong'; time: number }>;
  serverNow(): number;
  /**
   * `token`: a per-room subscription token (servers with room-token-secret):
   * "<exp>.<hex HMAC-SHA256 of "<user>:<room>:<exp>">" from your backend
   * (exp in Unix seconds). It is bound to the user and expires, so pass a
   * function: it is called for every (re)join with the room, the user and
   * the connection id of the current welcome.
   */
  join(room: string, opts?: { meta?: unknown; token?: string | ((req: { room: string; connectionId: string; user: string | null }) => string | Promise<string>) }): Room;
  room(id: string): Room | undefined;
  /** createCursorPublisher, for positions sent another way (room.cursor() is the usual one). */
  cursor<P = CursorPosition>(opts: { send: (pos: P) => void; maxPerSecond?: number; timers?: Partial<Timers> }): CursorPublisher<P>;
  viewportFraction(clientX: number, clientY: number): { x: number; y: number };
  /**
   * Ends the session now ({"type":"leave"}, or a beacon when the socket is
   * gone): others see you offline at once. Not needed when the page closes:
   * its session ends when the server's reconnect grace (5 s) runs out.
   */
  leave(): void;
  close(): void;
}

export function createClient(options: ClientOptions): Client;
export function formatLastSeen(lastSeen: Presence | PresenceView | LastSeen | number | null | undefined, now?: number): string;
export function ageOf(ms: number): { ago: AgeUnit; value?: number };
export function createBackoff(opts?: { baseMs?: number; capMs?: number; random?: () => number }): { next(): number; reset(): void; readonly attempt: number };
export function createPresenceBuffer(opts?: { windowMs?: number; timers?: Partial<Timers>; onFlush?: (map: PresenceMap, changed: readonly string[]) => void }): {
  push(p: Presence, opts?: { force?: boolean }): boolean;
  remove(user: string): void;
  markAll(level: 'stale' | 'unknown'): void;
  flush(): void;
  readonly view: PresenceMap;
  get(user: string): Readonly<PresenceView> | undefined;
  dispose(): void;
};
export const ACTIVITY_EVENTS: readonly string[];
export function createActivityTracker(opts?: { target?: any; idleMs?: number; timers?: Partial<Timers>; onChange?: (active: boolean) => void }): { readonly active: boolean; input(): void; stop(): void };
export function createCursorPublisher<P = CursorPosition>(opts: { send: (pos: P) => void; maxPerSecond?: number; timers?: Partial<Timers> }): CursorPublisher<P>;
export function viewportFraction(clientX: number, clientY: number, win?: { innerWidth: number; innerHeight: number }): { x: number; y: number };
export class RoomModel {
  constructor(id: string);
  readonly id: string; epoch: number; seq: number; mode: 'normal' | 'interval'; count: number;
  members: ReadonlyMap<string, Readonly<Member>>;
  readonly since: { epoch: number; seq: number };
  /** 'diverged': applied, but the member digest differs (call forget() and join again). */
  apply(msg: Record<string, any>): 'applied' | 'ignored' | 'resync' | 'diverged';
  /** Forgets epoch and seq, so that the next join gets a snapshot. */
  forget(): void;
}
/** FNV-1a-64 of a user id: one member's share of a room's member digest. */
export function memberDigest(user: string): bigint;
export function frozenMap<K, V>(entries?: Iterable<readonly [K, V]>): ReadonlyMap<K, V>;
/** From '@presenced/client/react'. */
export function createPresenceHooks(React: any): {
  usePresence(client: Client, users: string | string[]): PresenceMap;
  useConnectionState(client: Client): ConnectionState;
};
