// rooms.js - the member model of one room, fed with room_snapshot and
// room_delta messages by the rules of docs/protocol.md ("A client keeps
// (epoch, seq) per room and applies each message"), and checked against
// the member digest each message carries ("Member digest").
import { frozenMap } from './frozen-map.js';

const MASK = (1n << 64n) - 1n;
const utf8 = new TextEncoder();

// FNV-1a-64 of a user id's UTF-8 bytes: one member's share of a digest.
export function memberDigest(user) {
  let h = 0xcbf29ce484222325n;
  for (const b of utf8.encode(user)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & MASK;
  return h;
}

export class RoomModel {
  constructor(id) {
    this.id = id;
    this.epoch = 0;
    this.seq = 0;
    this.mode = 'normal';
    this.count = 0;
    this._members = new Map();
    this._digest = 0n; // XOR of memberDigest() over _members
    this.members = frozenMap();
  }

  _set(m) {
    if (!this._members.has(m.user)) this._digest ^= memberDigest(m.user);
    this._members.set(m.user, Object.freeze(m));
  }

  _delete(user) {
    if (this._members.delete(user)) this._digest ^= memberDigest(user);
  }

  // After a message applied: 'diverged' when the model, which lists every
  // member in normal mode, is not the member set the server's digest says.
  _check(msg) {
    if (this.mode !== 'normal' || typeof msg.digest !== 'string') return 'applied';
    return BigInt('0x' + msg.digest) === this._digest ? 'applied' : 'diverged';
  }

  // Forgets the numbering, so that the next join gets a snapshot.
  forget() { this.epoch = 0; this.seq = 0; }

  get since() { return { epoch: this.epoch, seq: this.seq }; }

  _publish() { this.members = frozenMap(this._members); }

  // Returns 'applied', 'ignored', 'resync' (a gap or another epoch: the
  // caller leaves and joins again with `since`) or 'diverged' (applied,
  // but the digest differs: the caller forget()s and joins again).
  apply(msg) {
    if (msg.type === 'room_snapshot') {
      this._members = new Map();
      this._digest = 0n;
      for (const m of msg.members || []) this._set(m);
      this.epoch = msg.epoch; this.seq = msg.seq; this.mode = msg.mode; this.count = msg.count;
      this._publish();
      return this._check(msg);
    }
    if (msg.type === 'room_joined') {
      // Carries the state just sent: nothing to apply, but an absent room
      // (epoch 0) or a resume with nothing missed leaves the model as it is.
      if (msg.epoch === this.epoch && msg.seq === this.seq) { this.mode = msg.mode; this.count = msg.count; }
      return 'ignored';
    }
    if (msg.type !== 'room_delta') return 'ignored';
    if (msg.epoch === this.epoch) {
      if (msg.seq <= this.seq) return 'ignored';
      if (msg.seq !== this.seq + 1) return 'resync';
    } else if (!(msg.seq === 1 && this.count === 0 && this._members.size === 0)) {
      return 'resync';
    } else {
      this.epoch = msg.epoch; // the room was deleted and created again
    }
    for (const u of msg.leaves || []) this._delete(u);
    for (const m of msg.joins || []) this._set(m);
    for (const m of msg.patches || []) this._set(m);
    this.seq = msg.seq; this.mode = msg.mode; this.count = msg.count;
    this._publish();
    return this._check(msg);
  }
}
