// The authenticated caller of the request being served, in async-local storage: the HTTP layer
// runs each request inside it, and the gateway reads it when a tool is called. Outside any request
// (stdio, library use) there is none, and the caller is the local operator.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Principal } from './resource-server.js';

const store = new AsyncLocalStorage<Principal>();

export function runAs<T>(principal: Principal | null, fn: () => T): T {
  return principal ? store.run(principal, fn) : fn();
}

export const currentPrincipal = (): Principal | undefined => store.getStore();
