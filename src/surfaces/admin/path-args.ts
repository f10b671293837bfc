/**
 * Path arguments of admin tools (hal0's rules): a string, or an integer below
 * 2^53; never null, a boolean, a float, a list or an object; never empty, `.`,
 * `..`, containing `/`, a control character or an invisible formatting
 * character. Each value becomes exactly one percent-encoded URL segment, so
 * `?`, `#`, `%`, spaces, `:` and non-ASCII reach the route as the approval card
 * shows them. A path-typed parameter (the catalog's `{name:path}`) may hold `/`
 * between segments that each follow the same rules.
 */
import { GatehouseError } from '../../errors.js';

// Cc (controls, incl. DEL and C1) and Cf (format: zero-width, bidi overrides, BOM, soft hyphen…).
const FORBIDDEN_CHARACTERS = /[\p{Cc}\p{Cf}]/u;

function invalid(name: string, why: string): GatehouseError {
  return new GatehouseError('mcp.invalid_arg', `Path argument "${name}" ${why}.`, { arg: name });
}

function checkSegment(name: string, segment: string): string {
  if (segment === '') throw invalid(name, 'is empty (or has an empty segment)');
  if (segment === '.' || segment === '..') throw invalid(name, 'may not be "." or ".."');
  if (FORBIDDEN_CHARACTERS.test(segment)) throw invalid(name, 'contains a control or invisible formatting character');
  return encodeURIComponent(segment);
}

/** The encoded URL part for one path argument; throws `mcp.missing_arg` / `mcp.invalid_arg`. */
export function encodePathArg(name: string, value: unknown, isPath: boolean): string {
  if (value === undefined)
    throw new GatehouseError('mcp.missing_arg', `Path argument "${name}" is required.`, { arg: name });
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) < 2 ** 53) text = String(value);
  else throw invalid(name, 'must be a string or an integer below 2^53');
  if (!isPath) {
    if (text.includes('/')) throw invalid(name, 'may not contain "/"');
    return checkSegment(name, text);
  }
  return text
    .split('/')
    .map((segment) => checkSegment(name, segment))
    .join('/');
}
