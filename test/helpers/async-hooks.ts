import { executionAsyncId } from 'node:async_hooks';

/**
 * The async id of a promise continuation: 0 unless a promise hook is installed (an enabled
 * `AsyncLocalStorage` installs one, and every promise of the process then pays it).
 */
export async function continuationAsyncId(): Promise<number> {
  await null;
  return executionAsyncId();
}
