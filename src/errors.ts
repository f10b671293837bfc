/**
 * The one catalogue of Gatehouse error codes.
 *
 * Every failure that crosses a boundary (REST, MCP surface, CLI) is a
 * `GatehouseError` with a code from this table. Codes are stable strings that
 * are never reused for another meaning; add new ones, never rename.
 *
 * - `status`: the HTTP status a REST route answers with.
 * - `mcp`: how an MCP surface reports it. `"result"` means a tool result with
 *   `isError: true` and `{"status":"error","error":{code,message}}` (a refusal
 *   the agent should read); a number is the JSON-RPC error code of a protocol
 *   error (e.g. -32602 for something the caller may not even see).
 * - `message`: the default human message; call sites may give a more precise one.
 */
export interface ErrorSpec {
  readonly status: number;
  readonly mcp: 'result' | number;
  readonly message: string;
}

const JSONRPC_INVALID_PARAMS = -32602;
const JSONRPC_INTERNAL = -32603;

export const ERROR_CATALOGUE = {
  // Input and identity
  validation_error: { status: 400, mcp: 'result', message: 'The request is invalid.' },
  unauthorized: { status: 401, mcp: JSONRPC_INVALID_PARAMS, message: 'A valid bearer token is required.' },
  forbidden: { status: 403, mcp: 'result', message: 'This token may not do that.' },
  not_found: { status: 404, mcp: JSONRPC_INVALID_PARAMS, message: 'No such resource.' },
  method_not_allowed: { status: 405, mcp: JSONRPC_INVALID_PARAMS, message: 'Method not allowed.' },
  payload_too_large: { status: 413, mcp: 'result', message: 'The request body is larger than the limit.' },
  unsupported_media_type: {
    status: 415,
    mcp: JSONRPC_INVALID_PARAMS,
    message: 'The request body must be application/json.',
  },
  rate_limited: { status: 429, mcp: 'result', message: 'Too many requests; retry later.' },

  // Egress guard
  private_network_blocked: {
    status: 400,
    mcp: 'result',
    message: 'The upstream address is on a private, loopback, link-local or otherwise non-public network.',
  },

  // Upstream MCP servers
  upstream_unreachable: { status: 502, mcp: 'result', message: 'The upstream MCP server could not be reached.' },
  upstream_protocol_error: {
    status: 502,
    mcp: 'result',
    message: 'The upstream MCP server answered with something that is not valid MCP.',
  },
  upstream_timeout: { status: 504, mcp: 'result', message: 'The upstream MCP server did not answer in time.' },

  // Server registry
  'mcp.not_found': { status: 404, mcp: 'result', message: 'No MCP server is installed with that id.' },
  'mcp.already_installed': { status: 409, mcp: 'result', message: 'An MCP server with that id is already installed.' },
  'mcp.tools_invalid': { status: 400, mcp: 'result', message: 'The tool policy is invalid.' },
  'mcp.manifest_invalid': { status: 400, mcp: 'result', message: 'The manifest is not a valid MCP server manifest.' },
  'mcp.spec_unsupported': { status: 400, mcp: 'result', message: 'That install spec is not supported.' },
  'mcp.preset_not_found': { status: 404, mcp: 'result', message: 'No catalog entry has that name.' },
  'mcp.secret_ref_refused': {
    status: 400,
    mcp: 'result',
    message: 'An env reference may only name variables with the configured secret prefix.',
  },
  conflict: { status: 409, mcp: 'result', message: 'The request conflicts with the current state.' },

  // stdio supervisor
  'stdio.not_stdio': { status: 409, mcp: 'result', message: 'Only stdio servers have a process to start or stop.' },
  'stdio.disabled': { status: 409, mcp: 'result', message: 'The server is disabled; enable it before starting it.' },
  'stdio.max_running': {
    status: 503,
    mcp: 'result',
    message: 'As many stdio servers are running as the setting stdio.maxRunning allows.',
  },

  // The hub: refusals an agent reads in a tool result
  'tool.blocked': { status: 403, mcp: 'result', message: 'This tool is blocked by policy.' },
  'tool.quarantined': {
    status: 403,
    mcp: 'result',
    message: 'This tool changed since it was approved (or is new) and waits for an operator to review it.',
  },
  'tool.invalid_arguments': {
    status: 400,
    mcp: 'result',
    message: "The arguments do not match the tool's input schema.",
  },
  'policy.path_escape': {
    status: 403,
    mcp: 'result',
    message: 'A path argument points outside the allowed workspace.',
  },
  /** An MCP Apps UI resource (`ui://`) whose content changed (or is new and unreviewed): a read is refused. */
  'resource.quarantined': {
    status: 403,
    mcp: JSONRPC_INVALID_PARAMS,
    message: 'This UI resource changed since it was approved and waits for an operator to review it.',
  },
  'hub.disabled': { status: 404, mcp: JSONRPC_INVALID_PARAMS, message: 'The hub is switched off.' },
  /** What a caller gets for a tool it may not see: exactly what a tool that does not exist gets. */
  unknown_tool: { status: 404, mcp: JSONRPC_INVALID_PARAMS, message: 'Unknown tool.' },
  'hub.request_state_mismatch': {
    status: 400,
    mcp: 'result',
    message: 'The requestState of this round belongs to a different call (token, tool or arguments).',
  },
  'hub.round_expired': {
    status: 409,
    mcp: 'result',
    message:
      'The upstream call this round continues is no longer held (its deadline passed, or the replica that held it is gone): call again without requestState.',
  },

  // The admin surface
  'mcp.invalid_arg': { status: 400, mcp: 'result', message: 'A path argument is not allowed.' },
  'mcp.missing_arg': { status: 400, mcp: 'result', message: 'A required path argument is missing.' },

  // Approvals
  'approval.not_found': { status: 404, mcp: 'result', message: 'No approval with that id (for this token).' },
  'approval.not_pending': { status: 409, mcp: 'result', message: 'The approval was already decided.' },
  'approval.out_of_scope': {
    status: 409,
    mcp: 'result',
    message: 'The approved call no longer matches its tool or policy; it cannot continue.',
  },
  'approval.self_approval': { status: 403, mcp: 'result', message: 'The requester cannot decide its own approval.' },

  // The memory surface
  'mcp.memory_schema': { status: 400, mcp: 'result', message: 'The memory tool arguments are invalid.' },
  'memory.not_found': { status: 404, mcp: 'result', message: 'No such memory unit, directive, model or operation.' },
  'memory.engine_unavailable': {
    status: 503,
    mcp: 'result',
    message: 'The memory engine cannot be reached right now; retry shortly.',
  },
  'memory.llm_failed': {
    status: 502,
    mcp: 'result',
    message: 'The language-model endpoint failed or answered something unusable.',
  },
  'memory.operation_state': {
    status: 409,
    mcp: 'result',
    message: 'The operation is not in a state that allows this.',
  },

  // The stdio sandbox
  'stdio.command_not_allowed': {
    status: 403,
    mcp: 'result',
    message: 'The command is not in the platform setting stdio.allowedCommands.',
  },
  'stdio.sandbox_unavailable': {
    status: 503,
    mcp: 'result',
    message:
      'bubblewrap (bwrap) is not installed, so stdio servers cannot be sandboxed; install it (apt-get install bubblewrap) or set GATEHOUSE_STDIO_SANDBOX=off.',
  },

  // Gatehouse itself
  internal_error: { status: 500, mcp: JSONRPC_INTERNAL, message: 'Gatehouse failed unexpectedly.' },

  // Pins are approved by the hash the operator reviewed (issue 15)
  'pin.changed': {
    status: 409,
    mcp: 'result',
    message: 'The definition changed again since it was reviewed; review the new one before approving.',
  },
  // Holes closed by the trust core (issue 15)
  'tool.unsafe_schema': {
    status: 403,
    mcp: 'result',
    message:
      'The tool’s input schema cannot be checked safely (a pattern the linear-time engine cannot run, or a $ref loop); the tool is quarantined.',
  },
  bad_host: {
    status: 400,
    mcp: JSONRPC_INVALID_PARAMS,
    message: 'The Host header must be a host name or address with an optional port (no userinfo, path or spaces).',
  },
  request_timeout: {
    status: 408,
    mcp: JSONRPC_INVALID_PARAMS,
    message: 'The request (headers and body) was not received within the request timeout.',
  },
  'policy.relative_path': {
    status: 403,
    mcp: 'result',
    message:
      'A path argument is relative (or starts with ~) and this server would resolve it on its own; give an absolute path inside the workspace.',
  },
  session_limit: {
    status: 429,
    mcp: 'result',
    message:
      'The gateway holds as many sessions as it may; retry later (or use the 2026-07-28 protocol, which needs none).',
  },
  'tool.arguments_too_complex': {
    status: 400,
    mcp: 'result',
    message:
      'Checking these arguments against the tool’s schema (patterns, uniqueItems) would hold the gateway too long; send smaller arguments.',
  },
  // Upstream authorization (an upstream's HTTP 401; the upstream-identity issue uses these too)
  auth_required: {
    status: 502,
    mcp: 'result',
    message: 'The upstream MCP server requires authorization; configure its credentials.',
  },
  auth_failed: {
    status: 502,
    mcp: 'result',
    message: 'The upstream MCP server refused the credentials Gatehouse sent.',
  },
  // Day one
  'serve.port_in_use': { status: 409, mcp: 'result', message: 'The address and port to listen on are not available.' },
  needs_configuration: {
    status: 409,
    mcp: 'result',
    message: 'The server is missing configuration it needs (environment variables or arguments).',
  },
  // The stdio sandbox, second part: typed in a server's `lastError` and in `servers test` warnings
  'sandbox.network_denied': {
    status: 502,
    mcp: 'result',
    message: 'The stdio server tried to reach the network, which is off for it (sandbox.network "none").',
  },
  'stdio.workspace_root_unwritable': {
    status: 409,
    mcp: 'result',
    message: "A workspace root of the stdio server cannot be written by its child's uid (it is read-only for it).",
  },
  // Users and dashboard sign-in (issue 17)
  'user.name_taken': { status: 409, mcp: 'result', message: 'A user with that name already exists.' },
  'user.provider_managed': {
    status: 409,
    mcp: 'result',
    message:
      "This user's role and groups follow the OpenID provider's groups (GATEHOUSE_OIDC_ROLE_MAP) at every sign-in; change them at the provider or in the map.",
  },
  'auth.csrf_failed': {
    status: 403,
    mcp: 'result',
    message: 'A state-changing request signed in by cookie must carry the session’s x-gatehouse-csrf header.',
  },
  'oidc.not_configured': {
    status: 404,
    mcp: 'result',
    message: 'Sign-in with an OpenID Connect provider is not configured (GATEHOUSE_OIDC_ISSUER).',
  },
  'oidc.failed': { status: 400, mcp: 'result', message: 'The OpenID Connect sign-in failed.' },
  'oidc.browser_mismatch': {
    status: 403,
    mcp: 'result',
    message: 'This sign-in came back to a browser that did not start it; sign in again from this browser.',
  },
  'oidc.provider_unreachable': {
    status: 502,
    mcp: 'result',
    message: 'The OpenID Connect provider could not be reached or answered something unusable.',
  },
  // Gatehouse as an OAuth 2.1 authorization server (issue 17): the RFC's error code follows `oauth.`
  'oauth.invalid_request': {
    status: 400,
    mcp: 'result',
    message: 'The OAuth request is missing or repeats a parameter, or has a bad one.',
  },
  'oauth.invalid_client': {
    status: 401,
    mcp: 'result',
    message: 'The OAuth client is unknown or its metadata is unusable.',
  },
  'oauth.invalid_grant': {
    status: 400,
    mcp: 'result',
    message: 'The authorization code or refresh token is invalid, expired, revoked or already used.',
  },
  'oauth.unauthorized_client': { status: 400, mcp: 'result', message: 'This client may not use this grant type.' },
  'oauth.unsupported_grant_type': {
    status: 400,
    mcp: 'result',
    message: 'Only authorization_code and refresh_token are supported.',
  },
  'oauth.unsupported_response_type': { status: 400, mcp: 'result', message: 'Only response_type=code is supported.' },
  'oauth.invalid_scope': {
    status: 400,
    mcp: 'result',
    message: 'The requested scope is unknown or larger than granted.',
  },
  'oauth.invalid_target': {
    status: 400,
    mcp: 'result',
    message: 'The resource is not an MCP endpoint of this Gatehouse.',
  },
  'oauth.access_denied': { status: 403, mcp: 'result', message: 'The person denied the request.' },
  'oauth.invalid_redirect_uri': { status: 400, mcp: 'result', message: 'A redirect URI is not acceptable.' },
  'oauth.invalid_client_metadata': { status: 400, mcp: 'result', message: 'The client metadata is invalid.' },
  'oauth.registration_disabled': {
    status: 403,
    mcp: 'result',
    message: 'Dynamic client registration is switched off (platform setting oauth.dynamicRegistration).',
  },
  'oauth.invalid_token': {
    status: 401,
    mcp: JSONRPC_INVALID_PARAMS,
    message: 'The access token is invalid, expired, revoked or for another resource.',
  },
  'search.unknown_tool': {
    status: 404,
    mcp: 'result',
    message: 'No tool of that name is visible to this agent; find one with gatehouse__search_tools.',
  },
  'search.embeddings_failed': {
    status: 502,
    mcp: 'result',
    message: 'The embeddings endpoint failed or answered something unusable (search ranks with BM25 alone).',
  },
  // Toolsets and overrides (issue 22)
  'toolset.not_found': { status: 404, mcp: 'result', message: 'No toolset has that name.' },
  'toolset.already_exists': { status: 409, mcp: 'result', message: 'A toolset with that name exists.' },
  'override.invalid': {
    status: 400,
    mcp: 'result',
    message:
      "The override does not fit the tool's pinned definition (an unknown argument or a value its schema refuses).",
  },
  'override.name_taken': {
    status: 409,
    mcp: 'result',
    message: 'That display name is already an aggregated name of another tool (or another override).',
  },
  'override.argument_fixed': {
    status: 400,
    mcp: 'result',
    message: 'An argument of this call is fixed by an operator override and may not be given.',
  },
  // Upstream OAuth (issue 18): Gatehouse as an OAuth client of an upstream's authorization server
  'auth.user_required': {
    status: 403,
    mcp: 'result',
    message: 'This server connects each user with their own account; this token belongs to no user.',
  },
  'auth.connect_required': {
    status: 409,
    mcp: 'result',
    message: 'Connect your account to this server first (open the connect URL).',
  },
  'oauth.metadata_refused': {
    status: 502,
    mcp: 'result',
    message: "The upstream's authorization metadata was refused (unreachable, invalid, too large or unsafe).",
  },
  'oauth.state_invalid': {
    status: 400,
    mcp: 'result',
    message: 'This authorization answer is unknown, expired or already used; start connecting again.',
  },
  'oauth.browser_mismatch': {
    status: 403,
    mcp: 'result',
    message:
      'This authorization came back to a browser that did not open its connect link; start connecting again from your own link.',
  },
  'oauth.not_configured': {
    status: 409,
    mcp: 'result',
    message: 'This server does not use OAuth with that grant.',
  },
  // Secret-key rotation (issue 18)
  'secrets.key_missing': {
    status: 500,
    mcp: 'result',
    message: 'A sealed value was sealed with a secret key this gateway does not have (retired too early?).',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Whether a string is a code of the catalogue (e.g. one read back from a REST answer). */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CATALOGUE, code);
}

/** Extra, non-secret facts attached to an error envelope (e.g. `reason`, `issues`). */
export type ErrorDetails = Record<string, unknown>;

export class GatehouseError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: ErrorDetails | undefined;

  constructor(code: ErrorCode, message?: string, details?: ErrorDetails, options?: { cause?: unknown }) {
    super(message ?? ERROR_CATALOGUE[code].message, options);
    this.name = 'GatehouseError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
    this.details = details;
  }

  /** The REST body: `{"error": {"code", "message", ...details}}`. */
  toBody(): { error: { code: ErrorCode; message: string } & ErrorDetails } {
    return { error: { ...this.details, code: this.code, message: this.message } };
  }
}

export function isGatehouseError(value: unknown): value is GatehouseError {
  return value instanceof GatehouseError;
}

/** Finds a GatehouseError anywhere in an error's `cause` chain (SDKs wrap what they catch). */
export function findGatehouseError(value: unknown): GatehouseError | undefined {
  const seen = new Set<unknown>();
  let current: unknown = value;
  while (current && typeof current === 'object' && !seen.has(current)) {
    if (current instanceof GatehouseError) return current;
    seen.add(current);
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

export interface ValidationIssue {
  path: string;
  message: string;
}

export function validationError(issues: ValidationIssue[], message?: string, details?: ErrorDetails): GatehouseError {
  const summary = message ?? `Invalid request: ${issues.map((i) => `${i.path || '(body)'}: ${i.message}`).join('; ')}`;
  return new GatehouseError('validation_error', summary, { ...details, issues });
}

/** No route for a request. The path is the caller's own input: named, but cut short (an id of 5,000 characters is not echoed whole). */
export function noRouteError(method: string, path: string): GatehouseError {
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  return new GatehouseError('not_found', `No route ${method} ${shown}.`);
}
