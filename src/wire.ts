/** What Gatehouse's own protocol code (the hub's fast path, direct upstream calls) shares about the MCP wire. */

/** The stateless revision (no initialize, no sessions, a per-request envelope). */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

export type Json = Record<string, unknown>;

/** A JSON object (not null, not an array). */
export const isPlainObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);
