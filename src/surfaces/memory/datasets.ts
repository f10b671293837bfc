/**
 * Which datasets a caller reads and writes. Writes go to `shared` unless the
 * request carries `X-Gatehouse-Private: 1` (or hal0's `X-hal0-Private`), which
 * makes them `private:<client>`; `agents` and `project:<id>` are named
 * explicitly. Reads default to `shared` plus the caller's own private dataset.
 * Naming another client's private dataset is `mcp.memory_schema`: a caller
 * never reads or writes one. The client is the token id — unique and not
 * chosen by the caller.
 */
import { GatehouseError } from '../../errors.js';

export const PRIVATE_HEADERS = ['x-gatehouse-private', 'x-hal0-private'] as const;

export function privateDatasetOf(clientId: string): string {
  return `private:${clientId}`;
}

/** `1`, `true`, `yes`, `on` (any case) on either header. */
export function wantsPrivate(headers: { get(name: string): string | null } | undefined): boolean {
  if (!headers) return false;
  return PRIVATE_HEADERS.some((name) => /^(1|true|yes|on)$/i.test((headers.get(name) ?? '').trim()));
}

function checkNamed(dataset: string, clientId: string): string {
  if (dataset.startsWith('private:') && dataset !== privateDatasetOf(clientId)) {
    throw new GatehouseError('mcp.memory_schema', "A private dataset other than your own can't be named.", {
      detail: `dataset ${dataset} is another client's private dataset`,
    });
  }
  return dataset;
}

export interface DatasetView {
  clientId: string;
  private: boolean;
}

export function writeDataset(view: DatasetView, named: string | undefined): string {
  if (named !== undefined) return checkNamed(named, view.clientId);
  return view.private ? privateDatasetOf(view.clientId) : 'shared';
}

export function readDatasets(view: DatasetView, named: string | undefined): string[] {
  if (named !== undefined) return [checkNamed(named, view.clientId)];
  return ['shared', privateDatasetOf(view.clientId)];
}

/** What a caller may touch by id: every dataset but other clients' private ones (or just the one it names). */
export function idScope(view: DatasetView, named: string | undefined): string[] | ((dataset: string) => boolean) {
  if (named !== undefined) return [checkNamed(named, view.clientId)];
  return (dataset) => !dataset.startsWith('private:') || dataset === privateDatasetOf(view.clientId);
}
