/**
 * One schema for every setting Gatehouse reads at start.
 *
 * Each setting has one canonical environment name (`GATEHOUSE_*`), optional
 * aliases (the names hadrontool-mcp used, so the conduit is a drop-in), and a
 * `--flag`. Precedence: flag > canonical env > alias env > default. Values are
 * validated once; the result is frozen and passed down, never re-read.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { GatehouseError } from './errors.js';

const MB = 1024 * 1024;

/** `"true"`/`"1"`/`"yes"` and their opposites; anything else is an error. */
const boolish = z.union([z.boolean(), z.string()]).transform((value, ctx) => {
  if (typeof value === 'boolean') return value;
  const v = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off', ''].includes(v)) return false;
  ctx.addIssue({ code: 'custom', message: `expected true or false, got "${value}"` });
  return z.NEVER;
});

const positiveInt = (max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(1).max(max);

/** Byte sizes as a number or with a unit: `2mb`, `512kb`, `16MB`, `1048576`. */
export function parseByteSize(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) && value > 0 ? value : undefined;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
  if (!match) return undefined;
  const units: Record<string, number> = { b: 1, kb: 1024, mb: MB, gb: 1024 * MB };
  const bytes = Math.floor(Number(match[1]) * (units[(match[2] ?? 'b').toLowerCase()] ?? 1));
  return bytes > 0 ? bytes : undefined;
}

const byteSize = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const bytes = parseByteSize(value);
  if (bytes === undefined) {
    ctx.addIssue({ code: 'custom', message: `expected a size such as 2mb or 1048576, got "${value}"` });
    return z.NEVER;
  }
  return bytes;
});

const hostSchema = z
  .string()
  .min(1)
  .refine((h) => isIP(h) !== 0 || /^[A-Za-z0-9.-]+$/.test(h), 'expected an IP address or host name');

const addressList = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean),
  )
  .refine((list) => list.every((a) => isIP(a) !== 0), 'expected a comma-separated list of IP addresses');

/**
 * Why one entry of `GATEHOUSE_TRUST_PROXY` is refused, or undefined when it is an IP address or a CIDR range
 * (`10.0.0.0/8`, `fd00::/8`) as Fastify's `proxy-addr` reads them. "Every peer" is never accepted — not
 * `true`, not a hop count, not a `/0` — since then any client could name its own address.
 */
function trustedProxyProblem(entry: string): string | undefined {
  if (/^(true|yes|on|all|\*|\d+)$/i.test(entry)) {
    return `"${entry}" is not accepted: trusting every peer (or a hop count) lets any client forge its address; name the balancer's addresses or ranges`;
  }
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const version = isIP(address);
  if (version === 0) return `"${entry}" is not an IP address or CIDR range (such as 10.0.0.5, 10.0.0.0/24 or fd00::/8)`;
  if (slash === -1) return undefined;
  const prefix = entry.slice(slash + 1);
  const max = version === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) {
    return `"${entry}" has a bad prefix length (expected /1 to /${max})`;
  }
  if (Number(prefix) === 0) return `"${entry}" would trust every address; name the balancer's addresses or ranges`;
  return undefined;
}

const trustedProxies = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean),
  )
  .superRefine((list, ctx) => {
    for (const entry of list) {
      const problem = trustedProxyProblem(entry);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }
  });

interface SettingDef {
  /** Canonical environment variable. */
  env: string;
  /** Older or drop-in names, read when the canonical one is unset. */
  aliases?: readonly string[];
  /** Command-line flag without the leading dashes. */
  flag: string;
  schema: z.ZodType;
  default?: unknown;
  description: string;
}

export const SETTINGS = {
  host: {
    env: 'GATEHOUSE_HOST',
    aliases: ['HOST'],
    flag: 'host',
    schema: hostSchema,
    default: '127.0.0.1',
    description: 'Address to bind. Loopback by default; a non-loopback bind needs a token.',
  },
  port: {
    env: 'GATEHOUSE_PORT',
    aliases: ['PORT'],
    flag: 'port',
    schema: z.coerce.number().int().min(0).max(65535),
    default: 8080,
    description: 'Port to listen on (0 picks a free one).',
  },
  toolToken: {
    env: 'GATEHOUSE_TOOL_TOKEN',
    aliases: ['MCP_TOOL_TOKEN'],
    flag: 'tool-token',
    schema: z.string().min(16, 'must be at least 16 characters'),
    description: 'Conduit bearer token for /ops/* and /info. Required when NODE_ENV=production.',
  },
  stdioGraceMs: {
    env: 'GATEHOUSE_STDIO_GRACE_MS',
    flag: 'stdio-grace-ms',
    schema: z.coerce.number().int().min(0).max(600_000),
    default: 5000,
    description: 'Grace between SIGTERM and SIGKILL of a stdio server process group when it is stopped.',
  },
  stdioMaxLineBytes: {
    env: 'GATEHOUSE_STDIO_MAX_LINE_BYTES',
    flag: 'stdio-max-line-bytes',
    schema: byteSize,
    default: 10 * MB,
    description: 'Longest stdout line (one JSON-RPC message) a stdio server may write; a longer one ends it.',
  },
  stdioRestartBaseMs: {
    env: 'GATEHOUSE_STDIO_RESTART_BASE_MS',
    flag: 'stdio-restart-base-ms',
    schema: positiveInt(600_000),
    default: 1000,
    description: 'First delay before a crashed stdio server is restarted; doubled per crash, at most 60 s.',
  },
  stdioMaxRestarts: {
    env: 'GATEHOUSE_STDIO_MAX_RESTARTS',
    flag: 'stdio-max-restarts',
    schema: z.coerce.number().int().min(0).max(1000),
    default: 5,
    description: 'Crashes in a row after which a stdio server is left stopped with status failed.',
  },
  listTimeoutMs: {
    env: 'GATEHOUSE_LIST_TIMEOUT_MS',
    aliases: ['MCP_LIST_TIMEOUT_MS'],
    flag: 'list-timeout-ms',
    schema: positiveInt(600_000),
    default: 25_000,
    description: 'Deadline for an upstream tools/list, connect included.',
  },
  callTimeoutMs: {
    env: 'GATEHOUSE_CALL_TIMEOUT_MS',
    aliases: ['MCP_CALL_TIMEOUT_MS'],
    flag: 'call-timeout-ms',
    schema: positiveInt(3_600_000),
    default: 55_000,
    description: 'Deadline for an upstream tools/call, connect included.',
  },
  allowPrivateNetworks: {
    env: 'GATEHOUSE_ALLOW_PRIVATE_NETWORKS',
    aliases: ['MCP_ALLOW_PRIVATE_NETWORKS'],
    flag: 'allow-private-networks',
    schema: boolish,
    default: false,
    description: 'Disable the egress guard entirely (development only).',
  },
  allowHttp: {
    env: 'GATEHOUSE_ALLOW_HTTP',
    aliases: ['MCP_ALLOW_HTTP'],
    flag: 'allow-http',
    schema: boolish,
    default: false,
    description: 'Allow plain http:// to public upstream addresses.',
  },
  maxBodySize: {
    env: 'GATEHOUSE_MAX_BODY_SIZE',
    aliases: ['MAX_BODY_SIZE'],
    flag: 'max-body-size',
    schema: byteSize,
    default: '2mb',
    description: 'Largest accepted request body; larger bodies get 413 before parsing.',
  },
  maxResponseSize: {
    env: 'GATEHOUSE_MAX_RESPONSE_SIZE',
    aliases: ['MCP_MAX_RESPONSE_SIZE'],
    flag: 'max-response-size',
    schema: byteSize,
    default: '16mb',
    description: 'Cap on the raw bytes of one upstream response, enforced while it streams.',
  },
  sessionMode: {
    env: 'GATEHOUSE_SESSION_MODE',
    aliases: ['MCP_SESSION_MODE'],
    flag: 'session-mode',
    schema: z.enum(['pooled', 'fresh']),
    default: 'pooled',
    description: 'pooled: reuse one upstream connection per (url, headers); fresh: connect, call, close.',
  },
  poolMaxSize: {
    env: 'GATEHOUSE_POOL_MAX_SIZE',
    flag: 'pool-max-size',
    schema: positiveInt(10_000),
    default: 256,
    description: 'Most pooled upstream connections kept open at once (least recently used goes first).',
  },
  poolIdleMs: {
    env: 'GATEHOUSE_POOL_IDLE_MS',
    flag: 'pool-idle-ms',
    schema: positiveInt(86_400_000),
    default: 300_000,
    description: 'A pooled upstream connection unused this long is closed.',
  },
  logLevel: {
    env: 'GATEHOUSE_LOG_LEVEL',
    aliases: ['LOG_LEVEL'],
    flag: 'log-level',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    default: 'info',
    description: 'Log verbosity (pino levels).',
  },
  dataDir: {
    env: 'GATEHOUSE_DATA_DIR',
    flag: 'data-dir',
    schema: z.string().min(1),
    default: './.gatehouse',
    description: 'Folder for the embedded SQLite store and the secret key file.',
  },
  databaseUrl: {
    env: 'GATEHOUSE_DATABASE_URL',
    flag: 'database-url',
    schema: z.string().regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL'),
    description: 'PostgreSQL instead of SQLite; replicas sharing one database share one state.',
  },
  secretKey: {
    env: 'GATEHOUSE_SECRET_KEY',
    flag: 'secret-key',
    schema: z
      .string()
      .refine(
        (k) => /^[0-9a-f]{64}$/i.test(k) || Buffer.from(k, 'base64').length === 32,
        'expected 32 bytes as 64 hex or base64',
      ),
    description: 'Key sealing upstream secrets (32 bytes, hex or base64). Required with PostgreSQL.',
  },
  secretKeyPrevious: {
    env: 'GATEHOUSE_SECRET_KEY_PREVIOUS',
    flag: 'secret-key-previous',
    schema: z.string().refine(
      (list) =>
        list
          .split(',')
          .map((k) => k.trim())
          .every((k) => /^[0-9a-f]{64}$/i.test(k) || Buffer.from(k, 'base64').length === 32),
      'expected a comma-separated list of 32-byte keys (64 hex or base64)',
    ),
    description:
      'After a rotation: the older secret keys (comma-separated), which open what they sealed and never seal, until `gatehouse secrets rotate` has re-sealed everything with GATEHOUSE_SECRET_KEY.',
  },
  adminToken: {
    env: 'GATEHOUSE_ADMIN_TOKEN',
    flag: 'admin-token',
    schema: z.string().min(24, 'must be at least 24 characters'),
    description: 'Bootstrap admin token to create on first start instead of a generated one.',
  },
  opsEnabled: {
    env: 'GATEHOUSE_OPS_ENABLED',
    flag: 'ops-enabled',
    schema: boolish,
    default: false,
    description: 'Mount the conduit routes (/ops/*) inside gatehouse serve, for ops tokens.',
  },
  catalog: {
    env: 'GATEHOUSE_CATALOG',
    flag: 'catalog',
    schema: z.string().min(1),
    description: 'A catalog JSON file to use instead of the bundled one.',
  },
  secretEnvPrefix: {
    env: 'GATEHOUSE_SECRET_ENV_PREFIX',
    flag: 'secret-env-prefix',
    schema: z
      .string()
      .regex(/^[A-Z][A-Z0-9_]*$/, 'expected an upper-case variable prefix')
      .refine((prefix) => !prefix.startsWith('GATEHOUSE_'), "must not name Gatehouse's own GATEHOUSE_* settings"),
    default: 'MCP_SECRET_',
    description: 'Env references ({"env": "NAME"}) may only name variables with this prefix.',
  },
  hubAuth: {
    env: 'GATEHOUSE_HUB_AUTH',
    flag: 'hub-auth',
    schema: z.enum(['token', 'none']),
    default: 'token',
    description: 'none: serve unauthenticated hub callers as the `local` client (refused unless bound to loopback).',
  },
  hubFastPath: {
    env: 'GATEHOUSE_HUB_FAST_PATH',
    flag: 'hub-fast-path',
    schema: boolish,
    default: true,
    description:
      'Serve plain hub tools/call (both eras) and tools/list (2026-07-28) without an SDK server per request, and send plain upstream calls (from the hub and the conduit) without the SDK client (same answers; a quick call in a 2025-era session comes as JSON rather than a one-event stream; off: everything through the SDK).',
  },
  approvalTtlMs: {
    env: 'GATEHOUSE_APPROVAL_TTL_MS',
    flag: 'approval-ttl-ms',
    schema: positiveInt(7 * 24 * 60 * 60_000),
    default: 15 * 60_000,
    description: 'How long a gated call waits for a decision before its approval expires (at most 7 days).',
  },
  listWatch: {
    env: 'GATEHOUSE_LIST_WATCH',
    flag: 'list-watch',
    schema: boolish,
    default: true,
    description:
      'Keep a connection to every enabled, pinned HTTP server to hear it say its tools, prompts or resources changed (stdio servers are heard on their own connection), then refresh its lists in the background: changed tools are quarantined and agents told (off: lists change only when an operator tests the server).',
  },
  allowedOrigins: {
    env: 'GATEHOUSE_ALLOWED_ORIGINS',
    flag: 'allowed-origins',
    schema: z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((o) => o.trim())
          .filter(Boolean),
      )
      .refine((list) => list.every((o) => URL.canParse(o)), 'expected a comma-separated list of origins'),
    default: '',
    description: 'Browser origins allowed on the MCP endpoints (loopback origins are allowed while bound to loopback).',
  },
  allowedHosts: {
    env: 'GATEHOUSE_ALLOWED_HOSTS',
    flag: 'allowed-hosts',
    schema: z.string().transform((s) =>
      s
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean),
    ),
    default: '',
    description: 'Extra Host names accepted on the MCP endpoints while bound to loopback (DNS-rebinding defence).',
  },
  toolNameMax: {
    env: 'GATEHOUSE_TOOL_NAME_MAX',
    flag: 'tool-name-max',
    schema: z.coerce.number().int().min(32).max(256),
    default: 64,
    description: 'Longest aggregated tool name (<server>__<tool>); longer ones are cut and given a short hash.',
  },
  testPublicAddresses: {
    env: 'GATEHOUSE_TEST_PUBLIC_ADDRESSES',
    flag: 'test-public-addresses',
    schema: addressList,
    default: '',
    description: 'Test seam, honoured only when NODE_ENV=test: loopback addresses the egress guard treats as public.',
  },
  llmUrl: {
    env: 'GATEHOUSE_LLM_URL',
    flag: 'llm-url',
    schema: z
      .string()
      .url()
      .regex(/^https?:\/\//, 'expected an http(s):// URL'),
    description: 'OpenAI-compatible chat endpoint base (e.g. https://host/v1) for memory extraction and reflect.',
  },
  llmModel: {
    env: 'GATEHOUSE_LLM_MODEL',
    flag: 'llm-model',
    schema: z.string().min(1).max(200),
    default: 'gpt-4o-mini',
    description: 'Model name sent to the language-model endpoint.',
  },
  llmKey: {
    env: 'GATEHOUSE_LLM_KEY',
    flag: 'llm-key',
    schema: z.string().min(1),
    description: 'Bearer key for the language-model endpoint; sealed in memory, never logged or returned.',
  },
  llmTimeoutMs: {
    env: 'GATEHOUSE_LLM_TIMEOUT_MS',
    flag: 'llm-timeout-ms',
    schema: positiveInt(600_000),
    default: 60_000,
    description: 'Deadline for one language-model call.',
  },
  llmPrivateNetwork: {
    env: 'GATEHOUSE_LLM_PRIVATE_NETWORK',
    flag: 'llm-private-network',
    schema: boolish,
    default: false,
    description: 'Allow the language-model endpoint on a private or loopback address (a local model server).',
  },
  searchEmbeddings: {
    env: 'GATEHOUSE_SEARCH_EMBEDDINGS',
    flag: 'search-embeddings',
    schema: z.enum(['off', 'on']),
    default: 'off',
    description:
      "Search mode ranks with BM25 and the language-model endpoint's embeddings (needs GATEHOUSE_LLM_URL); any failure falls back to BM25.",
  },
  embeddingsModel: {
    env: 'GATEHOUSE_EMBEDDINGS_MODEL',
    flag: 'embeddings-model',
    schema: z.string().min(1).max(200),
    default: 'text-embedding-3-small',
    description: 'Embeddings model sent to the language-model endpoint (POST {GATEHOUSE_LLM_URL}/embeddings).',
  },
  embeddingsTimeoutMs: {
    env: 'GATEHOUSE_EMBEDDINGS_TIMEOUT_MS',
    flag: 'embeddings-timeout-ms',
    schema: positiveInt(60_000),
    default: 1_500,
    description: "Deadline for embedding a search's query; past it that search ranks with BM25 alone.",
  },
  embeddingsMinSimilarity: {
    env: 'GATEHOUSE_EMBEDDINGS_MIN_SIMILARITY',
    flag: 'embeddings-min-similarity',
    schema: z.coerce.number().min(-1).max(1),
    default: 0.25,
    description: 'Least cosine similarity for a tool to be found by meaning alone (with no query word in common).',
  },
  drainS: {
    env: 'GATEHOUSE_DRAIN_S',
    flag: 'drain-s',
    schema: z.coerce.number().int().min(0).max(3_600),
    default: 10,
    description:
      'On SIGTERM/SIGINT: answer /readyz 503 and keep serving calls in flight, open streams and what the balancer still sends for this many seconds, then close (0: close at once).',
  },
  listPageSize: {
    env: 'GATEHOUSE_LIST_PAGE_SIZE',
    flag: 'list-page-size',
    schema: positiveInt(10_000),
    default: 500,
    description:
      'Most tools, prompts or resources in one page of a hub list (tools/list, prompts/list, resources/list); longer lists are paged with a stable cursor.',
  },
  requestTimeoutMs: {
    env: 'GATEHOUSE_REQUEST_TIMEOUT_MS',
    flag: 'request-timeout-ms',
    schema: positiveInt(3_600_000),
    default: 30_000,
    description: 'Longest time a client may take to send one whole request (headers and body); then 408.',
  },
  headersTimeoutMs: {
    env: 'GATEHOUSE_HEADERS_TIMEOUT_MS',
    flag: 'headers-timeout-ms',
    schema: positiveInt(3_600_000),
    default: 10_000,
    description: 'Longest time a client may take to send a request’s headers (at most the request timeout).',
  },
  stdioSandbox: {
    env: 'GATEHOUSE_STDIO_SANDBOX',
    flag: 'stdio-sandbox',
    schema: z.enum(['on', 'off']),
    default: 'on',
    description:
      'Run every stdio server in a bubblewrap sandbox (Linux). on: a stdio server does not start where bwrap is missing; off: children run unsandboxed, as the gateway.',
  },
  stdioSandboxUidBase: {
    env: 'GATEHOUSE_STDIO_SANDBOX_UID_BASE',
    flag: 'stdio-sandbox-uid-base',
    schema: z.coerce.number().int().min(1000).max(2_000_000_000),
    default: 200_000,
    description:
      'When the gateway runs as root: each sandboxed stdio server runs as uid and gid base + its slot (numeric, no /etc/passwd entry).',
  },
  publicUrl: {
    env: 'GATEHOUSE_PUBLIC_URL',
    flag: 'public-url',
    schema: z
      .string()
      .url()
      .refine((v) => /^https?:$/.test(new URL(v).protocol), 'must be an http(s) URL')
      .refine((v) => !new URL(v).search && !new URL(v).hash, 'must have no query or fragment')
      .transform((v) => v.replace(/\/+$/, '')),
    description:
      'The address clients use to reach Gatehouse (behind a balancer it differs from the bind address): the OAuth issuer, metadata URLs, redirects and Gatehouse’s own client metadata document derive from it. Default: http://<host>:<port> of the bind address.',
  },
  trustProxy: {
    env: 'GATEHOUSE_TRUST_PROXY',
    flag: 'trust-proxy',
    schema: trustedProxies,
    default: '',
    description:
      'Proxies (balancers) whose X-Forwarded-For names the client, comma-separated IP addresses or CIDR ranges: a request from one of them counts as from the right-most address in that header not in this list (per-address limits key on it). Empty: no proxy is trusted and every request is its peer’s.',
  },
  oauthAuthorizeRateLimit: {
    env: 'GATEHOUSE_OAUTH_AUTHORIZE_RATE_LIMIT',
    flag: 'oauth-authorize-rate-limit',
    schema: positiveInt(100_000),
    default: 120,
    description: 'Requests per minute per client address to GET /authorize (the consent page); its own allowance.',
  },
  oauthTokenRateLimit: {
    env: 'GATEHOUSE_OAUTH_TOKEN_RATE_LIMIT',
    flag: 'oauth-token-rate-limit',
    schema: positiveInt(100_000),
    default: 120,
    description: 'Requests per minute per client address to POST /token; its own allowance.',
  },
  oauthRevokeRateLimit: {
    env: 'GATEHOUSE_OAUTH_REVOKE_RATE_LIMIT',
    flag: 'oauth-revoke-rate-limit',
    schema: positiveInt(100_000),
    default: 120,
    description: 'Requests per minute per client address to POST /revoke; its own allowance, apart from /token.',
  },
  oidcIssuer: {
    env: 'GATEHOUSE_OIDC_ISSUER',
    flag: 'oidc-issuer',
    schema: z
      .string()
      .url()
      .refine((v) => /^https?:$/.test(new URL(v).protocol), 'must be an http(s) URL')
      .transform((v) => v.replace(/\/+$/, '')),
    description:
      'An OpenID Connect provider people sign in to the dashboard with (authorization code + PKCE); its discovery document is read from <issuer>/.well-known/openid-configuration.',
  },
  oidcClientId: {
    env: 'GATEHOUSE_OIDC_CLIENT_ID',
    flag: 'oidc-client-id',
    schema: z.string().min(1).max(500),
    description:
      'The client id Gatehouse is registered with at the OIDC provider (redirect URI <public URL>/auth/oidc/callback).',
  },
  oidcClientSecret: {
    env: 'GATEHOUSE_OIDC_CLIENT_SECRET',
    flag: 'oidc-client-secret',
    schema: z.string().min(1).max(2000),
    description:
      'The client secret at the OIDC provider; never logged or returned. Unset: a public client (PKCE only).',
  },
  oidcRoleMap: {
    env: 'GATEHOUSE_OIDC_ROLE_MAP',
    flag: 'oidc-role-map',
    schema: z
      .string()
      .transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: 'must be JSON' });
          return z.NEVER;
        }
      })
      .pipe(
        z.record(
          z.string().min(1).max(200),
          z.strictObject({
            role: z.enum(['admin', 'operator', 'member']).optional(),
            groups: z
              .array(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/))
              .max(64)
              .optional(),
          }),
        ),
      ),
    default: '{}',
    description:
      'Provider groups → Gatehouse role and groups, JSON: {"idp-admins": {"role": "admin"}, "eng": {"groups": ["eng"]}}. The highest mapped role wins (default member); applied at every sign-in.',
  },
  oidcGroupsClaim: {
    env: 'GATEHOUSE_OIDC_GROUPS_CLAIM',
    flag: 'oidc-groups-claim',
    schema: z.string().min(1).max(100),
    default: 'groups',
    description: 'The ID token claim that lists the user’s groups at the provider.',
  },
  oidcPrivateNetwork: {
    env: 'GATEHOUSE_OIDC_PRIVATE_NETWORK',
    flag: 'oidc-private-network',
    schema: boolish,
    default: false,
    description: 'Allow the OIDC provider on a private or loopback address (an identity provider inside the network).',
  },
  stdioInstallTimeoutMs: {
    env: 'GATEHOUSE_STDIO_INSTALL_TIMEOUT_MS',
    flag: 'stdio-install-timeout-ms',
    schema: positiveInt(3_600_000),
    default: 180_000,
    description:
      'Deadline of a stdio server’s first start (or test) before it has ever connected, when npx/uvx may be downloading its package; later starts use GATEHOUSE_LIST_TIMEOUT_MS. Runtime state: installing.',
  },
} as const satisfies Record<string, SettingDef>;

export type SettingKey = keyof typeof SETTINGS;

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly toolToken: string | undefined;
  readonly stdioGraceMs: number;
  readonly stdioMaxLineBytes: number;
  readonly stdioRestartBaseMs: number;
  readonly stdioMaxRestarts: number;
  readonly listTimeoutMs: number;
  readonly callTimeoutMs: number;
  readonly allowPrivateNetworks: boolean;
  readonly allowHttp: boolean;
  readonly maxBodySize: number;
  readonly maxResponseSize: number;
  readonly sessionMode: 'pooled' | 'fresh';
  readonly poolMaxSize: number;
  readonly poolIdleMs: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly secretKey: string | undefined;
  readonly secretKeyPrevious: string | undefined;
  readonly adminToken: string | undefined;
  readonly opsEnabled: boolean;
  readonly catalog: string | undefined;
  readonly secretEnvPrefix: string;
  readonly hubAuth: 'token' | 'none';
  readonly hubFastPath: boolean;
  readonly listWatch: boolean;
  readonly approvalTtlMs: number;
  readonly allowedOrigins: readonly string[];
  readonly allowedHosts: readonly string[];
  readonly toolNameMax: number;
  readonly testPublicAddresses: readonly string[];
  readonly llmUrl: string | undefined;
  readonly llmModel: string;
  readonly llmKey: string | undefined;
  readonly llmTimeoutMs: number;
  readonly llmPrivateNetwork: boolean;
  readonly searchEmbeddings: 'off' | 'on';
  readonly embeddingsModel: string;
  readonly embeddingsTimeoutMs: number;
  readonly embeddingsMinSimilarity: number;
  readonly drainS: number;
  readonly publicUrl: string | undefined;
  readonly listPageSize: number;
  readonly requestTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly stdioSandbox: 'on' | 'off';
  readonly stdioSandboxUidBase: number;
  readonly stdioInstallTimeoutMs: number;
  readonly nodeEnv: string;
  readonly trustProxy: readonly string[];
  readonly oauthAuthorizeRateLimit: number;
  readonly oauthTokenRateLimit: number;
  readonly oauthRevokeRateLimit: number;
  readonly oidcIssuer: string | undefined;
  readonly oidcClientId: string | undefined;
  readonly oidcClientSecret: string | undefined;
  readonly oidcRoleMap: Readonly<Record<string, { role?: 'admin' | 'operator' | 'member'; groups?: string[] }>>;
  readonly oidcGroupsClaim: string;
  readonly oidcPrivateNetwork: boolean;
}

/** Names that used to exist or that people guess; each points at the right one. */
const RENAMED: Record<string, string> = {
  GATEHOUSE_TOKEN_CONDUIT: 'GATEHOUSE_TOOL_TOKEN',
  GATEHOUSE_BIND: 'GATEHOUSE_HOST',
  GATEHOUSE_LISTEN_PORT: 'GATEHOUSE_PORT',
  GATEHOUSE_ALLOW_PRIVATE: 'GATEHOUSE_ALLOW_PRIVATE_NETWORKS',
  GATEHOUSE_BODY_LIMIT: 'GATEHOUSE_MAX_BODY_SIZE',
};

/**
 * `GATEHOUSE_*` variables read by other parts of Gatehouse (the CLI client, later
 * issues' settings) and so not unknown here.
 */
const OTHER_KNOWN_ENV = new Set(['GATEHOUSE_URL', 'GATEHOUSE_TOKEN', 'GATEHOUSE_CLI_TOKEN']);

function closest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const score = editDistance(name, candidate);
    if (score < bestScore) {
      bestScore = score;
      best = candidate;
    }
  }
  return bestScore <= Math.max(3, Math.floor(name.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j] as number;
      row[j] = Math.min((row[j] as number) + 1, (row[j - 1] as number) + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length] as number;
}

export interface ConfigSources {
  env?: Record<string, string | undefined>;
  /** Parsed flags keyed by setting key (camelCase) or flag name. */
  flags?: Record<string, unknown>;
}

/** Reads, validates and freezes the configuration. Throws `validation_error` naming every bad setting. */
export function loadConfig(sources: ConfigSources = {}): Config {
  const env = sources.env ?? process.env;
  const flags = sources.flags ?? {};
  const problems: string[] = [];

  const canonical = Object.values(SETTINGS).map((s) => s.env as string);
  for (const name of Object.keys(env)) {
    if (!name.startsWith('GATEHOUSE_') || canonical.includes(name) || OTHER_KNOWN_ENV.has(name)) continue;
    const hint = RENAMED[name] ?? closest(name, canonical);
    problems.push(`${name} is not a Gatehouse setting${hint ? `; did you mean ${hint}?` : ''}`);
  }

  const values: Record<string, unknown> = {};
  for (const [key, def] of Object.entries(SETTINGS) as [SettingKey, SettingDef][]) {
    let raw: unknown;
    let source: string | undefined;
    const flagValue = flags[key] ?? flags[def.flag];
    if (flagValue !== undefined) {
      raw = flagValue;
      source = `--${def.flag}`;
    } else if (env[def.env] !== undefined && env[def.env] !== '') {
      raw = env[def.env];
      source = def.env;
    } else {
      for (const alias of def.aliases ?? []) {
        if (env[alias] !== undefined && env[alias] !== '') {
          raw = env[alias];
          source = alias;
          break;
        }
      }
    }
    if (raw === undefined) raw = def.default;
    if (raw === undefined) {
      values[key] = undefined;
      continue;
    }
    const parsed = def.schema.safeParse(raw);
    if (parsed.success) values[key] = parsed.data;
    else problems.push(`${source ?? key}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  }

  const nodeEnv = env.NODE_ENV ?? 'development';
  if (nodeEnv !== 'test' && Array.isArray(values.testPublicAddresses) && values.testPublicAddresses.length > 0) {
    problems.push('GATEHOUSE_TEST_PUBLIC_ADDRESSES is a test seam and is refused unless NODE_ENV=test');
  }

  if (values.searchEmbeddings === 'on' && values.llmUrl === undefined) {
    problems.push('GATEHOUSE_SEARCH_EMBEDDINGS=on needs GATEHOUSE_LLM_URL (the endpoint that computes the embeddings)');
  }

  if (problems.length > 0) {
    throw new GatehouseError('validation_error', `Invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      issues: problems.map((message) => ({ path: 'config', message })),
    });
  }
  return Object.freeze({ ...values, nodeEnv }) as unknown as Config;
}

/** True for addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * The address clients use to reach this gateway, without a trailing slash:
 * `GATEHOUSE_PUBLIC_URL` when set, else the bind address (a wildcard bind is
 * named as loopback, which is only right on this machine). `port` is the port
 * actually bound (it differs from the setting when that is 0).
 */
export function publicBaseUrl(config: Pick<Config, 'publicUrl' | 'host'>, port: number): string {
  if (config.publicUrl) return config.publicUrl;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
