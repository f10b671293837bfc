/**
 * The dashboard's only way to the gateway: its REST API, with the signed-in token as a bearer header.
 * The token lives in sessionStorage (this tab, until it closes) and never in a URL; the event stream
 * is read with fetch and a stream reader, because EventSource cannot send an Authorization header.
 */

const TOKEN_KEY = 'gatehouse.token';
/** Dispatched on `window` when the stored token is refused (401). */
export const UNAUTHORIZED_EVENT = 'gatehouse:unauthorized';

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
  /** A 404 from the router itself (the route does not exist here), not a missing resource. */
  get noSuchRoute(): boolean {
    return this.status === 404 && this.code === 'not_found' && this.message.startsWith('No route');
  }
}

interface ErrorBody {
  error?: { code?: string; message?: string; issues?: { path: string; message: string }[] };
}

function describe(status: number, body: ErrorBody | undefined): ApiError {
  const error = body?.error;
  const code = error?.code ?? `http_${status}`;
  let message = error?.message ?? `The gateway answered ${status}.`;
  if (error?.issues?.length) message += ` ${error.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`;
  return new ApiError(status, code, message);
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  /** Overrides the stored token (sign-in tries a token before keeping it). */
  token?: string;
  signal?: AbortSignal;
}

/** The session's CSRF token (double submit): the dashboard echoes it on every request it makes by cookie. */
export function csrfToken(): string | null {
  const match = /(?:^|;\s*)gatehouse_csrf=([^;]+)/.exec(document.cookie);
  return match?.[1] ?? null;
}

/** Without a stored token the dashboard is signed in by its session cookie (token or OIDC sign-in). */
function authHeaders(token: string | null): Record<string, string> {
  if (token) return { authorization: `Bearer ${token}` };
  const csrf = csrfToken();
  return csrf ? { 'x-gatehouse-csrf': csrf } : {};
}

export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const token = options.token ?? storedToken();
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders(token) };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, {
      method: options.method ?? 'GET',
      headers,
      body: options.body === undefined ? null : JSON.stringify(options.body),
      cache: 'no-store',
      credentials: 'same-origin',
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiError(0, 'network_error', 'The gateway could not be reached. Is `gatehouse serve` running?');
  }
  const text = await response.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!response.ok) {
    // A token revoked or expired mid-session: the app signs out and says why.
    if (response.status === 401 && !options.token) window.dispatchEvent(new Event(UNAUTHORIZED_EVENT));
    throw describe(response.status, data as ErrorBody | undefined);
  }
  return data as T;
}

export const enc = encodeURIComponent;

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

// ---------------------------------------------------------------------------------------------------------------
// Shapes the REST API answers (only the fields the dashboard reads).

export type Capability = 'ops' | 'registry' | 'hub' | 'admin' | 'memory';
export interface Info {
  name: string;
  version: string;
  operations: string[];
  transports: string[];
  capabilities: Capability[];
}
export interface AuthContext {
  id: string;
  name: string;
  role: 'admin' | 'operator' | 'agent' | 'ops' | 'member';
}

export type ShownValue = { set: true } | { env: string };
export type Tier = 'allow' | 'gated' | 'blocked';
export interface ToolPolicy {
  mode: 'all' | 'include' | 'exclude';
  include: string[];
  exclude: string[];
  allow: string[];
  gated: string[];
  blocked: string[];
  defaultTier: Tier;
}
export interface ServerView {
  id: string;
  name: string;
  description: string | null;
  transport: 'streamable-http' | 'sse' | 'stdio';
  url: string | null;
  command: string | null;
  args: string[];
  headers: Record<string, ShownValue>;
  env: Record<string, ShownValue>;
  auth:
    | { type: 'none' }
    | { type: 'bearer'; token: ShownValue }
    | {
        type: 'oauth';
        mode: 'shared' | 'per-user';
        grant: 'authorization_code' | 'client_credentials';
        clientId?: string;
        clientSecret?: ShownValue;
        scopes?: string[];
        /** The only authorization server its grants (and client secret) go to: that server's metadata `issuer`. */
        issuer?: string;
      };
  enabled: boolean;
  privateNetwork: boolean;
  trustNewTools: boolean;
  exposure: string[];
  toolPolicy: ToolPolicy;
  status: 'connected' | 'failed' | 'unknown';
  state?: string;
  lastError: string | null;
  lastTestedAt: string | null;
  latencyMs: number | null;
  discoveredToolsCount: number;
  sourceKind: string;
  envRequired?: string[];
  /** stdio: whether its child runs (or would run) in the bubblewrap sandbox. */
  sandboxed?: boolean;
  /** stdio: the record's sandbox settings (absent: on, network host). */
  sandbox?: { mode?: 'on' | 'off'; network?: 'host' | 'none'; readOnlyPaths?: string[] };
}
/** `GET /api/mcp/servers/{id}/process`: a stdio server's child. */
export interface ProcessView {
  state: string;
  pid: number | null;
  sandboxed: boolean;
  sandbox: {
    network: 'host' | 'none';
    uid: number | null;
    cwd: string;
    limits: { dataBytes: number; openFiles: number; processes: number | null };
  } | null;
  lastError: string | null;
}
export interface DiscoveredTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
}
export interface DiffEntry {
  path: string;
  change: 'added' | 'removed' | 'changed';
  before?: unknown;
  after?: unknown;
}
export interface HiddenContentFlag {
  path: string;
  in: 'value' | 'key';
  kind: string;
  index: number;
  match: string;
  count: number;
}
export interface Pin {
  /** What is pinned: a tool or a prompt (later a resource). */
  kind?: 'tool' | 'prompt' | 'resource';
  tool: string;
  state: 'pinned' | 'quarantined';
  reason: 'changed' | 'new' | 'schema_too_large' | 'unsafe_schema' | 'duplicate' | null;
  pinHash: string | null;
  pendingHash: string | null;
  definition: { description?: string } | null;
  pendingDefinition: { description?: string } | null;
  diff?: DiffEntry[] | null;
  flags?: HiddenContentFlag[];
  updatedAt: string;
}
export interface ServerDetail extends ServerView {
  discoveredTools: DiscoveredTool[];
  pins: Pin[];
}
export interface TestResult {
  ok: boolean;
  latencyMs: number;
  discoveredToolsCount: number;
  verdicts: Record<string, string>;
  error: { code: string; message: string } | null;
}
export interface ServerEvent {
  id: number;
  kind: string;
  message: string;
  at: string;
}
export interface CatalogItem {
  name: string;
  id?: string;
  title: string;
  description: string;
  category: string;
  transport: 'streamable-http' | 'sse' | 'stdio';
  command?: string;
  args?: string[];
  url?: string;
  envRequired: string[];
  /** Extra arguments it needs after `args`, in words. */
  argsRequired?: string;
  homepage?: string;
  /** Whether a server was installed from it, and under which id. */
  installed?: boolean;
  installedAs?: string;
}
export interface Approval {
  id: string;
  surface: 'hub' | 'admin';
  status: string;
  requester: { id: string; name: string };
  serverId: string | null;
  tool: string;
  exposedName: string;
  arguments: Record<string, unknown>;
  detail: { title?: string; description?: string; [fact: string]: unknown };
  createdAt: string;
  expiresAt: string;
  decidedAt: string | null;
  decidedBy: { id: string; name: string | null } | null;
  reason: string | null;
  /** The trace id of the call that asked (tracing on); its approved execution continues that trace. */
  traceId?: string | null;
}
export interface AuditEvent {
  id: number;
  at: string;
  kind: string;
  action: string;
  actorId: string | null;
  actorName: string | null;
  userId?: string | null;
  userName?: string | null;
  serverId: string | null;
  tool: string | null;
  verdict: string | null;
  outcome: string | null;
  latencyMs: number | null;
  traceId?: string | null;
}
export interface TokenView {
  id: string;
  name: string;
  role: string;
  groups: string[];
  /** What /mcp lists to this agent; null: the platform setting `hub.toolView`. */
  toolView?: string | null;
  source: string;
  createdAt: string;
  lastUsedAt: string | null;
}
/** An OAuth grant (`GET /api/oauth/grants`): an app a person let in. */
export interface OAuthGrant {
  id: string;
  clientName: string;
  resource: string;
  groups: string[];
  createdAt: string;
  lastUsedAt: string | null;
}
export type SettingsMap = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------------------------
// The live event stream: `GET /api/mcp/stream` read with fetch, resumed with Last-Event-ID.

export interface LiveEvent {
  id: number;
  type: string;
  data: Record<string, unknown>;
}

export type StreamState = 'connecting' | 'live' | 'reconnecting';

/**
 * The gateway writes a keep-alive comment every 15 s: a stream silent for longer than this is dead (a gateway
 * that went away without closing the connection), and the badge must stop saying "live".
 */
export const STREAM_SILENCE_MS = 40_000;

/** Parses one SSE frame (`id:`, `event:`, `data:` lines); comments and heartbeats yield nothing. */
export function parseFrame(frame: string): LiveEvent | undefined {
  let id: number | undefined;
  let type = 'message';
  const data: string[] = [];
  for (const line of frame.split('\n')) {
    if (line.startsWith(':') || line === '') continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id' && /^\d+$/.test(value)) id = Number(value);
    else if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0 || id === undefined) return undefined;
  try {
    return { id, type, data: JSON.parse(data.join('\n')) as Record<string, unknown> };
  } catch {
    return undefined;
  }
}

export function openEventStream(
  onEvent: (event: LiveEvent) => void,
  onState: (state: StreamState) => void,
): () => void {
  const controller = new AbortController();
  let stopped = false;
  let lastId: number | undefined;
  const run = async () => {
    while (!stopped) {
      const attempt = new AbortController();
      const abortAttempt = () => attempt.abort();
      controller.signal.addEventListener('abort', abortAttempt);
      let silence: ReturnType<typeof setTimeout> | undefined;
      const heard = () => {
        clearTimeout(silence);
        silence = setTimeout(abortAttempt, STREAM_SILENCE_MS);
      };
      try {
        const headers: Record<string, string> = { accept: 'text/event-stream' };
        Object.assign(headers, authHeaders(storedToken()));
        if (lastId !== undefined) headers['last-event-id'] = String(lastId);
        const response = await fetch('/api/mcp/stream', {
          headers,
          cache: 'no-store',
          credentials: 'same-origin',
          signal: attempt.signal,
        });
        if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
        onState('live');
        heard();
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          heard();
          buffer = (buffer + value).replace(/\r\n?/g, '\n');
          let end = buffer.indexOf('\n\n');
          while (end !== -1) {
            const event = parseFrame(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
            if (event) {
              lastId = event.id;
              onEvent(event);
            }
            end = buffer.indexOf('\n\n');
          }
        }
      } catch {
        // Falls through to the reconnect below.
      } finally {
        clearTimeout(silence);
        controller.signal.removeEventListener('abort', abortAttempt);
      }
      if (stopped) return;
      onState('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  };
  onState('connecting');
  void run();
  return () => {
    stopped = true;
    controller.abort();
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The memory bank (`/api/memory/…`).

export type FactType = 'world' | 'experience';
export type UnitState = 'valid' | 'invalidated';
export interface MemoryUnit {
  id: string;
  text: string;
  context: string | null;
  fact_type: FactType;
  entities: string[];
  tags: string[];
  state: UnitState;
  dataset: string;
  source: string;
  document_id: string | null;
  timestamp: string;
  updated_at: string;
}
export interface MemorySearchResult {
  id: string;
  text: string;
  score: number;
  timestamp: string;
  dataset: string;
  tags: string[];
  source: string;
  fact_type: FactType;
}
export interface MemoryHistoryEntry {
  at: string;
  action: string;
  actor: { id: string; name: string | null } | null;
  before: unknown;
  after: unknown;
}
export interface MemoryStats {
  nodes: number;
  invalidated: number;
  documents: number;
  fact_types: Record<string, number>;
  datasets: Record<string, { valid: number; invalidated: number }>;
  directives: number;
  mental_models: number;
  operations: Record<string, number>;
}
export type OperationStatus = 'pending' | 'processing' | 'completed' | 'failed' | 'cancelled';
export interface MemoryOperation {
  id: string;
  kind: 'retain' | 'consolidation' | 'refresh';
  status: OperationStatus;
  dataset: string | null;
  target_id: string | null;
  requester: { id: string; name: string };
  attempts: number;
  error: { code: string; message: string } | null;
  created_at: string;
  finished_at: string | null;
  facts_extracted?: number;
  nothing_learned?: boolean;
  notice?: string;
  deduplicated?: number;
  document_fact_count?: number;
}
export interface Directive {
  id: string;
  name: string;
  content: string;
  priority: number;
  is_active: boolean;
  tags: string[];
  created_at: string;
  updated_at: string;
}
export interface MentalModel {
  id: string;
  name: string;
  tags: string[];
  stale: boolean;
  refreshed_at: string | null;
  content?: string | null;
  source_query?: string;
  max_tokens?: number;
}

/** What `GET /auth/session` answers: the cookie's session, and how one may sign in here. */
export interface SessionInfo {
  signedIn: boolean;
  principal?: {
    id: string;
    name: string;
    role: string;
    groups?: string[];
    user?: { id: string; name: string; role: string };
  };
  oidc: { issuer: string; start: string } | null;
}

/** A server's upstream OAuth state (`GET /api/mcp/servers/{id}/auth`): never a token. */
export interface UpstreamAuthView {
  mode: 'shared' | 'per-user';
  grant: 'authorization_code' | 'client_credentials';
  state: 'connected' | 'needs_reconnect' | 'not_connected';
  issuer: string | null;
  scopes: string[];
  expiresAt: string | null;
  lastError: string | null;
}
