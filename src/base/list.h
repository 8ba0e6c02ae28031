/* SPDX-License-Identifier: MIT */
/*
 * list.h - intrusive circular doubly linked list (libuv queue.h style).
 *
 * A struct list is embedded in its owner; container_of() gets the owner
 * back. Insert and remove are O(1) and never allocate. A node that is not
 * on any list should be initialised with list_init() so that
 * list_is_linked() and list_del() are safe on it.
 */
#ifndef LIST_H
#define LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list {
    struct list *prev;
    struct list *next;
};

static inline void list_init(struct list *l)
{
    l->prev = l->next = l;
}

static inline bool list_empty(const struct list *head)
{
    return head->next == head;
}

/* True when node is on some list (initialised nodes point at themselves). */
static inline bool list_is_linked(const struct list *node)
{
    return node->next != node && node->next != NULL;
}

static inline void list_insert_tail(struct list *head, struct list *node)
{
    node->next = head;
    node->prev = head->prev;
    head->prev->next = node;
    head->prev = node;
}

/* Unlinks node (no-op when unlinked) and re-initialises it. */
static inline void list_del(struct list *node)
{
    if (node->next == NULL)
        return;
    node->prev->next = node->next;
    node->next->prev = node->prev;
    list_init(node);
}

/* Moves every node of from to the tail of to, in order, in O(1); from is
 * left empty. */
static inline void list_move_all(struct list *to, struct list *from)
{
    if (list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    list_init(from);
}

#define list_first(head) ((head)->next)

/* Iterates over a list that the body does not change. */
#define list_foreach(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

/* Safe against removal of the current node inside the loop body. */
#define list_foreach_safe(pos, tmp, head)                            \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
         (pos) = (tmp), (tmp) = (pos)->next)

#endif
