// redis-stats.mjs - what Redis counted, for the benchmarks that run on it
// (W7, W9): commands clients sent, every command (those inside scripts
// included), CPU seconds and memory, summed over the given ports.
import { redisCli } from '../tests/cluster/lib/nodes.mjs';

// The commands a script runs inside it are counted by Redis too; those a
// client sends are these (every other command in commandstats is inside a
// script: HSET, HGETALL, TIME, ZADD, ...).
const CLIENT_CMDS = new Set(['publish', 'subscribe', 'psubscribe', 'pubsub', 'client', 'hello', 'evalsha', 'eval', 'sadd', 'srem', 'spublish', 'hget', 'ping', 'ssubscribe',
  'sunsubscribe', 'script', 'set', 'sscan', 'del', 'zrem', 'cluster', 'asking', 'readonly', 'info', 'command']);

export function redisStats(ports) {
  let cmds = 0, all = 0, cpu = 0, mem = 0;
  for (const p of ports) {
    const info = redisCli(p, 'info', 'all');
    const get = (k) => Number((new RegExp(`^${k}:([0-9.]+)`, 'm').exec(info) || [])[1] || 0);
    for (const m of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
      all += Number(m[2]);
      if (CLIENT_CMDS.has(m[1])) cmds += Number(m[2]);
    }
    cpu += get('used_cpu_user') + get('used_cpu_sys');
    mem += get('used_memory');
  }
  return { cmds, all, cpu, mem };
}
