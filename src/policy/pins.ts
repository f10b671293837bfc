/**
 * Tool pins: the SHA-256 of the RFC 8785 canonical JSON of the fields that
 * define what a tool does. A later handshake that sees a different hash
 * quarantines the tool until an operator approves the new definition.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { unsafePatterns } from './schema-safety.js';

export interface ToolDefinition {
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

export const PINNED_FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'] as const;

/** The pinned part of a tool, dropping everything else the upstream sent (`_meta`, icons, …). */
export function pinnedDefinition(tool: ToolDefinition): ToolDefinition {
  const picked: Record<string, unknown> = {};
  for (const field of PINNED_FIELDS) if (tool[field] !== undefined) picked[field] = tool[field];
  return picked as unknown as ToolDefinition;
}

export function pinHash(tool: ToolDefinition): string {
  const canonical = canonicalize(pinnedDefinition(tool)) ?? '';
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

export const MAX_SCHEMA_BYTES = 64 * 1024;
export const MAX_SCHEMA_DEPTH = 32;

function depthOf(value: unknown, limit: number, depth = 0): number {
  if (depth > limit || value === null || typeof value !== 'object') return depth;
  let max = depth;
  for (const child of Object.values(value as Record<string, unknown>)) {
    max = Math.max(max, depthOf(child, limit, depth + 1));
    if (max > limit) break;
  }
  return max;
}

/** Upstream schemas are untrusted: one this large or deep is never compiled, and its tool is quarantined. */
export function schemaTooLarge(tool: ToolDefinition): boolean {
  for (const schema of [tool.inputSchema, tool.outputSchema]) {
    if (schema === undefined) continue;
    if (Buffer.byteLength(JSON.stringify(schema) ?? '', 'utf8') > MAX_SCHEMA_BYTES) return true;
    if (depthOf(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH) return true;
  }
  return false;
}

/**
 * Why a tool's schemas are refused before anything compiles them: over the size or depth limit
 * (`schema_too_large`), or with a pattern RE2 cannot run (`unsafe_schema`); null when they are fine.
 */
export function schemaRefusal(tool: ToolDefinition): 'schema_too_large' | 'unsafe_schema' | null {
  if (schemaTooLarge(tool)) return 'schema_too_large';
  if (unsafePatterns(tool.inputSchema, tool.outputSchema).length > 0) return 'unsafe_schema';
  return null;
}
