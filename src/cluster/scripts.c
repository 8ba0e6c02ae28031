/* SPDX-License-Identifier: MIT */
/* scripts.c - the Lua texts of scripts.h. Redis's Lua is 5.1 with cjson:
 * numbers are doubles, so every number written into JSON goes through
 * %.0f (tostring would print 1.8e+15). */
#include "scripts.h"

/* Ranks follow presence.h's most-available: online > busy > away > dnd. */
const char script_user_put[] =
    "local uid, field, c = ARGV[1], ARGV[2], ARGV[3]\n"
    "local seen, policy, dead, keep = tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])\n"
    "if c == '' then redis.call('HDEL', KEYS[1], field)\n"
    "else redis.call('HSET', KEYS[1], field, c) end\n"
    "for e in string.gmatch(dead, '[^,]+') do redis.call('HDEL', KEYS[1], e) end\n"
    "local RANK = {[0]=0, [1]=4, [2]=2, [3]=3, [4]=1}\n"
    "local s, n, d, dd = 0, 0, {0,0,0,0,0}, {false,false,false,false,false}\n"
    "local bact, bs, anyon, anydnd = -1, 0, false, false\n"
    "local ct, ce, cx, ca = '', '', 0, -1\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "for i = 2, #all, 2 do\n"
    "  local x = cjson.decode(all[i])\n"
    "  n = n + x.n\n"
    "  if RANK[x.s] > RANK[s] then s = x.s end\n"
    "  if x.s == 4 then anydnd = true end\n"
    "  if x.o == 1 then anyon = true end\n"
    "  if x.a > bact then bact, bs = x.a, x.s end\n"
    "  for k = 1, 5 do\n"
    "    if RANK[x.d[k]] > RANK[d[k]] then d[k] = x.d[k] end\n"
    "    if x.d[k] == 4 then dd[k] = true end\n"
    "  end\n"
    "  if (x.ct ~= '' or x.ce ~= '') and x.ca > ca then ct, ce, cx, ca = x.ct, x.ce, x.cx, x.ca "
    "end\n"
    "end\n"
    "if n > 0 and policy == 'dnd-wins' then\n"
    "  if anydnd then s = 4 end\n"
    "  for k = 1, 5 do if dd[k] then d[k] = 4 end end\n"
    "elseif n > 0 and policy == 'most-recent' then\n"
    "  s = bs\n"
    "  if s == 2 and anyon then s = 1 end\n"
    "end\n"
    "local old = redis.call('HMGET', KEYS[2], 'b', 'v', 'ver', 'seen')\n"
    "local oseen = tonumber(old[4]) or 0\n"
    "local vseen = 0\n"
    "if n == 0 then\n"
    "  if seen > oseen then oseen = seen end\n"
    "  vseen = oseen\n"
    "end\n"
    "local F = function(v) return string.format('%.0f', v) end\n"
    "local body = '{\"u\":' .. cjson.encode(uid) .. ',\"s\":' .. F(s) .. ',\"d\":[' ..\n"
    "  F(d[1]) .. ',' .. F(d[2]) .. ',' .. F(d[3]) .. ',' .. F(d[4]) .. ',' .. F(d[5]) ..\n"
    "  '],\"ct\":' .. cjson.encode(ct) .. ',\"ce\":' .. cjson.encode(ce) .. ',\"cx\":' .. F(cx) "
    "..\n"
    "  ',\"n\":' .. F(n) .. ',\"seen\":' .. F(vseen)\n"
    "if n > 0 then redis.call('PEXPIRE', KEYS[1], 86400000) end\n"
    "if old[1] == body then\n"
    "  redis.call('HSET', KEYS[2], 'seen', F(oseen))\n"
    "  return {0, old[2]}\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "local ver = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024\n"
    "local over = tonumber(old[3]) or 0\n"
    "if over + 1 > ver then ver = over + 1 end\n"
    "local v = body .. ',\"ver\":' .. F(ver) .. '}'\n"
    "redis.call('HSET', KEYS[2], 'b', body, 'v', v, 'ver', F(ver), 'seen', F(oseen))\n"
    "redis.call('PEXPIRE', KEYS[2], keep)\n"
    "local was = old[2] and (cjson.decode(old[2]).n or 0) > 0 or false\n"
    "return {1, v, (was ~= (n > 0)) and 1 or 0}\n";

/* KEYS: {u:<h>}:s, {u:<h>}:a; ARGV: dead epochs (scripts.h). */
const char script_user_read[] =
    "for e in string.gmatch(ARGV[1], '[^,]+') do\n"
    "  if redis.call('HEXISTS', KEYS[1], e) == 1 then return {1, e} end\n"
    "end\n"
    "local v = redis.call('HGET', KEYS[2], 'v')\n"
    "if v then return {0, v} end\n"
    "return {0}\n";

/* KEYS: {u:<h>}:s, {u:<h>}:r; ARGV: sid, self (scripts.h). */
const char script_user_take[] =
    "local rec = redis.call('HGET', KEYS[2], ARGV[1])\n"
    "if not rec then return {0} end\n"
    "redis.call('HDEL', KEYS[2], ARGV[1])\n"
    "local holder, deadline = string.match(rec, '^(%S+) (%d+) ')\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "if not holder or tonumber(deadline) <= now then return {0} end\n"
    "if holder ~= ARGV[2] and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then\n"
    "  local c = redis.call('HGET', KEYS[1], holder)\n"
    "  if c and cjson.decode(c).n == 1 then\n"
    "    redis.call('HSET', KEYS[1], ARGV[2], c)\n"
    "    redis.call('HDEL', KEYS[1], holder)\n"
    "  end\n"
    "end\n"
    "return {1, rec}\n";

/* KEYS: {c}:nodes, {c}:sweep:<self>; ARGV: self, lease ms, "1" once this
 * epoch's lease was registered. A registered lease that is gone (swept, or
 * Redis lost its data) or claimed by a sweeper is not renewed: "gone". */
const char script_node_renew[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local F = function(v) return string.format('%.0f', v) end\n"
    "if ARGV[3] == '1' and (not redis.call('ZSCORE', KEYS[1], ARGV[1]) or\n"
    "    redis.call('EXISTS', KEYS[2]) == 1) then\n"
    "  return {F(now), {}, 'gone'}\n"
    "end\n"
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\n"
    "return {F(now), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'), 'ok'}\n";

/* What both room scripts share: KEYS[3] = {r:<h>}:c, a hash of user ->
 * how many node epochs hold it, and "#e", the room's epoch (Redis ms when
 * the hash was made). rebuild() makes it from the member fields when it
 * is missing (a new room, or one written before it existed); held() and
 * freed() count one epoch's field in or out and note a user's first
 * ("+user") and last ("-user"); hooks() is "<epoch> <before> <after>\n"
 * and those lines: what webhooks need, computed once, by the script that
 * made the change. */
#define ROOM_COUNTS                                                                        \
    "local EV = {}\n"                                                                      \
    "local function rebuild()\n"                                                           \
    "  local ep = redis.call('HGET', KEYS[3], '#e')\n"                                     \
    "  if ep then return ep end\n"                                                         \
    "  local t = redis.call('TIME')\n"                                                     \
    "  ep = t[1] .. string.format('%03d', math.floor(t[2] / 1000))\n"                      \
    "  redis.call('DEL', KEYS[3])\n"                                                       \
    "  local all = redis.call('HKEYS', KEYS[1])\n"                                         \
    "  for i = 1, #all do\n"                                                               \
    "    local u = string.match(all[i], '^[^@]%S* (%S+)$')\n"                              \
    "    if u then redis.call('HINCRBY', KEYS[3], u, 1) end\n"                             \
    "  end\n"                                                                              \
    "  redis.call('HSET', KEYS[3], '#e', ep)\n"                                            \
    "  redis.call('PEXPIRE', KEYS[3], 86400000)\n"                                         \
    "  return ep\n"                                                                        \
    "end\n"                                                                                \
    "local function held(u)\n"                                                             \
    "  if redis.call('HINCRBY', KEYS[3], u, 1) == 1 then EV[#EV + 1] = '+' .. u end\n"     \
    "end\n"                                                                                \
    "local function freed(u)\n"                                                            \
    "  if redis.call('HINCRBY', KEYS[3], u, -1) <= 0 then\n"                               \
    "    redis.call('HDEL', KEYS[3], u)\n"                                                 \
    "    EV[#EV + 1] = '-' .. u\n"                                                         \
    "  end\n"                                                                              \
    "end\n"                                                                                \
    "local function count() return math.max(redis.call('HLEN', KEYS[3]) - 1, 0) end\n"     \
    "local function hooks(ep, before)\n"                                                   \
    "  return ep .. ' ' .. before .. ' ' .. count() .. '\\n' .. table.concat(EV, '\\n')\n" \
    "end\n"

/* KEYS: {r:<h>}:m (hash: "<node>.<epoch> <user>" -> "<joinedAt> <meta>"),
 * {r:<h>}:q (the room's seq), {r:<h>}:c (ROOM_COUNTS); ARGV: self, room,
 * channel, ops (lines "+ user joinedAt meta" or "- user"). */
const char script_room_put[] = ROOM_COUNTS
    "local self, room, ch, ops = ARGV[1], ARGV[2], ARGV[3], ARGV[4]\n"
    "local ep = rebuild()\n"
    "local before = count()\n"
    "for line in string.gmatch(ops, '[^\\n]+') do\n"
    "  if line == '*' then\n"
    "    local all = redis.call('HKEYS', KEYS[1])\n"
    "    for i = 1, #all do\n"
    "      if string.sub(all[i], 1, #self + 1) == self .. ' ' then\n"
    "        redis.call('HDEL', KEYS[1], all[i])\n"
    "        freed(string.sub(all[i], #self + 2))\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local op, user, rest = string.match(line, '^([+-]) (%S+) ?(.*)$')\n"
    "  if op == '+' then\n"
    "    if redis.call('HSET', KEYS[1], self .. ' ' .. user, rest) == 1 then held(user) end\n"
    "  elseif op == '-' then\n"
    "    if redis.call('HDEL', KEYS[1], self .. ' ' .. user) == 1 then freed(user) end\n"
    "  end\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "redis.call('HSET', KEYS[1], '@' .. self, t[1] .. string.format('%03d', math.floor(t[2] / "
    "1000)))\n"
    "local seq = redis.call('INCR', KEYS[2])\n"
    "redis.call('PEXPIRE', KEYS[1], 86400000)\n"
    "redis.call('PEXPIRE', KEYS[2], 86400000)\n"
    "redis.call('PEXPIRE', KEYS[3], 86400000)\n"
    "redis.call('SPUBLISH', ch, string.format('%.0f', seq) .. ' ' .. self .. ' ' .. room .. "
    "'\\n' .. ops)\n"
    "return {seq, hooks(ep, before)}\n";

/* KEYS: as script_room_put; ARGV: dead epochs (comma-separated). The
 * dead epochs' fields are dropped (and counted out: their members' last
 * is this reader's to report), and the hooks text comes last as the pair
 * "#", text. */
const char script_room_get[] = ROOM_COUNTS
    "local dead = {}\n"
    "for e in string.gmatch(ARGV[1], '[^,]+') do dead[e] = true end\n"
    "local ep = '0'\n"
    "if redis.call('EXISTS', KEYS[1]) == 1 then ep = rebuild() end\n"
    "local before = count()\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "local t = redis.call('TIME')\n"
    "local out = {redis.call('GET', KEYS[2]) or '0', t[1] .. string.format('%03d', "
    "math.floor(t[2] / 1000))}\n"
    "for i = 1, #all, 2 do\n"
    "  local node = string.match(all[i], '^@(%S+)$') or string.match(all[i], '^(%S+) ')\n"
    "  if dead[node] then\n"
    "    redis.call('HDEL', KEYS[1], all[i])\n"
    "    local u = string.match(all[i], '^[^@]%S* (%S+)$')\n"
    "    if u then freed(u) end\n"
    "  else out[#out + 1] = all[i]; out[#out + 1] = all[i + 1] end\n"
    "end\n"
    "out[#out + 1] = '#'\n"
    "out[#out + 1] = hooks(ep, before)\n"
    "return out\n";
