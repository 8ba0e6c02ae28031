// @presenced/client - the presenced client SDK (browsers and Node 20+).
export { createClient } from './client.js';
export { createBackoff } from './backoff.js';
export { createPresenceBuffer } from './buffer.js';
export { createActivityTracker, ACTIVITY_EVENTS } from './activity.js';
export { createCursorPublisher, viewportFraction } from './cursor.js';
export { RoomModel, memberDigest } from './rooms.js';
export { formatLastSeen, ageOf } from './format.js';
export { frozenMap } from './frozen-map.js';
