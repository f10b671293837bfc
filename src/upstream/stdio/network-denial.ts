/**
 * A stdio server with `sandbox.network: "none"` runs in its own empty network namespace: every
 * connection it opens fails inside the sandbox, where the supervisor cannot see it. What the gateway
 * can see is the failure the child reports — a failed start, its stderr, a call's error — so that is
 * where the cause is named: the server's log says its network is off, and a failure that carries a
 * network error (ECONNREFUSED, ENETUNREACH, a DNS lookup that failed…) is typed
 * `sandbox.network_denied` in its `lastError`.
 */

/** What Node, npm, Python and libc print when a connection or a name lookup fails. */
const NETWORK_FAILURE =
  /\b(ENETUNREACH|ECONNREFUSED|EHOSTUNREACH|EAI_AGAIN|ENOTFOUND|getaddrinfo|Network is unreachable|Connection refused|Temporary failure in name resolution|Name or service not known)\b/i;

export const NETWORK_DENIED_CODE = 'sandbox.network_denied';

/** Said on the log of a "none" server whose start or call failed. */
export const NETWORK_OFF_HINT =
  'Its network is off (sandbox.network "none"): a server that must download a package or reach an API fails so; an admin sets sandbox.network to "host" for it.';

/** The line of `texts` that shows a failed connection or lookup, if any (bounded, for a message). */
export function networkFailureIn(texts: readonly (string | undefined)[]): string | undefined {
  for (const text of texts) {
    if (!text) continue;
    const line = text.split('\n').find((l) => NETWORK_FAILURE.test(l));
    if (line) return line.trim().slice(0, 300);
  }
  return undefined;
}

/** What a "none" server whose failure carries a network error is told. */
export function networkDeniedMessage(id: string, evidence: string): string {
  return `The stdio server "${id}" tried to reach the network, which is off for it (sandbox.network "none"): ${evidence}`;
}

/** Its `lastError` (`code: message`, as elsewhere): `sandbox.network_denied: …`. */
export function networkDeniedError(id: string, evidence: string): string {
  return `${NETWORK_DENIED_CODE}: ${networkDeniedMessage(id, evidence)}`;
}

/** The text of a tool result's error content (what a server says when its tool failed). */
export function errorTextOf(result: unknown): string | undefined {
  if (!result || typeof result !== 'object' || (result as { isError?: unknown }).isError !== true) return undefined;
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return undefined;
  return content
    .map((c) =>
      c && typeof c === 'object' && (c as { type?: unknown }).type === 'text'
        ? String((c as { text?: unknown }).text ?? '')
        : '',
    )
    .join('\n');
}
