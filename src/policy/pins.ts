/**
 * Pins: the SHA-256 of the RFC 8785 canonical JSON of the fields that define
 * what an item does — a tool, a prompt (later a resource). A later handshake
 * that sees a different hash quarantines the item until an operator approves
 * the new definition. Each pin records the scheme (field-set version) it was
 * made with and is always compared on that scheme's fields.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { refLoop, unsafePatterns } from './schema-safety.js';

export interface ToolDefinition {
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

export const PINNED_FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'] as const;

/**
 * Scheme 2 adds a tool's `execution` (task support) and its MCP Apps UI (`_meta.ui`: the `ui://` resource
 * it renders, and that resource's permissions): changing either changes what calling the tool does.
 * A dotted field is a path into the item; only that branch of `_meta` is pinned, the rest stays free.
 */
export const PINNED_FIELDS_V2 = [...PINNED_FIELDS, 'execution', '_meta.ui'] as const;

/** What a pin holds. */
export type PinKind = 'tool' | 'prompt' | 'resource';
export const PIN_KINDS: readonly PinKind[] = ['tool', 'prompt', 'resource'];

/** The scheme new pins are made with. A later scheme adds fields; a pin keeps comparing on its own. */
export const CURRENT_PIN_SCHEME = 2;

/**
 * What a UI resource's pin holds (MCP Apps, `ui://`): its content as a read answers it — the HTML (`text`, or
 * `blob`), its MIME type, and its `_meta.ui` (the CSP, permissions and origin the host grants it). `name` is
 * the resource's URI.
 */
export const UI_RESOURCE_FIELDS = ['name', 'mimeType', 'text', 'blob', '_meta.ui'] as const;

/** The pinned fields per kind and scheme (UI resources are pinned from scheme 2 on). */
const SCHEME_FIELDS: Record<number, Partial<Record<PinKind, readonly string[]>>> = {
  1: { tool: PINNED_FIELDS, prompt: ['name', 'title', 'description', 'arguments'] },
  2: { tool: PINNED_FIELDS_V2, prompt: ['name', 'title', 'description', 'arguments'], resource: UI_RESOURCE_FIELDS },
};

/** The `ui://` resource a tool's MCP Apps UI renders (`_meta.ui.resourceUri`, or the draft's `ui/resourceUri`). */
export function uiResourceOf(tool: { _meta?: unknown }): string | undefined {
  const meta = tool._meta;
  if (!isRecord(meta)) return undefined;
  const uri = isRecord(meta.ui) ? meta.ui.resourceUri : meta['ui/resourceUri'];
  return typeof uri === 'string' && uri.startsWith('ui://') ? uri : undefined;
}

/**
 * A UI resource as it is pinned, from a read's `contents`: the content item of that URI (or the first one),
 * named by the URI. Undefined when the answer carries no content.
 */
export function uiResourceItem(uri: string, contents: unknown): PinnableItem | undefined {
  if (!Array.isArray(contents)) return undefined;
  const items = contents.filter((c): c is Record<string, unknown> => isRecord(c));
  const content = items.find((c) => c.uri === uri) ?? items[0];
  if (!content) return undefined;
  const { uri: _uri, ...rest } = content;
  return { ...rest, name: uri };
}

/** A listed item as the upstream sent it (a tool, a prompt, …): only its name is assumed. */
export type PinnableItem = { name: string } & Record<string, unknown>;

function fieldsOf(kind: PinKind, scheme: number): readonly string[] {
  const fields = SCHEME_FIELDS[scheme]?.[kind];
  if (!fields) throw new Error(`No pin scheme ${scheme} for ${kind}s.`);
  return fields;
}

/** The pinned part of an item, dropping everything else the upstream sent (`_meta`, icons, …). */
export function pinnedItem(item: PinnableItem, kind: PinKind, scheme = CURRENT_PIN_SCHEME): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const field of fieldsOf(kind, scheme)) {
    const [head, ...rest] = field.split('.') as [string, ...string[]];
    let value: unknown = item[head];
    for (const key of rest) value = isRecord(value) ? value[key] : undefined;
    if (value === undefined) continue;
    // `_meta.ui` is kept as `{_meta: {ui}}`, so the pinned definition reads like the tool it came from.
    let into = picked;
    for (const key of [head, ...rest].slice(0, -1)) {
      const next = isRecord(into[key]) ? (into[key] as Record<string, unknown>) : {};
      into[key] = next;
      into = next;
    }
    into[[head, ...rest].at(-1) as string] = value;
  }
  return picked;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function itemPinHash(item: PinnableItem, kind: PinKind, scheme = CURRENT_PIN_SCHEME): string {
  const canonical = canonicalize(pinnedItem(item, kind, scheme)) ?? '';
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

/** The pinned part of a tool, dropping everything else the upstream sent (`_meta`, icons, …). */
export function pinnedDefinition(tool: ToolDefinition): ToolDefinition {
  return pinnedItem(tool as unknown as PinnableItem, 'tool') as unknown as ToolDefinition;
}

export function pinHash(tool: ToolDefinition): string {
  return itemPinHash(tool as unknown as PinnableItem, 'tool');
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
 * (`schema_too_large`), or with a pattern RE2 cannot run or a `$ref` loop that consumes nothing (both
 * `unsafe_schema`: validating would hang or overflow the stack on every call); null when they are fine.
 * The size check comes first: it bounds the walks after it.
 */
export function schemaRefusal(tool: ToolDefinition): 'schema_too_large' | 'unsafe_schema' | null {
  if (schemaTooLarge(tool)) return 'schema_too_large';
  if (unsafePatterns(tool.inputSchema, tool.outputSchema).length > 0) return 'unsafe_schema';
  if (refLoop(tool.inputSchema, tool.outputSchema)) return 'unsafe_schema';
  return null;
}
