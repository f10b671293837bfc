/**
 * Which datasets a call on `/mcp/memory` reads and writes, by the memory
 * engine's privacy rule (`src/memory/datasets.ts`). Writes go to `shared`
 * unless the request carries `X-Gatehouse-Private: 1` (or hal0's
 * `X-hal0-Private`), which makes them `private:<client>`; reads default to
 * `shared` plus the caller's own private dataset.
 */
import { agentScope, ownDataset, privateDatasetOf } from '../../memory/datasets.js';
import type { DatasetScope } from '../../memory/types.js';

export const PRIVATE_HEADERS = ['x-gatehouse-private', 'x-hal0-private'] as const;

/** `1`, `true`, `yes`, `on` (any case) on either header. */
export function wantsPrivate(headers: { get(name: string): string | null } | undefined): boolean {
  if (!headers) return false;
  return PRIVATE_HEADERS.some((name) => /^(1|true|yes|on)$/i.test((headers.get(name) ?? '').trim()));
}

export interface DatasetView {
  clientId: string;
  private: boolean;
}

export function writeDataset(view: DatasetView, named: string | undefined): string {
  if (named !== undefined) return ownDataset(named, view.clientId);
  return view.private ? privateDatasetOf(view.clientId) : 'shared';
}

export function readDatasets(view: DatasetView, named: string | undefined): string[] {
  if (named !== undefined) return [ownDataset(named, view.clientId)];
  return ['shared', privateDatasetOf(view.clientId)];
}

/** What a caller may touch by id. */
export function idScope(view: DatasetView, named: string | undefined): DatasetScope {
  return agentScope(view.clientId, named);
}
