// frozen-map.js - a Map that cannot be changed after construction.
function readonly() { throw new TypeError('this map is immutable'); }

export function frozenMap(entries) {
  const m = new Map(entries);
  Object.defineProperties(m, {
    set: { value: readonly },
    delete: { value: readonly },
    clear: { value: readonly },
  });
  return Object.freeze(m);
}
