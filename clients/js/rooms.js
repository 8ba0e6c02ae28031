// rooms.js - the member model of one room, fed with room_snapshot and
// room_delta messages by the rules of docs/protocol.md ("A client keeps
// (epoch, seq) per room and applies each message").
import { frozenMap } from './frozen-map.js';

export class RoomModel {
  constructor(id) {
    this.id = id;
    this.epoch = 0;
    this.seq = 0;
    this.mode = 'normal';
    this.count = 0;
    this._members = new Map();
    this.members = frozenMap();
  }

  get since() { return { epoch: this.epoch, seq: this.seq }; }

  _publish() { this.members = frozenMap(this._members); }

  // Returns 'applied', 'ignored' or 'resync' (a gap or another epoch: the
  // caller leaves and joins again with `since`).
  apply(msg) {
    if (msg.type === 'room_snapshot') {
      this._members = new Map();
      for (const m of msg.members || []) this._members.set(m.user, Object.freeze(m));
      this.epoch = msg.epoch; this.seq = msg.seq; this.mode = msg.mode; this.count = msg.count;
      this._publish();
      return 'applied';
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
    for (const u of msg.leaves || []) this._members.delete(u);
    for (const m of msg.joins || []) this._members.set(m.user, Object.freeze(m));
    for (const m of msg.patches || []) this._members.set(m.user, Object.freeze(m));
    this.seq = msg.seq; this.mode = msg.mode; this.count = msg.count;
    this._publish();
    return 'applied';
  }
}
