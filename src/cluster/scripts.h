/* SPDX-License-Identifier: MIT */
/*
 * scripts.h - the Lua scripts that change presence state in Redis, each
 * one single-slot transaction (docs/cluster.md has the key layout).
 *
 * SCRIPT_USER_PUT
 *   KEYS: pd:<app>:{u:<h>}:s (hash: node epoch -> contribution),
 *         pd:<app>:{u:<h>}:a (hash: b = view body, v = view, ver)
 *   ARGV: uid, field (<node>.<epoch>), contribution JSON or "" (remove),
 *         seen (wall ms, with a removal), policy name, dead epochs
 *         (comma-separated fields to drop), retention ms of the view key
 *   Sets or removes the field, drops the dead ones, merges what is left
 *   (contrib.h) and, only when the merged view differs from the stored
 *   one, stores it with ver = max(ver + 1, Redis time ms << 10).
 *   Returns {changed (0|1), view JSON}, and when changed a third element,
 *   1 when the user turned online or offline (sessions n went from 0 or
 *   to 0): that put is the transition's one producer (webhooks).
 * SCRIPT_USER_READ
 *   KEYS: as SCRIPT_USER_PUT; ARGV: dead epochs (comma-separated)
 *   A reader's look at the user while some epoch is dead (past lease and
 *   grace) and maybe not swept yet: {1, epoch} when the user still has
 *   that dead epoch's field (the reader then drops it with
 *   SCRIPT_USER_PUT, which merges what is left), else {0, view JSON}, or
 *   {0} when none is stored. Writes nothing.
 * SCRIPT_USER_TAKE
 *   KEYS: pd:<app>:{u:<h>}:s, pd:<app>:{u:<h>}:r (hash: session id ->
 *         its resume record, contrib.h)
 *   ARGV: session id, self
 *   Takes a session over from the node that holds it (resume across
 *   nodes): the record goes (so exactly one node takes it), and unless its
 *   deadline passed by Redis's clock, the holder's contribution moves to
 *   self's field in the same step when it is that one session's alone
 *   ("n" 1) and self has none yet, so the merged view never changes.
 *   Returns {1, record}, or {0} when there is no live record. Publishes
 *   nothing; the caller's next put merges (a no-op when nothing changed).
 * SCRIPT_NODE_RENEW
 *   KEYS: pd:<app>:{c}:nodes (zset: <node>.<epoch> -> lease deadline),
 *         pd:<app>:{c}:sweep:<self> (a sweeper's claim on this epoch)
 *   ARGV: self, lease ms, "1" when this epoch's lease was registered
 *         before (else "0")
 *   Returns {Redis time ms, {member, deadline, member, deadline, ...}, "ok"},
 *   or {Redis time ms, {}, "gone"} without renewing when ARGV[3] is "1"
 *   and self is no longer a member (swept, or Redis lost its data) or a
 *   sweeper claimed it: the epoch is dead, the node must take a new one.
 * SCRIPT_ROOM_PUT
 *   KEYS: pd:<app>:{r:<h>}:m (hash: "<node>.<epoch> <user>" ->
 *         "<joinedAt> <meta JSON>", this node epoch's visible members),
 *         pd:<app>:{r:<h>}:q (the room's seq),
 *         pd:<app>:{r:<h>}:c (hash: user -> how many epochs hold it, and
 *         "#e" -> the room's epoch, Redis ms when the hash was made)
 *   ARGV: self, room id, the room's channel pd:<app>:{r:<h>}, ops: lines
 *         "+ <user> <joinedAt> <meta>" (set), "- <user>" (remove) or "*"
 *         (remove every field of self first)
 *   Applies the ops to self's fields, stamps "@<self>" with Redis's time
 *   in ms (when this epoch last wrote the room), bumps the seq by one and publishes
 *   "<seq> <self> <room>\n<ops>" on the channel, in the same transaction:
 *   every subscriber sees the room's messages in seq order, gap-free.
 *   Returns {seq, hooks}: hooks is "<epoch> <members before> <after>\n"
 *   then "+<user>" for each user no epoch held before and "-<user>" for
 *   each no epoch holds now, one per line: the room's transitions, known
 *   to this script alone, so its caller is their one producer (webhooks).
 * SCRIPT_ROOM_GET
 *   KEYS: as SCRIPT_ROOM_PUT; ARGV: dead epochs (comma-separated)
 *   Drops the dead epochs' fields and returns {seq, Redis time ms, field,
 *   value, ..., "#", hooks}, "@<node>.<epoch>" stamps included; hooks as
 *   SCRIPT_ROOM_PUT's, for the members the drop took out (the dead
 *   node's last members are this reader's to report).
 */
#ifndef SCRIPTS_H
#define SCRIPTS_H

extern const char script_user_put[];
extern const char script_user_read[];
extern const char script_user_take[];
extern const char script_node_renew[];
extern const char script_room_put[];
extern const char script_room_get[];

#endif
