/* SPDX-License-Identifier: MIT */
/*
 * native_encode.h - the native protocol's encodings of the engine's events
 * (docs/protocol.md) as the adapter table the engine calls (adapter.h).
 */
#ifndef NATIVE_ENCODE_H
#define NATIVE_ENCODE_H

#include "adapter.h"
#include "buf.h"

/* The native protocol's adapter; main.c registers it first, so it is
 * ADAPTER_DEFAULT. */
extern const struct proto_adapter native_adapter;

/* Appends {"type":"error","code":..,"message":..[,"ref":..]} to b. */
void native_error_json(struct buf *b, const char *code, const char *message, const char *ref);

#endif
