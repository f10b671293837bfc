/**
 * The dataset-privacy rule, once, for every way into the memory bank
 * (`/mcp/memory` and `/api/memory`, and so the admin surface). An agent reads
 * and writes `shared`, the named datasets (`agents`, `project:<id>`) and its
 * own `private:<client>`; naming another client's private dataset is
 * `mcp.memory_schema`, and listing by default never shows one. The client is
 * the token id — unique and not chosen by the caller. Operators and admins
 * see every dataset.
 */
import { GatehouseError } from '../errors.js';
import type { DatasetScope } from './types.js';

export function privateDatasetOf(clientId: string): string {
  return `private:${clientId}`;
}

/** The dataset an agent named, refused when it is another client's private one. */
export function ownDataset(dataset: string, clientId: string): string {
  if (dataset.startsWith('private:') && dataset !== privateDatasetOf(clientId)) {
    throw new GatehouseError('mcp.memory_schema', "A private dataset other than your own can't be named.", {
      detail: `dataset ${dataset} is another client's private dataset`,
    });
  }
  return dataset;
}

/** What an agent may touch: just the dataset it names, or every dataset but other clients' private ones. */
export function agentScope(clientId: string, named: string | undefined): DatasetScope {
  if (named !== undefined) return [ownDataset(named, clientId)];
  return (dataset) => !dataset.startsWith('private:') || dataset === privateDatasetOf(clientId);
}
