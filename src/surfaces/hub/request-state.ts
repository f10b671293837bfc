/**
 * The hub's own `requestState` for the 2026-07-28 multi-round-trip flow. An upstream asking the
 * agent for input (elicitation, sampling, roots) answers with its own opaque state; the hub hands
 * the agent a state of its own, HMAC-signed with a key derived from the sealing key (so any replica
 * can take the next round), that binds the round to the token, the server, the tool and the
 * arguments, and carries the upstream's state inside. The agent can read it but not forge it.
 */
import { createRequestStateCodec, type RequestStateCodec } from '@modelcontextprotocol/server';
import { argumentsHash } from '../../approvals/types.js';
import { deriveKey, type SealKey } from '../../secrets/seal.js';

export interface HubRequestState {
  v: 1;
  /** Token id the round belongs to. */
  c: string;
  /** Server id and the tool's upstream name. */
  s: string;
  t: string;
  /** RFC 8785 hash of the arguments: a later round must send the same ones. */
  h: string;
  /** The upstream's state for its next round. */
  u?: string;
  /** The approval whose executed call this flow continues (rounds go through approval_status). */
  a?: string;
  /**
   * With `a`: the approval's round this state answers (`roundOf` in `approved-rounds.ts`, a hash of the stored
   * input round). The state is signed and lives 15 minutes with no use count of its own: what makes it answer
   * one round once is this binding together with the round's claim in the store (one winner), after which
   * the stored round is another and the state matches nothing.
   */
  r?: string;
  /** 1: a round the hub started itself (a URL elicitation to connect the person's upstream account). */
  g?: 1;
  /** The upstream call held for this flow (a 2025-era upstream's asks to a 2026-07-28 agent, `held-calls.ts`). */
  p?: string;
}

/** Rounds are human-paced (someone answers a form): as long as an approval waits by default. */
const STATE_TTL_S = 15 * 60;

export type HubStateCodec = RequestStateCodec<HubRequestState>;

export function createHubStateCodec(sealKey: SealKey): HubStateCodec {
  return createRequestStateCodec<HubRequestState>({
    key: deriveKey(sealKey, 'hub requestState'),
    ttlSeconds: STATE_TTL_S,
  });
}

/** The state's binding to one call, for minting and for checking a later round. */
export function stateBinding(
  clientId: string,
  serverId: string,
  tool: string,
  args: Record<string, unknown>,
): Omit<HubRequestState, 'u' | 'a' | 'p' | 'r'> {
  return { v: 1, c: clientId, s: serverId, t: tool, h: argumentsHash(args) };
}

/** Whether a verified state belongs to this call (and, for an approval's rounds, to this approval). */
export function stateMatches(
  state: HubRequestState,
  expected: Omit<HubRequestState, 'u' | 'a' | 'p' | 'r'>,
  approvalId?: string,
): boolean {
  return (
    state.v === 1 &&
    state.c === expected.c &&
    state.s === expected.s &&
    state.t === expected.t &&
    state.h === expected.h &&
    state.a === approvalId
  );
}
