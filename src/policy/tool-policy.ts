/**
 * A server's tool policy and the one classifier that turns it into a verdict.
 * The registry's `test` route and the hub use this same function, so what an
 * operator previews is what agents get.
 */
import { z } from 'zod';
import { GatehouseError } from '../errors.js';
import type { PolicyVerdict } from './verdicts.js';

const toolNames = z.array(z.string().min(1).max(256)).max(10_000);

export const toolPolicySchema = z.strictObject({
  mode: z.enum(['all', 'include', 'exclude']).default('all'),
  include: toolNames.default([]),
  exclude: toolNames.default([]),
  allow: toolNames.default([]),
  gated: toolNames.default([]),
  blocked: toolNames.default([]),
  defaultTier: z.enum(['allow', 'gated', 'blocked']).default('gated'),
});

export type ToolPolicy = z.output<typeof toolPolicySchema>;
export type Tier = ToolPolicy['defaultTier'];

export const DEFAULT_TOOL_POLICY: ToolPolicy = toolPolicySchema.parse({});

/** `mcp.tools_invalid` when a tool is on two tier lists, or both included and excluded. */
export function assertToolPolicy(policy: ToolPolicy): void {
  const problems: string[] = [];
  const tierOf = new Map<string, string>();
  for (const tier of ['allow', 'gated', 'blocked'] as const) {
    for (const name of policy[tier]) {
      const other = tierOf.get(name);
      if (other && other !== tier) problems.push(`${name} is on both ${other} and ${tier}`);
      tierOf.set(name, tier);
    }
  }
  const excluded = new Set(policy.exclude);
  for (const name of policy.include) if (excluded.has(name)) problems.push(`${name} is both included and excluded`);
  if (problems.length > 0) {
    throw new GatehouseError('mcp.tools_invalid', `The tool policy is invalid: ${problems.join('; ')}.`, {
      issues: problems.map((message) => ({ path: 'body', message })),
    });
  }
}

/** What the policy alone says of a tool; pin state (quarantine) is layered on top (`verdicts.ts`). */
export function classifyTool(policy: ToolPolicy, tool: string): PolicyVerdict {
  if (policy.mode === 'include' && !policy.include.includes(tool)) return 'excluded';
  if (policy.mode === 'exclude' && policy.exclude.includes(tool)) return 'excluded';
  if (policy.blocked.includes(tool)) return 'blocked';
  if (policy.gated.includes(tool)) return 'gated';
  if (policy.allow.includes(tool)) return 'allow';
  return policy.defaultTier;
}
