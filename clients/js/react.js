// react.js - optional React hooks. React is passed in, never imported:
//   import * as React from 'react';
//   const { usePresence } = createPresenceHooks(React);
export function createPresenceHooks(React) {
  const { useEffect, useState, useSyncExternalStore } = React;
  function useStore(subscribe, get) {
    if (useSyncExternalStore) return useSyncExternalStore(subscribe, get, get);
    const [v, setV] = useState(get);
    useEffect(() => subscribe(() => setV(get())), [subscribe]); // eslint-disable-line
    return v;
  }
  // Watches `users` while mounted; returns the client's immutable presence map
  // (one re-render per flush, not per update).
  function usePresence(client, users) {
    const key = [].concat(users || []).join('\n');
    useEffect(() => {
      if (!key) return undefined;
      const stop = client.watch(key.split('\n'));
      // Released a microtask later, after the next list is watched: users in
      // both lists stay watched (no unwatch/watch, no gap in their state).
      return () => { Promise.resolve().then(stop); };
    }, [client, key]);
    return useStore(React.useCallback ? React.useCallback((cb) => client.onPresence(cb), [client]) : (cb) => client.onPresence(cb), () => client.presence);
  }
  function useConnectionState(client) {
    return useStore(React.useCallback ? React.useCallback((cb) => client.onState(cb), [client]) : (cb) => client.onState(cb), () => client.state);
  }
  return { usePresence, useConnectionState };
}
