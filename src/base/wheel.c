/* SPDX-License-Identifier: MIT */
/*
 * wheel.c - hashed timing wheel (Varghese & Lauck's "scheme 6").
 *
 * Exports the wheel.h API: O(1) add, delete and refresh of timers embedded
 * in their owners, a run step that fires what is due (all of it, or at most
 * a budget), and an O(1) lower bound on the next expiry for epoll_wait's
 * timeout. It never allocates a timer, never reads a clock and is not
 * thread-safe: a wheel belongs to the one loop that drives it.
 *
 * ---- The algorithm ----
 *
 * Parameters. Time is cut into ticks of WHEEL_TICK_MS (10 ms): tick k is
 * [k * 10, k * 10 + 9] ms. WHEEL_SLOTS (4096) slots hold intrusive lists,
 * so one revolution is 40.96 s. A timer due at expire_at belongs to tick
 * tk = expire_at / WHEEL_TICK_MS and sits in slot tk % WHEEL_SLOTS whatever
 * its revolution: a 100 s TTL shares a slot with timers due 40.96 s and
 * 81.92 s earlier and is simply skipped by the first two visits. No timer
 * ever cascades between levels, so add, delete and refresh are each one
 * list unlink plus one list insert.
 *
 * The cursor. The wheel remembers cur, the tick of the last wheel_run()
 * (of wheel_new()'s now, at first; see "Budget" for a run that stops).
 * Ticks below cur are fully processed; tick cur only up to that run's now,
 * so the next run visits it again. wheel_run(now) visits ticks cur ..
 * tick(now) in order and fires, in each visited slot, the timers whose
 * expire_at <= now; the rest (later revolutions, or later in the current
 * tick) stay where they are. After a jump of more than one revolution the
 * run visits each slot once (the last WHEEL_SLOTS ticks), which fires
 * everything due: a slow path bounded by WHEEL_SLOTS list heads.
 *
 * Placement. wheel_add() puts a timer with tk >= cur in its slot, where the
 * visit of tick tk (or a jump over it) will find it. A timer with tk < cur
 * is already late and its slot was passed; it goes on the due list instead,
 * which the next run goes through first. So no timer can wait a whole
 * revolution past its expiry, however far in the past expire_at is.
 *
 * Callbacks. A visited slot's list is first moved to the running list and
 * timers are popped from it one at a time, each unlinked before its
 * callback runs; not-yet-due timers are linked back into the slot. A
 * callback may therefore delete or re-add any timer: one still waiting on
 * the running list is simply unlinked from there. While a run is in
 * progress cur is already tick(now) + 1, so a timer (re-)added by a
 * callback for any tick the run covers (the firing timer re-arming itself
 * with expire_at <= now, say) lands on the due list and fires at the next
 * run: never lost in a slot the run has passed, and never fired twice by
 * one run, so a self-re-arming timer cannot make a run loop forever.
 * Such a timer may be due only later in tick(now); the due list keeps it
 * until it is, since every run goes through the whole list.
 *
 * Budget. wheel_run_budget() counts the timers it fires and stops at the
 * first due timer it meets with the budget spent: a burst of 10,000 TTLs
 * ending in the same tick then fires in slices, and the loop does its I/O
 * between them. Stopping leaves the wheel as if the run had only got that
 * far. The rest of the running list, not looked at yet, goes back to the
 * front of the list it came from (due list or slot), in order, and cur
 * becomes the tick being visited, not end: the ticks not reached stay
 * ahead of the cursor, and the next run starts with the due list, then
 * that slot, then the ticks after it. So the leftovers fire before any
 * timer of a later tick, that is before those that became due since
 * (short of another pause longer than a revolution); only due-list timers
 * (added late, or by a callback of the stopped run for a tick it covered)
 * can overtake them, each once per run. Nothing is moved or allocated to
 * hold a backlog: it is the part of the wheel between cur and now, plus
 * the due list. A stopped run that had jumped more than a revolution may
 * leave timers of ticks behind cur in the slots it did not reach; the next
 * run ends no earlier, so it reaches those slots before it can complete,
 * and only next_scan(), called by completed runs alone, relies on slots
 * being ahead of cur. Nor does a stopped run touch hint: it is a lower
 * bound on the leftovers' expire_at, all <= now, so wheel_next() keeps
 * the loop from sleeping until a run completes and recomputes it. Cost:
 * stopping is O(1); the slot a stopped run left half done has its not-due
 * timers looked at again by the next visit, as any revisit of a tick has.
 *
 * Next expiry (the fast path, every loop iteration). wheel_next() is O(1):
 * the wheel keeps hint, a lower bound on every linked timer's expire_at,
 * and knows whether it is empty from the due and running lists plus an
 * occupancy bitmap of the slots. wheel_add() lowers hint to the new
 * expire_at (or sets it, when the wheel was empty); deleting a timer leaves
 * hint too early, which costs one spurious wakeup at worst. When a run has
 * passed hint, the wheel recomputes it exactly: the earliest of the due
 * list and of the first occupied slot, walking the bitmap from cur, that
 * holds a timer due on this visit (or, if the whole revolution holds only
 * later revolutions, the earliest of those).
 *
 * Why a bitmap and not a timer count. wheel_del() receives only the timer,
 * so it cannot reach its wheel's counters in O(1). What it can see is that
 * the timer's predecessor is left alone in its list: then the predecessor
 * is a list head, every head is embedded in a struct wheel_slot, and the
 * slot knows its wheel, so the slot's occupancy bit is cleared on the spot.
 * That keeps emptiness (wheel_next() == UINT64_MAX) exact; wheel_count()
 * walks the occupied slots instead and is meant for tests and metrics.
 *
 * Guarantees: a timer fires at the first wheel_run() whose now >= its
 * expire_at (if a callback of a run added it, at the next run at the
 * earliest; if a budgeted run ran out before it, at a following run),
 * never at an earlier one, and at most once per wheel_add(); within a tick
 * the order is unspecified. wheel_next() is never later than the true
 * next expiry (so it is <= now while a budget has left timers due) and is
 * UINT64_MAX exactly when no timer is linked.
 * Memory: one allocation of about 100 KiB per wheel, made by wheel_new().
 */
#include "wheel.h"

#include <assert.h>
#include <stdlib.h>

#include "util.h"

#define WHEEL_MASK  (WHEEL_SLOTS - 1u)
#define WHEEL_WORDS (WHEEL_SLOTS / 64u)

_Static_assert((WHEEL_SLOTS & WHEEL_MASK) == 0, "WHEEL_SLOTS must be a power of two");
_Static_assert(WHEEL_SLOTS % 64u == 0, "the occupancy bitmap uses 64-bit words");

/* Every list a timer can be linked into has one of these as its head. */
struct wheel_slot {
    struct list head;
    struct wheel *w; /* owner for the WHEEL_SLOTS array slots; NULL for due/running */
};

struct wheel {
    uint64_t cur;                   /* ticks below are processed; see the essay */
    uint64_t hint;                  /* <= every linked expire_at; valid when not empty */
    unsigned occupied_slots;        /* bits set in occupied[] */
    bool in_run;                    /* wheel_run() is on the stack */
    struct wheel_slot due;          /* late timers: fired first by the next run */
    struct wheel_slot running;      /* the slot being fired by wheel_run() */
    uint64_t occupied[WHEEL_WORDS]; /* bit i set <=> slots[i] is not empty */
    struct wheel_slot slots[WHEEL_SLOTS];
};

static uint64_t tick_of(uint64_t ms)
{
    return ms / WHEEL_TICK_MS;
}

static struct wheel_timer *timer_of(struct list *node)
{
    return container_of(node, struct wheel_timer, _link);
}

/* ---- occupancy ---- */

static unsigned slot_index(const struct wheel *w, const struct wheel_slot *s)
{
    return (unsigned)(s - w->slots);
}

static void mark_occupied(struct wheel *w, unsigned i)
{
    uint64_t bit = (uint64_t)1 << (i % 64u);

    if (!(w->occupied[i / 64u] & bit)) {
        w->occupied[i / 64u] |= bit;
        w->occupied_slots++;
    }
}

/* Called whenever a list that may hold timers has just become empty. */
static void slot_emptied(struct wheel_slot *s)
{
    struct wheel *w = s->w;
    unsigned i;

    if (w == NULL)
        return; /* due or running list: emptiness is read off the list */
    i = slot_index(w, s);
    w->occupied[i / 64u] &= ~((uint64_t)1 << (i % 64u));
    w->occupied_slots--;
}

static void slot_insert(struct wheel_slot *s, struct wheel_timer *t)
{
    list_insert_tail(&s->head, &t->_link);
    if (s->w != NULL)
        mark_occupied(s->w, slot_index(s->w, s));
}

/* Moves every node of from, in order, to the front of to (which may hold
 * nodes already), leaving from empty. */
static void list_move_front(struct list *from, struct list *to)
{
    struct list *first = from->next, *last = from->prev;

    if (list_empty(from))
        return;
    last->next = to->next;
    to->next->prev = last;
    to->next = first;
    first->prev = to;
    list_init(from);
}

static bool wheel_is_empty(const struct wheel *w)
{
    return w->occupied_slots == 0 && list_empty(&w->due.head) && list_empty(&w->running.head);
}

/* ---- next expiry ---- */

/* Earliest expire_at among the timers of slot s that are due when tick t
 * is visited; the earliest of the others (later revolutions) goes to
 * *later. UINT64_MAX when none is due on this visit. */
static uint64_t slot_min_due(const struct wheel_slot *s, uint64_t t, uint64_t *later)
{
    uint64_t best = UINT64_MAX;
    const struct list *pos;

    for (pos = s->head.next; pos != &s->head; pos = pos->next) {
        const struct wheel_timer *tm = container_of(pos, struct wheel_timer, _link);

        if (tick_of(tm->expire_at) <= t)
            best = MIN(best, tm->expire_at);
        else
            *later = MIN(*later, tm->expire_at);
    }
    return best;
}

/* Occupied bits of word wi at or after bit `from` (0..64), in slot order. */
static uint64_t bits_from(const struct wheel *w, unsigned wi, unsigned from)
{
    return from >= 64u ? 0 : w->occupied[wi] & (~(uint64_t)0 << from);
}

/* Earliest expire_at on the due list (whose ticks are all <= cur). */
static uint64_t due_min(const struct wheel *w)
{
    uint64_t best = UINT64_MAX;
    const struct list *pos;

    for (pos = w->due.head.next; pos != &w->due.head; pos = pos->next)
        best = MIN(best, container_of(pos, struct wheel_timer, _link)->expire_at);
    return best;
}

/*
 * The exact next expiry, for a wheel with an empty running list. Occupied
 * slots are visited in tick order from cur for one revolution: the first
 * one holding a timer due on that visit has the answer for the slots,
 * because a timer due on a later visit belongs to a later tick. Cost: at
 * most WHEEL_WORDS + 1 bitmap words plus the timers of the slots walked.
 */
static uint64_t next_scan(const struct wheel *w)
{
    uint64_t later = due_min(w);
    unsigned start = (unsigned)(w->cur & WHEEL_MASK);

    for (unsigned k = 0; k <= WHEEL_WORDS; k++) {
        unsigned wi = (start / 64u + k) % WHEEL_WORDS;
        /* The first word is entered at start; the wrap-around revisit of
         * it (k == WHEEL_WORDS) covers only the bits below start. */
        uint64_t bits = bits_from(w, wi, k == 0 ? start % 64u : 0);

        if (k == WHEEL_WORDS)
            bits &= ~bits_from(w, wi, start % 64u);
        while (bits != 0) {
            unsigned i = wi * 64u + (unsigned)__builtin_ctzll(bits);
            uint64_t t = w->cur + ((i - start) & WHEEL_MASK);
            uint64_t due = slot_min_due(&w->slots[i], t, &later);

            if (due != UINT64_MAX)
                return MIN(due, later);
            bits &= bits - 1;
        }
    }
    return later;
}

/* ---- firing ---- */

/*
 * Fires the timers of s that are due at now, at most max of them, and
 * links the others back into s. The list is moved aside first so callbacks
 * can freely add and delete timers, including ones of s that have not been
 * looked at yet. Meeting a due timer with the budget spent, it puts what
 * is left back at the front of s and sets *stopped.
 */
static size_t fire_slot(struct wheel *w, struct wheel_slot *s, uint64_t now, size_t max,
                        bool *stopped)
{
    size_t fired = 0;

    if (list_empty(&s->head))
        return 0;
    list_move_front(&s->head, &w->running.head);
    slot_emptied(s);
    while (!list_empty(&w->running.head)) {
        struct wheel_timer *t = timer_of(list_first(&w->running.head));

        if (t->expire_at <= now && fired == max) {
            list_move_front(&w->running.head, &s->head);
            if (s->w != NULL)
                mark_occupied(w, slot_index(w, s));
            *stopped = true;
            break;
        }
        list_del(&t->_link);
        if (t->expire_at <= now) {
            t->cb(t, now);
            fired++;
        } else {
            slot_insert(s, t);
        }
    }
    return fired;
}

/* ---- public API ---- */

void wheel_timer_init(struct wheel_timer *t, wheel_cb *cb)
{
    list_init(&t->_link);
    t->expire_at = 0;
    t->cb = cb;
}

struct wheel *wheel_new(uint64_t now)
{
    struct wheel *w = xcalloc(1, sizeof(*w));

    w->cur = tick_of(now);
    w->hint = UINT64_MAX;
    list_init(&w->due.head);
    list_init(&w->running.head);
    for (unsigned i = 0; i < WHEEL_SLOTS; i++) {
        list_init(&w->slots[i].head);
        w->slots[i].w = w;
    }
    return w;
}

/* Unlinks (re-initialises) every timer of l so its owner may still call
 * wheel_del() or wheel_is_linked() on it after the wheel is gone. */
static void drop_all(struct list *l)
{
    while (!list_empty(l))
        list_del(list_first(l));
}

void wheel_free(struct wheel *w)
{
    if (w == NULL)
        return;
    /* Freeing the wheel from one of its own callbacks is not supported. */
    assert(!w->in_run);
    drop_all(&w->due.head);
    for (unsigned i = 0; i < WHEEL_SLOTS; i++)
        drop_all(&w->slots[i].head);
    free(w);
}

void wheel_add(struct wheel *w, struct wheel_timer *t, uint64_t expire_at)
{
    uint64_t tk = tick_of(expire_at);

    wheel_del(t);
    t->expire_at = expire_at;
    w->hint = wheel_is_empty(w) ? expire_at : MIN(w->hint, expire_at);
    if (tk < w->cur)
        slot_insert(&w->due, t);
    else
        slot_insert(&w->slots[tk & WHEEL_MASK], t);
}

/*
 * O(1) although the wheel is unknown here: when the predecessor is left
 * alone in its list it is that list's head, and the head's slot knows its
 * wheel (see "Why a bitmap" above).
 */
void wheel_del(struct wheel_timer *t)
{
    struct list *prev = t->_link.prev;

    if (!wheel_is_linked(t))
        return;
    list_del(&t->_link);
    if (list_empty(prev))
        slot_emptied(container_of(prev, struct wheel_slot, head));
}

bool wheel_is_linked(const struct wheel_timer *t)
{
    return list_is_linked(&t->_link);
}

size_t wheel_run(struct wheel *w, uint64_t now)
{
    return wheel_run_budget(w, now, SIZE_MAX);
}

/*
 * The due list first (timers added for a tick already passed), then ticks
 * cur .. tick(now), or only the last WHEEL_SLOTS of them after a long
 * pause. Meanwhile cur is one past the last tick covered, so timers that
 * callbacks add for a covered tick go to the due list, for the next run
 * (see the essay). A run that completes leaves cur at tick(now) and
 * recomputes hint if it passed it; one that runs out of budget leaves cur
 * at the tick it stopped in and hint as it was ("Budget" above).
 */
size_t wheel_run_budget(struct wheel *w, uint64_t now, size_t max)
{
    uint64_t end = MAX(tick_of(now), w->cur);
    uint64_t t = end - w->cur >= WHEEL_SLOTS ? end - (WHEEL_SLOTS - 1u) : w->cur;
    bool stopped = false;
    size_t fired;

    /* wheel_run() from one of its own callbacks is not supported. */
    assert(!w->in_run);
    w->in_run = true;
    w->cur = end + 1;
    fired = fire_slot(w, &w->due, now, max, &stopped);
    while (!stopped && t <= end) {
        fired += fire_slot(w, &w->slots[t & WHEEL_MASK], now, max - fired, &stopped);
        if (!stopped)
            t++;
    }
    w->cur = stopped ? t : end;
    w->in_run = false;
    if (wheel_is_empty(w)) {
        w->hint = UINT64_MAX;
    } else if (stopped) {
        /* A due timer is left, and hint is a lower bound on its expiry. */
        assert(w->hint <= now);
    } else if (w->hint <= now) {
        w->hint = next_scan(w);
    }
    return fired;
}

uint64_t wheel_next(const struct wheel *w)
{
    return wheel_is_empty(w) ? UINT64_MAX : w->hint;
}

static size_t list_length(const struct list *l)
{
    size_t n = 0;

    for (const struct list *pos = l->next; pos != l; pos = pos->next)
        n++;
    return n;
}

/* Walks the occupied slots: O(timers + WHEEL_WORDS), for tests and metrics. */
size_t wheel_count(const struct wheel *w)
{
    size_t n = list_length(&w->due.head) + list_length(&w->running.head);

    for (unsigned wi = 0; wi < WHEEL_WORDS; wi++) {
        for (uint64_t bits = w->occupied[wi]; bits != 0; bits &= bits - 1) {
            unsigned i = wi * 64u + (unsigned)__builtin_ctzll(bits);

            n += list_length(&w->slots[i].head);
        }
    }
    return n;
}
