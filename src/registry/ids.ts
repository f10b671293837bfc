/**
 * Server ids (DESIGN.md "Server ids"): `[a-z0-9][a-z0-9-]{0,31}`, no `_` so `<server>__<tool>` always
 * splits, and `gatehouse` reserved for Gatehouse's own surfaces.
 */
import { z } from 'zod';
import { validationError } from '../errors.js';

export const SERVER_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;
export const SERVER_ID_MAX_LENGTH = 32;
export const RESERVED_SERVER_IDS: ReadonlySet<string> = new Set(['gatehouse']);

const PATTERN_MESSAGE = 'a server id is 1-32 lower-case letters, digits and -, starting with a letter or digit';
const RESERVED_MESSAGE = 'that server id is reserved';

/** Returns the id when it is a valid, unreserved server id; throws `validation_error` otherwise. */
export function assertServerId(id: string): string {
  if (!SERVER_ID_PATTERN.test(id)) throw validationError([{ path: 'id', message: PATTERN_MESSAGE }]);
  if (RESERVED_SERVER_IDS.has(id)) {
    throw validationError([{ path: 'id', message: RESERVED_MESSAGE }], `The server id "${id}" is reserved.`);
  }
  return id;
}

/**
 * The id an install gets when none is given: the last `/` segment (`io.github.owner/server` → `server`),
 * lower-cased, every run of other characters turned into `-`, `-` trimmed, cut to 32 (and trimmed again, so the
 * cut never leaves a trailing `-`). A name that yields nothing, or yields a reserved id, needs an explicit id.
 */
export function deriveServerId(nameOrUrl: string): string {
  const segment = nameOrUrl.slice(nameOrUrl.lastIndexOf('/') + 1);
  const id = segment
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, SERVER_ID_MAX_LENGTH)
    .replace(/-+$/, '');
  if (id === '') {
    throw validationError(
      [{ path: 'id', message: 'no server id can be derived from that name; give one explicitly' }],
      'No server id can be derived from that name; give an id explicitly.',
    );
  }
  return assertServerId(id);
}

export const serverIdSchema = z
  .string()
  .regex(SERVER_ID_PATTERN, PATTERN_MESSAGE)
  .refine((id) => !RESERVED_SERVER_IDS.has(id), RESERVED_MESSAGE);
