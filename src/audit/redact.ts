/**
 * Redaction for audited payloads (`audit.payloads=data`): a bounded, JSON-safe
 * copy of a value in which every field whose key names a credential is
 * replaced by `"[redacted]"`, at any depth. The copy is bounded in depth,
 * width and total size, so a hostile or huge payload costs little to record.
 */

export const REDACTED = '[redacted]';

/** Keys whose values are never recorded (matched anywhere in the key, case-insensitively). */
export const SENSITIVE_KEY =
  /token|secret|password|passwd|authorization|cookie|api[-_]?key|private[-_]?key|credential/i;

/** Credentials that may sit inside an ordinary string value (`"Authorization: Bearer …"`, a Gatehouse token). */
const SENSITIVE_VALUE = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}|\bgh_[A-Za-z0-9_-]{20,}/gi;

export interface RedactLimits {
  /** Levels of nesting kept; deeper values become `"[truncated: depth]"`. */
  maxDepth: number;
  /** Characters kept of one string. */
  maxString: number;
  /** Items kept of one array, keys kept of one object. */
  maxItems: number;
  /** Approximate characters of the whole copy; past it, values become `"[truncated: size]"`. */
  maxTotal: number;
}

export const DEFAULT_REDACT_LIMITS: RedactLimits = {
  maxDepth: 12,
  maxString: 2048,
  maxItems: 100,
  maxTotal: 32 * 1024,
};

export function isSensitiveKey(key: string): boolean {
  return SENSITIVE_KEY.test(key);
}

function redactString(value: string, max: number): string {
  const cut = value.length > max ? value.slice(0, max) : value;
  const scrubbed = cut.replace(SENSITIVE_VALUE, (_match, scheme: string | undefined) =>
    scheme ? `${scheme} ${REDACTED}` : REDACTED,
  );
  return value.length > max ? `${scrubbed}…[truncated ${value.length - max} chars]` : scrubbed;
}

/** A redacted, bounded, JSON-serializable copy of `value`. Never throws, never mutates its input. */
export function redact(value: unknown, limits: Partial<RedactLimits> = {}): unknown {
  const lim: RedactLimits = { ...DEFAULT_REDACT_LIMITS, ...limits };
  let budget = lim.maxTotal;
  const ancestors = new Set<object>();

  const walk = (node: unknown, depth: number): unknown => {
    if (budget <= 0) return '[truncated: size]';
    switch (typeof node) {
      case 'string': {
        const out = redactString(node, lim.maxString);
        budget -= out.length + 2;
        return out;
      }
      case 'number':
        budget -= 8;
        return Number.isFinite(node) ? node : String(node);
      case 'boolean':
        budget -= 5;
        return node;
      case 'bigint':
        budget -= 8;
        return node.toString();
      case 'undefined':
      case 'function':
      case 'symbol':
        return undefined;
    }
    if (node === null) {
      budget -= 4;
      return null;
    }
    const object = node as object;
    if (depth >= lim.maxDepth) {
      budget -= 20;
      return '[truncated: depth]';
    }
    if (ancestors.has(object)) return '[circular]';
    if (object instanceof Date) {
      budget -= 26;
      return Number.isNaN(object.getTime()) ? null : object.toISOString();
    }
    if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) {
      budget -= 24;
      return `[binary ${object.byteLength} bytes]`;
    }
    ancestors.add(object);
    try {
      if (Array.isArray(object)) {
        const out: unknown[] = [];
        const n = Math.min(object.length, lim.maxItems);
        for (let i = 0; i < n && budget > 0; i++) {
          const item = walk(object[i], depth + 1);
          out.push(item === undefined ? null : item);
          budget -= 1;
        }
        if (object.length > out.length) out.push(`[truncated: ${object.length - out.length} more items]`);
        return out;
      }
      const out: Record<string, unknown> = {};
      let kept = 0;
      let more = 0;
      for (const key in object) {
        if (!Object.hasOwn(object, key)) continue;
        if (kept >= lim.maxItems || budget <= 0) {
          more += 1;
          if (more > 1000) break; // counting the rest of a huge object is not worth its cost
          continue;
        }
        budget -= key.length + 4;
        let child: unknown;
        if (isSensitiveKey(key)) {
          child = REDACTED;
          budget -= REDACTED.length;
        } else {
          try {
            child = walk((object as Record<string, unknown>)[key], depth + 1);
          } catch {
            child = '[unreadable]'; // a throwing getter
          }
        }
        if (child === undefined) continue;
        // `__proto__` as a plain own key, never the prototype.
        Object.defineProperty(out, key, { value: child, enumerable: true, writable: true, configurable: true });
        kept += 1;
      }
      if (more > 0) out['[truncated]'] = more > 1000 ? 'more than 1000 keys' : `${more} more keys`;
      return out;
    } finally {
      ancestors.delete(object);
    }
  };

  return walk(value, 0);
}
