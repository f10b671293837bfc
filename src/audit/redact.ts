/**
 * Redaction for audited payloads (`audit.payloads=data`): a bounded, JSON-safe
 * copy of a value in which every field whose key names a credential is
 * replaced by `"[redacted]"`, at any depth, and credentials of well-known
 * shapes inside ordinary strings are replaced too (`scrubSecrets`). It is
 * best-effort: a secret of no recognisable name or shape passes. The copy is
 * bounded in depth, width and total size, so a hostile or huge payload costs
 * little to record.
 */

export const REDACTED = '[redacted]';

/** Keys whose values are never recorded (matched anywhere in the key, case-insensitively). */
export const SENSITIVE_KEY =
  /token|secret|passw(?:or)?d|passphrase|passcode|authorization|cookie|api[-_]?key|private[-_]?key|credential|conn(?:ection)?[-_]?(?:str(?:ing)?|ur[il])/i;

/** A key's words: `accessKey`, `ACCESS_KEY`, `x-access-key`, `APIKey` → access/key, api/key. */
const KEY_WORDS = /[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])/;

/** Words that name a credential wherever they stand in a key (`pwd`, `sentry_dsn`, `dsnUrl`). */
const SECRET_WORDS = new Set(['pwd', 'dsn']);

/**
 * Words that name a credential as a key's last word (`key`, `access_key`, `dbPass`, `basic_auth`), never as a
 * part of a word (`keyboard`, `monkey`, `passage`, `compass`, `author`).
 */
const SECRET_LAST_WORDS = new Set(['key', 'pass', 'pw', 'auth']);

/** Words after `auth` that still make a credential (`authHeader`, `auth_value`). */
const AUTH_CARRIERS = new Set(['header', 'value', 'string', 'data', 'info', 'params']);

/** `…_key` keys that name a database or lookup key, not a credential (`primary_key`, `sortKey`, `publicKey`). */
const PLAIN_KEY_QUALIFIERS = new Set([
  'primary',
  'foreign',
  'sort',
  'partition',
  'range',
  'hash',
  'cache',
  'idempotency',
  'dedup',
  'dedupe',
  'object',
  'row',
  'unique',
  'composite',
  'lookup',
  'public',
  'hot',
  'shortcut',
  'group',
  'join',
  'routing',
  'shard',
  'map',
  'index',
  'translation',
  'i18n',
  'message',
  'label',
]);

/** Verdicts of keys already seen: payloads repeat the same few keys. Bounded; cleared when full. */
const keyVerdicts = new Map<string, boolean>();
const MAX_KEY_VERDICTS = 4096;

function classifyKey(key: string): boolean {
  if (SENSITIVE_KEY.test(key)) return true;
  const words: string[] = [];
  for (const part of key.split(KEY_WORDS)) {
    const word = part.replace(/\d+$/, '').toLowerCase();
    if (word) words.push(word);
  }
  const last = words.length - 1;
  if (last < 0) return false;
  for (let i = 0; i <= last; i++) {
    const word = words[i] as string;
    if (SECRET_WORDS.has(word)) return true;
    if (word === 'auth' && i < last && AUTH_CARRIERS.has(words[i + 1] as string)) return true;
  }
  const final = words[last] as string;
  if (!SECRET_LAST_WORDS.has(final)) return false;
  return !(final === 'key' && last > 0 && PLAIN_KEY_QUALIFIERS.has(words[last - 1] as string));
}

export function isSensitiveKey(key: string): boolean {
  let verdict = keyVerdicts.get(key);
  if (verdict === undefined) {
    verdict = classifyKey(key);
    if (key.length <= 256) {
      if (keyVerdicts.size >= MAX_KEY_VERDICTS) keyVerdicts.clear();
      keyVerdicts.set(key, verdict);
    }
  }
  return verdict;
}

// Credentials inside free text. Every pattern is linear: no nested quantifiers, and each repeated class stops at
// the character that ends it.

/** PEM private key blocks, to their END line or, cut short, to the end of the text. */
const PEM_PRIVATE_KEY =
  /-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|$)/g;

/** The password of a URL's userinfo (`postgres://admin:S3cret@db/prod`); the user and the rest of the URL stay. */
const URL_PASSWORD = /\/\/([^\s"'<>:@/?#]*):[^\s"'<>/?#]*@/g;

/**
 * Tokens of well-known shapes, case-sensitively: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`),
 * Gatehouse (`gh_`), OpenAI/Anthropic (`sk-`, `sk-ant-`), Stripe (`sk_live_`, `rk_test_`), Slack (`xoxb-`, `xoxp-`…),
 * AWS access key ids (`AKIA…`), Google API keys (`AIza…`), GitLab (`glpat-`), npm (`npm_`), Slack webhooks, and JWTs.
 */
const TOKEN_SHAPES = new RegExp(
  [
    'gh[pousr]_[A-Za-z0-9]{20,}',
    'github_pat_[A-Za-z0-9_]{20,}',
    'gh_[A-Za-z0-9_-]{20,}',
    'sk-[A-Za-z0-9_-]{20,}',
    '[sr]k_(?:live|test)_[A-Za-z0-9]{10,}',
    'xox[abeoprs]-[A-Za-z0-9-]{10,}',
    '(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\\b',
    'AIza[A-Za-z0-9_-]{35}',
    'glpat-[A-Za-z0-9_-]{20,}',
    'npm_[A-Za-z0-9]{36}',
    'hooks\\.slack\\.com/services/[A-Za-z0-9/]+',
    'eyJ[A-Za-z0-9_-]{8,}\\.ey[A-Za-z0-9_-]{4,}\\.[A-Za-z0-9_-]*',
  ]
    .map((shape) => `\\b${shape}`)
    .join('|'),
  'g',
);

/** `Bearer …`/`Basic …` anywhere in a text (`"Authorization: Bearer …"`). */
const AUTH_SCHEME_VALUE = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi;

/**
 * Pairs in free text: `name=value`, `name: value`, `"name": "value"` (query strings, header lines, env dumps, JSON
 * in a string). Found from their separator, then the name before it: most text has few separators.
 */
const PAIR_SEPARATOR = /[:=]/g;
const PAIR_OPENING_QUOTE = /[ \t]*(\\?["'])?/y;
/** An authorization scheme the value of a pair starts with (`Authorization: Token …`): it stays, the rest goes. */
const PAIR_SCHEME = /(?:Bearer|Basic|Token|Digest|Negotiate|Bot|ApiKey|Key|SSWS)[ \t]+(?=[^\s])/iy;
const PAIR_BARE_VALUE = /[^\s"'\\&;,<>(){}[\]]+/y;
const PAIR_DOUBLE_QUOTED = /[^"\\\r\n]+/y;
const PAIR_SINGLE_QUOTED = /[^'\\\r\n]+/y;
const PAIR_COOKIE_VALUE = /[^"'\\\r\n]+/y;
const MAX_PAIR_NAME = 128;

/** `[A-Za-z0-9_.-]`: a character of a pair's name. */
function isNameChar(code: number): boolean {
  return (
    (code >= 97 && code <= 122) || // a-z
    (code >= 65 && code <= 90) || // A-Z
    (code >= 48 && code <= 57) || // 0-9
    code === 95 || // _
    code === 46 || // .
    code === 45 // -
  );
}

/** The start of the pair name that ends before the separator at `separator` (spaces and up to 3 quotes between). */
function pairNameBefore(text: string, separator: number, floor: number): [start: number, end: number] | undefined {
  let end = separator;
  while (end > floor && (text.charCodeAt(end - 1) === 32 || text.charCodeAt(end - 1) === 9)) end--;
  for (let quotes = 0; quotes < 3 && end > floor; quotes++) {
    const code = text.charCodeAt(end - 1);
    if (code !== 34 && code !== 39 && code !== 92) break; // a quote or a backslash
    end--;
  }
  let start = end;
  while (start > floor && end - start <= MAX_PAIR_NAME && isNameChar(text.charCodeAt(start - 1))) start--;
  if (start === end || end - start > MAX_PAIR_NAME) return undefined;
  if (start === floor && start > 0 && isNameChar(text.charCodeAt(start - 1))) return undefined; // cut by a value
  const first = text.charCodeAt(start) | 32;
  return first >= 97 && first <= 122 ? [start, end] : undefined; // a name starts with a letter
}

/** Replaces the value of each pair whose name is a credential's (`isSensitiveKey`); the rest of the text stays. */
function scrubPairs(text: string): string {
  let out = '';
  let copied = 0;
  PAIR_SEPARATOR.lastIndex = 0;
  for (let match = PAIR_SEPARATOR.exec(text); match; match = PAIR_SEPARATOR.exec(text)) {
    const separator = match.index;
    const span = pairNameBefore(text, separator, copied);
    if (!span) continue;
    const name = text.slice(span[0], span[1]);
    if (!isSensitiveKey(name)) continue;
    PAIR_OPENING_QUOTE.lastIndex = separator + 1;
    const quote = PAIR_OPENING_QUOTE.exec(text)?.[1];
    let at = PAIR_OPENING_QUOTE.lastIndex;
    let value: RegExp;
    if (quote) value = quote.endsWith('"') ? PAIR_DOUBLE_QUOTED : PAIR_SINGLE_QUOTED;
    else if (/cookie/i.test(name)) value = PAIR_COOKIE_VALUE;
    else {
      PAIR_SCHEME.lastIndex = at;
      if (PAIR_SCHEME.test(text)) at = PAIR_SCHEME.lastIndex;
      value = PAIR_BARE_VALUE;
    }
    value.lastIndex = at;
    if (!value.test(text)) continue;
    out += `${text.slice(copied, at)}${REDACTED}`;
    copied = value.lastIndex;
    PAIR_SEPARATOR.lastIndex = copied;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * `text` with the credentials it carries replaced by `[redacted]`: private keys, URL passwords, tokens of
 * well-known shapes, `Bearer`/`Basic` credentials and the values of secret-named pairs (`?api_key=…`,
 * `password=…`, `Authorization: Token …`, `"x-api-key": "…"`). Best-effort: a secret of no known shape passes.
 */
export function scrubSecrets(text: string): string {
  if (text.length < 8) return text;
  let out = text;
  if (out.includes('PRIVATE KEY')) out = out.replace(PEM_PRIVATE_KEY, REDACTED);
  if (out.includes('@')) out = out.replace(URL_PASSWORD, `//$1:${REDACTED}@`);
  out = out
    .replace(TOKEN_SHAPES, REDACTED)
    .replace(AUTH_SCHEME_VALUE, (_match, scheme: string) => `${scheme} ${REDACTED}`);
  return scrubPairs(out);
}

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

/** Characters past `maxString` scrubbed with the kept part, so a credential cut by the bound is still found whole. */
const SCRUB_OVERLAP = 1024;

function redactString(value: string, max: number): string {
  if (value.length <= max) return scrubSecrets(value);
  const scrubbed = scrubSecrets(value.slice(0, max + SCRUB_OVERLAP)).slice(0, max);
  return `${scrubbed}…[truncated ${value.length - max} chars]`;
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
