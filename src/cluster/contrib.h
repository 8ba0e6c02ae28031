/* SPDX-License-Identifier: MIT */
/*
 * contrib.h - what a node writes about a user into Redis, and what it
 * reads back: the node's contribution and the user's global view.
 *
 * A contribution is one node epoch's local merge of a user's sessions,
 * written by that node (cluster_user_put()) as a JSON object whose times
 * are wall-clock ms (nodes do not share a monotonic clock):
 *   {"s":1,"d":[1,0,0,0,0],"a":1764410400000,"o":1,"n":2,
 *    "ct":"In a meeting","ce":":calendar:","cx":0,"ca":1764410300000}
 * s: status (enum presence_status), d: the device breakdown (one status
 * per enum presence_device), a: latest activity of its sessions, o: 1 if
 * one of them is ONLINE, n: sessions, ct/ce/cx: the custom status and its
 * expiry (0: none), ca: the activity time of the session that holds it.
 *
 * The global view is what the user script (scripts.c) makes of all live
 * contributions, merged by the status policy as sessions are
 * (presence.h), with a version:
 *   {"u":"alice","s":1,"d":[1,0,0,0,0],"ct":"","ce":"","cx":0,"n":2,
 *    "seen":0,"ver":1807412355891200000}
 * seen: wall ms of the last sign of life when s is 0 (offline), else 0.
 * ver: strictly increasing per user, >= the Redis time in ms << 10.
 *
 * A node's session counts of a user (what the cross-node session cap
 * reads, docs/cluster.md) are a separate, plain text: "<n> <l>", n
 * sessions of which l have a live connection.
 *
 * So is the record of a socketless HTTP session: "<node>.<epoch>
 * <deadline>", the node epoch holding it and the wall ms it ends unless
 * beaten again.
 *
 * Every function here is pure.
 */
#ifndef CONTRIB_H
#define CONTRIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "presence.h"

/* Longest custom text/emoji in bytes (4 bytes per code point). */
#define CONTRIB_TEXT_MAX  (4 * PRESENCE_TEXT_MAX_CHARS)
#define CONTRIB_EMOJI_MAX (4 * (PRESENCE_SHORTCODE_MAX + 2))

/* A node's contribution, in wall-clock ms. */
struct contrib {
    enum presence_status status;
    enum presence_status devices[PRESENCE_DEVICE_COUNT];
    uint64_t activity; /* latest activity */
    bool online;       /* a session is ONLINE */
    unsigned sessions;
    const char *text, *emoji; /* "" when none */
    uint64_t custom_expires;  /* 0: none */
    uint64_t custom_activity; /* activity of the session with the custom status */
};

/* Appends c as its JSON object to b. */
void contrib_encode(struct buf *b, const struct contrib *c);

/* A global view, decoded (strings copied in). Times are wall ms. */
struct contrib_view {
    char uid[PRESENCE_ID_MAX + 1];
    enum presence_status status;
    enum presence_status devices[PRESENCE_DEVICE_COUNT];
    char text[CONTRIB_TEXT_MAX + 1];
    char emoji[CONTRIB_EMOJI_MAX + 1];
    uint64_t custom_expires;
    unsigned sessions;
    uint64_t seen;
    uint64_t ver;
};

/* Decodes a global view. 0, or -EINVAL when json is not one (a field
 * missing, of the wrong type or out of range, a string too long). */
int contrib_view_decode(const char *json, size_t len, struct contrib_view *out);

/* Largest session count in a seats text. */
#define CONTRIB_SEATS_MAX 999999u

/* Appends "<sessions> <live>" to b (live <= sessions <= CONTRIB_SEATS_MAX). */
void contrib_seats_encode(struct buf *b, unsigned sessions, unsigned live);
/* Parses exactly len bytes of a seats text: 0, or -EINVAL when they are
 * not two decimal numbers without leading zeros, one space apart, live <=
 * sessions <= CONTRIB_SEATS_MAX. */
int contrib_seats_parse(const char *s, size_t len, unsigned *sessions, unsigned *live);

/* Parses exactly len bytes of an HTTP session record: 0 (*node_len: the
 * bytes of the holder, 1..CONTRIB_NODE_MAX, a run without spaces; the
 * deadline below 2^53), or -EINVAL. */
#define CONTRIB_NODE_MAX 81
int contrib_hs_parse(const char *s, size_t len, size_t *node_len, uint64_t *deadline);

/* A session's resume record (docs/cluster.md, "Resume across nodes"):
 * what a node writes when a session of it loses its socket, and what
 * another node that the client resumes on rebuilds the session from.
 * Times are wall ms. The text is three lines:
 *   "<holder> <deadline> <device> <status> <idle> <status expiry> <custom expiry>"
 *   "<custom text>"
 *   "<custom emoji>"
 * (a custom status never holds a line break: presence_custom_check()). */
struct contrib_resume {
    char node[CONTRIB_NODE_MAX + 1]; /* the holder: "<node-id>.<epoch>" */
    uint64_t deadline;               /* the session ends then unless resumed */
    enum presence_device device;
    enum presence_status status; /* its explicit AWAY, BUSY or DND; ONLINE: activity decides */
    bool idle;                   /* no recent activity */
    uint64_t status_expires;     /* BUSY/DND revert time, 0: none */
    uint64_t custom_expires;     /* 0: none */
    char text[CONTRIB_TEXT_MAX + 1];
    char emoji[CONTRIB_EMOJI_MAX + 1];
};

/* Appends r as its record text to b (r->node without spaces; text and
 * emoji without line breaks). */
void contrib_resume_encode(struct buf *b, const struct contrib_resume *r);
/* Parses exactly len bytes of a resume record into out: 0, or -EINVAL
 * when they are not one (numbers without leading zeros, each below 2^53,
 * a known device, a status other than offline, idle 0 or 1, the holder
 * 1..CONTRIB_NODE_MAX bytes, text and emoji within their sizes, no NUL). */
int contrib_resume_parse(const char *s, size_t len, struct contrib_resume *out);

#endif
