/**
 * Per-tool overrides (issue 22): what an operator changes of how a tool is
 * shown to agents — a display name (its aggregated name), a replaced or
 * appended description, arguments hidden behind fixed values, annotations.
 * Applied on the way out (tools/list), reversed on the way in (the display
 * name maps back, fixed values are injected). An override never changes what
 * an approver sees: the card shows both names and the real arguments.
 */
import { createHash } from 'node:crypto';
import type { Tool } from '@modelcontextprotocol/server';
import canonicalize from 'canonicalize';
import { z } from 'zod';
import { GatehouseError } from '../errors.js';

/** A display name: the spec's tool-name characters, at most 64, never a `gatehouse__` name. */
export const DISPLAY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
export const MAX_DISPLAY_NAME = 64;

export const annotationsSchema = z.strictObject({
  title: z.string().max(200).optional(),
  readOnlyHint: z.boolean().optional(),
  destructiveHint: z.boolean().optional(),
  idempotentHint: z.boolean().optional(),
  openWorldHint: z.boolean().optional(),
});

export const overrideSchema = z.strictObject({
  displayName: z
    .string()
    .regex(DISPLAY_NAME, 'letters, digits, _ . - only, at most 64 characters')
    .refine((name) => !name.toLowerCase().startsWith('gatehouse__'), 'gatehouse__ names are reserved')
    .optional(),
  description: z.string().max(8192).optional(),
  /** `replace` (default) puts `description` in place of the upstream's; `append` adds it after a blank line. */
  descriptionMode: z.enum(['replace', 'append']).optional(),
  /** Arguments hidden from agents, sent with these values on every call (validated against the pinned schema). */
  fixedArguments: z
    .record(z.string().min(1).max(256), z.unknown())
    .refine((args) => Object.keys(args).length <= 64, 'at most 64 fixed arguments')
    .optional(),
  /** Annotations merged over the upstream's. */
  annotations: annotationsSchema.optional(),
});

export type ToolOverride = z.infer<typeof overrideSchema>;

/** An override as stored beside the pin: what the operator set, and the pin hash it was checked against. */
export interface StoredOverride extends ToolOverride {
  /** The tool pin (hash) the override was validated against when it was set. */
  basePinHash: string | null;
}

export type OverrideState = 'active' | 'quarantined';
/** Why an override is not in force. */
export type OverrideReason = 'argument_removed' | 'name_conflict';

export function overrideHash(override: ToolOverride): string {
  return createHash('sha256')
    .update(canonicalize(override) ?? '', 'utf8')
    .digest('hex');
}

interface ObjectSchema {
  type?: unknown;
  properties?: Record<string, unknown>;
  required?: unknown;
}

function propertiesOf(schema: unknown): Record<string, unknown> {
  const properties = (schema as ObjectSchema | null)?.properties;
  return properties !== null && typeof properties === 'object' ? properties : {};
}

/** The fixed arguments the tool's schema no longer declares (an upstream change removed them). */
export function missingArguments(override: ToolOverride, inputSchema: unknown): string[] {
  const properties = propertiesOf(inputSchema);
  return Object.keys(override.fixedArguments ?? {}).filter((name) => !Object.hasOwn(properties, name));
}

/** The schema an agent sees: the fixed arguments removed from `properties` and `required`. */
export function visibleSchema(inputSchema: unknown, fixed: readonly string[]): unknown {
  if (fixed.length === 0) return inputSchema;
  const schema = (inputSchema ?? { type: 'object' }) as ObjectSchema & Record<string, unknown>;
  const properties = { ...propertiesOf(schema) };
  for (const name of fixed) delete properties[name];
  const required = Array.isArray(schema.required)
    ? (schema.required as unknown[]).filter((name) => typeof name !== 'string' || !fixed.includes(name))
    : undefined;
  return { ...schema, properties, ...(required ? { required } : {}) };
}

/** The tool as advertised with the override applied (its name is set by the caller). */
export function overriddenTool(tool: Tool, override: ToolOverride): Tool {
  const fixed = Object.keys(override.fixedArguments ?? {});
  let description = tool.description;
  if (override.description !== undefined) {
    description =
      override.descriptionMode === 'append' && description
        ? `${description}\n\n${override.description}`
        : override.description;
  }
  const annotations = override.annotations
    ? { ...((tool.annotations as Record<string, unknown> | undefined) ?? {}), ...override.annotations }
    : tool.annotations;
  return {
    ...tool,
    ...(description !== undefined ? { description } : {}),
    inputSchema: visibleSchema(tool.inputSchema, fixed) as Tool['inputSchema'],
    ...(annotations !== undefined ? { annotations: annotations as Tool['annotations'] } : {}),
  };
}

/**
 * The arguments really sent upstream: the agent's, with the fixed values injected. An agent that gives a
 * fixed argument itself is refused (it cannot see it, so it guessed): nothing it sends replaces a fixed value.
 */
export function withFixedArguments(override: ToolOverride | undefined, args: Record<string, unknown>) {
  const fixed = override?.fixedArguments;
  if (!fixed || Object.keys(fixed).length === 0) return args;
  const given = Object.keys(fixed).filter((name) => Object.hasOwn(args, name));
  if (given.length > 0) {
    throw new GatehouseError(
      'override.argument_fixed',
      `Fixed by an operator and not to be given: ${given.join(', ')}.`,
      {
        arguments: given,
      },
    );
  }
  return { ...args, ...fixed };
}
