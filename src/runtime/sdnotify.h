/* SPDX-License-Identifier: MIT */
/*
 * sdnotify.h - readiness, watchdog and stopping notices to systemd.
 *
 * Under a unit with Type=notify, systemd passes NOTIFY_SOCKET (and, with
 * WatchdogSec=, WATCHDOG_USEC and WATCHDOG_PID). sdnotify_ready() sends
 * READY=1 once the listeners are bound and, when the watchdog is on for
 * this process, starts one thread that sends WATCHDOG=1 every half
 * WATCHDOG_USEC, but only while every worker's loop still turns: each
 * period it wakes every loop (loop_wake) and pings only if each worker
 * counted an iteration since the previous period. A worker stuck in a
 * callback therefore stops the pings and systemd restarts the service.
 * sdnotify_stopping() stops that thread and sends STOPPING=1.
 *
 * Without NOTIFY_SOCKET (a plain start from a shell) both do nothing.
 * Both are called from the main thread only (main.c).
 */
#ifndef SDNOTIFY_H
#define SDNOTIFY_H

struct server;

/* After server_start: READY=1 and the watchdog thread (if asked for).
 * srv must stay valid until sdnotify_stopping(). */
void sdnotify_ready(struct server *srv);
/* Before server_shutdown: stops the watchdog thread, then STOPPING=1.
 * A no-op when sdnotify_ready() did nothing. */
void sdnotify_stopping(void);

#endif
