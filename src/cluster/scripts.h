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
 *   Returns {changed (0|1), view JSON}.
 * SCRIPT_NODE_RENEW
 *   KEYS: pd:<app>:{c}:nodes (zset: <node>.<epoch> -> lease deadline)
 *   ARGV: self, lease ms
 *   Returns {Redis time ms, {member, deadline, member, deadline, ...}}.
 */
#ifndef SCRIPTS_H
#define SCRIPTS_H

extern const char script_user_put[];
extern const char script_node_renew[];

#endif
