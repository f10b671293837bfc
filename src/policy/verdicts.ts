/**
 * The verdict vocabulary, once: what the tool policy says of a tool, what a
 * tool's pin adds on top, and what a call is finally audited as. Every layer
 * (the operator's preview, the hub, the gate, metrics, the audit filter) reads
 * these words and the one quarantine rule from here.
 */

/** What a server's tool policy alone says of a tool (`tool-policy.ts` classifies). */
export type PolicyVerdict = 'allow' | 'gated' | 'blocked' | 'excluded';

/** A tool's verdict: the policy's, with quarantine on top. */
export type ToolVerdict = PolicyVerdict | 'quarantined';

/** What one call is audited as: a tool verdict that let it through or stopped it, or why nothing resolved. */
export const CALL_VERDICTS = ['allow', 'gated', 'blocked', 'unknown_server', 'unknown_tool', 'quarantined'] as const;
export type CallVerdict = (typeof CALL_VERDICTS)[number];

/**
 * The one quarantine rule: a tool no operator has reviewed — no pin yet, or a pin waiting on a
 * changed or new definition — is quarantined, whatever the policy says, unless the policy hides it
 * (an excluded tool stays hidden, so nothing about it leaks).
 */
export function toolVerdict(policy: PolicyVerdict, pin: { state: 'pinned' | 'quarantined' } | undefined): ToolVerdict {
  if (policy === 'excluded') return policy;
  return pin === undefined || pin.state === 'quarantined' ? 'quarantined' : policy;
}

/** Whether a tool with this verdict is listed to agents and may be called (perhaps after approval). */
export function isUsable(verdict: ToolVerdict): verdict is 'allow' | 'gated' {
  return verdict === 'allow' || verdict === 'gated';
}
