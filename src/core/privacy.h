/* SPDX-License-Identifier: MIT */
/*
 * privacy.h - who may see what of a user's presence: the pure rules.
 *
 * A user (the "owner") has three settings (store.h: struct store_privacy):
 * who sees their online status, who sees their last seen (each everyone,
 * contacts or nobody), and invisible. A viewer stands in one relation to
 * the owner: self, contact (in the owner's contacts), stranger (anyone else,
 * anonymous viewers included) or blocked (the owner blocks them; a block
 * wins over being a contact).
 *
 * The relation and the settings give the viewer's *class*, and the class
 * alone decides what the viewer gets, so fan-out encodes one frame per
 * class in use, never one per viewer:
 *
 *   SELF     the true view, with its version, exact last seen;
 *   FULL     the public view (below): status, devices, custom, last seen;
 *   NOLS     the public view without last seen;
 *   OFF_LS   offline, with the public last seen (online status hidden);
 *   HIDDEN   offline, nothing else: byte-identical to a user never seen.
 *
 * The public view is the true view, except while invisible: then it is
 * frozen as offline, last seen = the moment invisibility began (or the
 * last seen before it, if the user was offline then). Every class but SELF
 * omits the version (it would tell an active invisible user from an
 * unknown one) and coarsens last seen by age (privacy_encode()).
 *
 * Rooms are encoded once for all members, so they use one flag per member:
 * privacy_room_visible() — not invisible and online status visible to
 * everyone. With contacts or nobody a member is hidden from every room
 * (fail-closed: contacts in the room do not see them there either).
 *
 * Settings not known yet (still loading, or the store failed) count as
 * the most private ones: STORE fail-closed semantics.
 */
#ifndef PRIVACY_H
#define PRIVACY_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "buf.h"
#include "presence.h"
#include "store.h"

enum privacy_relation {
    PRIVACY_SELF,
    PRIVACY_CONTACT,
    PRIVACY_STRANGER,
    PRIVACY_BLOCKED,
};

enum privacy_class {
    PRIVACY_CLASS_SELF,
    PRIVACY_CLASS_FULL,
    PRIVACY_CLASS_NOLS,
    PRIVACY_CLASS_OFF_LS,
    PRIVACY_CLASS_HIDDEN,
    PRIVACY_NCLASS
};

/* What the public view needs beyond the settings (monotonic ms, 0 = none). */
struct privacy_public {
    uint64_t frozen_last_seen;  /* invisible: last seen shown meanwhile */
    uint64_t offline_last_seen; /* last seen of the last public offline view */
};

/* The most private settings: what unknown or unreadable settings mean. */
struct store_privacy privacy_most_private(void);

/* The class of a viewer in relation rel to an owner with settings p. */
enum privacy_class privacy_class_of(const struct store_privacy *p, enum privacy_relation rel);

/* True when the owner is shown in rooms (see the file comment). */
bool privacy_room_visible(const struct store_privacy *p);

/*
 * Fills out with what a viewer of class cls sees, given the owner's true
 * view (borrowed; out borrows its strings) and public state. For every
 * class but SELF, out->version is 0.
 */
void privacy_view(const struct presence_view *truth, const struct store_privacy *p,
                  const struct privacy_public *pub, enum privacy_class cls,
                  struct presence_view *out);

/*
 * Appends the presence object of v for a viewer of class cls: SELF as
 * presence_encode_user(); the others without "version" and with last seen
 * coarsened by age (at rounded down to the minute under an hour, to the
 * hour under a day, to the day beyond; "value" only for minutes).
 */
void privacy_encode(const struct presence_view *v, enum privacy_class cls, int64_t wall_offset_ms,
                    struct buf *out);

/* Wire names "everyone", "contacts", "nobody"; parse returns -1 if unknown. */
const char *privacy_visibility_name(enum store_visibility v);
int privacy_visibility_parse(const char *s);

/* The fields a settings update names (a bit mask). */
enum {
    PRIVACY_FIELD_ONLINE = 1,
    PRIVACY_FIELD_LAST_SEEN = 2,
    PRIVACY_FIELD_INVISIBLE = 4,
};

/*
 * Parses a settings update, any subset of {"online","lastSeen":
 * everyone|contacts|nobody, "invisible": true|false}, from the object
 * root (other members are ignored): fills the named fields of *p and sets
 * *mask to the PRIVACY_FIELD_* bits named. 0, or -1 when root is not an
 * object or a named field has a bad value (*p and *mask then unspecified).
 */
int privacy_parse_update(const cJSON *root, struct store_privacy *p, uint8_t *mask);

/* Appends {"online":..,"lastSeen":..,"invisible":..}. */
void privacy_encode_settings(const struct store_privacy *p, struct buf *out);

#endif
