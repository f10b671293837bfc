/** What Gatehouse's own protocol code (the hub's fast path, direct upstream calls) shares about the MCP wire. */

/** The stateless revision (no initialize, no sessions, a per-request envelope). */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

export type Json = Record<string, unknown>;

/** A JSON object (not null, not an array). */
export const isPlainObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Texts `resultText` made, per result object. */
const resultTexts = new WeakMap<object, string>();

/**
 * `JSON.stringify(result)`, once per object: a call's result is measured for its audit row, then sent, and both
 * read this text. For results only (they are not changed once answered); throws as `JSON.stringify` does.
 */
export function resultText(result: object): string {
  let text = resultTexts.get(result);
  if (text === undefined) {
    text = JSON.stringify(result);
    resultTexts.set(result, text);
  }
  return text;
}
