/** What a caller may see: the dataset-scope test, and the one answer for anything outside it. */
import { GatehouseError } from '../errors.js';
import type { DatasetScope } from './types.js';

export function visible(scope: DatasetScope, dataset: string): boolean {
  return typeof scope === 'function' ? scope(dataset) : scope.includes(dataset);
}

/** Missing and out-of-scope look the same, so a caller learns nothing about datasets it may not see. */
export function notFound(what: string, id: string): GatehouseError {
  return new GatehouseError('memory.not_found', `No ${what} ${id}.`, { id });
}
