/**
 * Table types for Kysely. Both databases store the same shapes: timestamps as
 * ISO-8601 text (sorts and compares the same everywhere), booleans as 0/1
 * integers, lists and maps as JSON text.
 */
import type { Generated } from 'kysely';
import type { MemoryTables } from '../memory/tables.js';

export interface MetaTable {
  key: string;
  value: string;
}

export interface MigrationTable {
  version: number;
  name: string;
  applied_at: string;
}

export interface TokenTable {
  id: string;
  name: string;
  role: string;
  groups: string;
  /** SHA-256 hex of the token; the token itself is shown once and never stored. */
  hash: string;
  rate_limit: number | null;
  max_concurrent: number | null;
  source: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  /** The token's own cap on live sessions; null: the platform setting `hub.maxSessionsPerToken`. */
  max_sessions: number | null;
  /** The user who owns this (agent) token; null: a token of nobody in particular. */
  user_id?: string | null;
  /** What the hub lists to this agent (`all`, `search`, `toolset:<name>`); null: the platform setting `hub.toolView`. */
  tool_view: string | null;
}

export interface SettingTable {
  key: string;
  value: string;
  updated_at: string;
  updated_by: string | null;
}

export interface ServerTable {
  id: string;
  name: string;
  description: string | null;
  transport: string;
  url: string | null;
  command: string | null;
  args: string;
  /** `{name: {sealed} | {env}}` for each; sealed values are AES-256-GCM blobs bound to the record. */
  headers: string;
  env: string;
  auth: string;
  enabled: number;
  private_network: number;
  trust_new_tools: number;
  exposure: string;
  tool_policy: string;
  /** Later issues' per-server fields (pathArgs, workspaceRoots, lazyStart, …) live in this JSON map. */
  options: string;
  policy_version: number;
  /** When the first successful handshake pinned the tools; later new tools are quarantined. */
  pinned_at: string | null;
  status: string;
  last_error: string | null;
  last_tested_at: string | null;
  latency_ms: number | null;
  protocol_era: string | null;
  discover: string | null;
  discovered_tools: string;
  discovered_prompts: string;
  discovered_resources: string;
  spec: string | null;
  source_kind: string;
  source_url: string | null;
  author: string | null;
  installed_at: string;
  updated_at: string;
}

export interface ToolPinTable {
  server_id: string;
  /** What is pinned: `tool`, `prompt` or `resource` (default `tool`). */
  kind: string;
  /** The item's name (a tool's, a prompt's, …), unique per server and kind. */
  tool_name: string;
  /** The field-set version the pin was made with (1 today; see `src/policy/pins.ts`). */
  scheme: number;
  pin_hash: string;
  definition: string;
  /** `pinned` or `quarantined`. */
  state: string;
  /** Why it is quarantined: `changed`, `new`, `schema_too_large`, `unsafe_schema`, `duplicate`. */
  reason: string | null;
  pending_hash: string | null;
  pending_definition: string | null;
  first_seen_at: string;
  updated_at: string;
  approved_by: string | null;
}

export interface ServerEventTable {
  id: Generated<number>;
  server_id: string;
  kind: string;
  message: string;
  data: string | null;
  at: string;
}

export interface AuditEventTable {
  id: Generated<number>;
  at: string;
  /** `admin` for control-plane changes, `call` for tool calls, `ops` for conduit operations. */
  kind: string;
  action: string;
  actor_id: string | null;
  actor_name: string | null;
  server_id: string | null;
  tool: string | null;
  verdict: string | null;
  approval_id: string | null;
  outcome: string | null;
  latency_ms: number | null;
  request_bytes: number | null;
  response_bytes: number | null;
  args_digest: string | null;
  data: string | null;
  /** The person the actor (agent) acted for, when known. */
  user_id?: string | null;
  user_name?: string | null;
  /** The OpenTelemetry trace id of the call, when tracing is on (migration 12). */
  trace_id?: string | null;
}

/**
 * The Overview's rollups of call rows (migration 20, `overview/rollup.ts`), kept by the audit's group commit.
 * `period` is a prefix of the ISO time: 15 characters (`…T06:4`, ten minutes) or 13 (`…T06`, an hour).
 * Absent values are stored as ''.
 */
export interface AuditRollupCallsTable {
  period: string;
  verdict: string;
  outcome: string;
  calls: number;
}

/** Calls, errors and the latency histogram (`h0`…`h15`, `overview/aggregate.ts` LATENCY_BOUNDS) per server. */
export interface AuditRollupServersTable {
  grain_minutes: number;
  period: string;
  server_id: string;
  calls: number;
  errors: number;
  h0: number;
  h1: number;
  h2: number;
  h3: number;
  h4: number;
  h5: number;
  h6: number;
  h7: number;
  h8: number;
  h9: number;
  h10: number;
  h11: number;
  h12: number;
  h13: number;
  h14: number;
  h15: number;
}

export interface AuditRollupToolsTable {
  grain_minutes: number;
  period: string;
  server_id: string;
  tool: string;
  calls: number;
}

export interface StreamEventTable {
  id: Generated<number>;
  type: string;
  data: string;
  at: string;
}

export interface ApprovalTable {
  id: string;
  /** `hub` or `admin`: which MCP surface asked. */
  surface: string;
  /** pending → approved → executing → executed | failed; or rejected, expired, out_of_scope. */
  status: string;
  requester_id: string;
  requester_name: string;
  server_id: string | null;
  /** The upstream tool (hub) or admin tool name. */
  tool: string;
  /** The name the agent called. */
  exposed_name: string;
  /**
   * The arguments as every reader sees them (JSON): exactly what will be sent, unless they carry secrets
   * (`sealed_arguments` set), in which case the secret values are masked here.
   */
  arguments: string;
  /** SHA-256 of the RFC 8785 canonical arguments. */
  args_hash: string;
  pin_hash: string | null;
  policy_version: number | null;
  /** What the approval card shows: tool description and title at request time (JSON). */
  detail: string | null;
  created_at: string;
  expires_at: string;
  decided_at: string | null;
  decided_by: string | null;
  reason: string | null;
  executed_at: string | null;
  /** The stored upstream result (JSON), returned again on every status read. */
  result: string | null;
  error: string | null;
  /** The person behind the requesting agent, and the person who decided (requester ≠ approver per user). */
  requester_user_id?: string | null;
  requester_user_name?: string | null;
  decided_by_user_id?: string | null;
  /** The `traceparent` of the call that asked (tracing on): its approved execution continues that trace (migration 19). */
  trace_parent?: string | null;
  /** The literal arguments, sealed, when `arguments` shows them masked (an admin call carrying secrets; migration 23). */
  sealed_arguments?: string | null;
}

export interface Database extends MemoryTables {
  approvals: ApprovalTable;
  gatehouse_meta: MetaTable;
  gatehouse_migrations: MigrationTable;
  tokens: TokenTable;
  settings: SettingTable;
  servers: ServerTable;
  tool_pins: ToolPinTable;
  server_events: ServerEventTable;
  audit_events: AuditEventTable;
  audit_rollup_calls: AuditRollupCallsTable;
  audit_rollup_servers: AuditRollupServersTable;
  audit_rollup_tools: AuditRollupToolsTable;
  stream_events: StreamEventTable;
  rate_windows: RateWindowTable;
  users: UserTable;
  user_sessions: UserSessionTable;
  oidc_logins: OidcLoginTable;
  oauth_clients: OAuthClientTable;
  oauth_codes: OAuthCodeTable;
  oauth_grants: OAuthGrantTable;
  oauth_families: OAuthFamilyTable;
  oauth_refresh_tokens: OAuthRefreshTokenTable;
  oauth_revoked_access: OAuthRevokedAccessTable;
  oauth_signing_keys: OAuthSigningKeyTable;
  toolsets: ToolsetTable;
  mcp_sessions: McpSessionTable;
  mcp_session_subscriptions: McpSessionSubscriptionTable;
  upstream_oauth_grants: UpstreamOAuthGrantTable;
  upstream_oauth_clients: UpstreamOAuthClientTable;
  upstream_oauth_flows: UpstreamOAuthFlowTable;
  upstream_oauth_pins: UpstreamOAuthPinTable;
  oauth_client_documents: OAuthClientDocumentTable;
  recent_tools: RecentToolTable;
  hub_tasks: HubTaskTable;
  audit_journals: AuditJournalTable;
  held_rounds: HeldRoundTable;
}

/** What a replica hands the replica holding a held call, and what it answers (`surfaces/hub/held-relay.ts`, migration 26). */
export interface HeldRoundTable {
  /** The relayed round's id; its answer is stored under `{id}:step`. */
  id: string;
  /** JSON: the round (owner and input responses), or its step. */
  body: string;
  /** When it was written (ms since the epoch): rows left by a replica that died are purged after a while. */
  created_ms: number;
}

/** How many bytes of one local audit journal file are already in `audit_events` (`audit/journal.ts`, migration 25). */
export interface AuditJournalTable {
  /** The journal's file name (unique per process that wrote it). */
  name: string;
  /** The length of the journal's prefix whose rows are stored; added to in the same transaction as the rows. */
  stored_bytes: number;
}

/** The tools each agent called most recently, at most 50 per token (`surfaces/hub/search/recent.ts`, migration 22). */
export interface RecentToolTable {
  token_id: string;
  /** The exposed name the agent called. */
  name: string;
  /** The last call, in milliseconds since the epoch. */
  used_at: number;
}

/** An upstream's task handle, bound to the agent token whose call created it (the Tasks extension). */
export interface HubTaskTable {
  server_id: string;
  /** The upstream's own task id. */
  task_id: string;
  token_id: string;
  created_at: string;
  /** When the binding (and the task, for the agent) ends: the upstream's TTL, at most a day. */
  expires_at: string;
}

/** Calls leased per token and rate window across the fleet (`policy/fleet-limits.ts`). */
export interface RateWindowTable {
  token_id: string;
  /** The window's start, in milliseconds since the epoch. */
  window_start: number;
  used: number;
}

/** People (issue 17): they own agent tokens and sign in to the dashboard. */
export interface UserTable {
  id: string;
  name: string;
  email: string | null;
  /** `admin`, `operator` or `member`. */
  role: string;
  groups: string;
  disabled: number;
  /** `api`, `cli` or `oidc` (provisioned on first sign-in). */
  source: string;
  external_id: string | null;
  created_at: string;
  updated_at: string;
  last_seen_at: string | null;
}

/** Dashboard sessions: the cookie's secret and the CSRF token are kept only as SHA-256. */
export interface UserSessionTable {
  id: string;
  hash: string;
  csrf_hash: string;
  user_id: string | null;
  /** A session opened with a token no user owns acts as that token. */
  token_id: string | null;
  created_at: string;
  expires_at: string;
  last_seen_at: string | null;
  revoked_at: string | null;
}

/** An OIDC sign-in under way: state (hashed), PKCE verifier and nonce, for a few minutes. */
export interface OidcLoginTable {
  state_hash: string;
  verifier: string;
  nonce: string;
  return_to: string;
  created_at: string;
  expires_at: string;
  /**
   * The hash of the nonce in the starting browser's cookie (`gatehouse_oidc_…`): the callback completes only
   * when that cookie comes back. Null on a row the previous release wrote (migration 30): it cannot complete.
   */
  browser_hash: string | null;
}

/** OAuth clients registered with Gatehouse (dynamic registration or by an admin); metadata-document clients are fetched, not stored. */
export interface OAuthClientTable {
  client_id: string;
  /** `dynamic` (RFC 7591) or `static` (pre-registered by an admin). */
  kind: string;
  name: string;
  redirect_uris: string;
  metadata: string;
  created_at: string;
  created_by: string | null;
}

/** Authorization codes: only their SHA-256 is stored; single use. */
export interface OAuthCodeTable {
  hash: string;
  grant_id: string;
  client_id: string;
  redirect_uri: string;
  resource: string;
  /** The PKCE S256 challenge. */
  code_challenge: string;
  /** The token family the code's exchange starts (revoked if the code is replayed). */
  family_id: string;
  expires_at: string;
  used_at: string | null;
}

/** A person's consent to a client, for one resource and scope; the principal of its tokens. */
export interface OAuthGrantTable {
  id: string;
  /** `token:<id>` (signed in with a token) or `user:<id>`. */
  subject: string;
  subject_name: string;
  client_id: string;
  client_name: string;
  resource: string;
  /** The scope string, its words sorted. */
  scope: string;
  /** The groups consented (JSON list). */
  groups: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** One chain of rotating refresh tokens (one code exchange); a replayed member revokes it whole. */
export interface OAuthFamilyTable {
  id: string;
  grant_id: string;
  created_at: string;
  revoked_at: string | null;
  revoked_reason: string | null;
}

export interface OAuthRefreshTokenTable {
  hash: string;
  family_id: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

/** Access tokens revoked before their `exp` (RFC 7009), kept until then. */
export interface OAuthRevokedAccessTable {
  jti: string;
  expires_at: string;
}

/** Access-token signing keys: the private JWK sealed with the store's key. */
export interface OAuthSigningKeyTable {
  kid: string;
  alg: string;
  public_jwk: string;
  private_sealed: string;
  created_at: string;
}

/** A toolset: a named, curated set of tools from several servers, served at `/mcp/t/{name}` (issue 22). */
export interface ToolsetTable {
  name: string;
  description: string | null;
  /** `[{"server", "tool"}]` (JSON): upstream tool names, so an override's display name never breaks a toolset. */
  tools: string;
  created_at: string;
  updated_at: string;
  /** The principal id of the last writer. */
  updated_by: string | null;
}

/** A 2025-era session any replica can serve (`surfaces/shared-sessions.ts`); times in ms since the epoch. */
export interface McpSessionTable {
  id: string;
  /** The surface that opened it (`hub`, `admin`, `memory`). */
  surface: string;
  /** The token and scope it is bound to. */
  owner: string;
  token_id: string;
  /** The `initialize` params (JSON): replayed to rebuild the session's server on another replica. */
  init: string;
  log_level: string | null;
  /**
   * The principal that opened it (JSON, no secret: id, name, role, groups, limits), so a replica can rebuild the
   * session without a request of the agent — to take over the resource subscriptions of a replica that died.
   * Null on rows written before migration 27.
   */
  principal: string | null;
  created_at: number;
  last_seen: number;
  expires_at: number;
}

/**
 * A resource subscription of a shared 2025-era session (migration 27): `holder` is the replica (its tag) that
 * subscribed upstream and relays the updates; when it dies, another replica takes the row over and subscribes
 * again (`surfaces/shared-sessions.ts`). Rows go with their session.
 */
export interface McpSessionSubscriptionTable {
  session_id: string;
  /** The URI as the agent named it. */
  uri: string;
  holder: string;
  created_at: number;
}

/**
 * An upstream OAuth grant (`src/upstream-auth`): tokens sealed, bound to (server, its URL, subject, issuer).
 * `subject` is `shared` or `user:<id>`; `metadata` the authorization server's endpoints as validated.
 */
export interface UpstreamOAuthGrantTable {
  server_id: string;
  subject: string;
  issuer: string;
  client_id: string;
  metadata: string;
  access_token: string;
  refresh_token: string | null;
  expires_at: string | null;
  scopes: string;
  /** `connected` | `needs_reconnect` */
  state: string;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  /** JSON scopes the next connect asks for beyond the granted ones (an upstream's 403 insufficient_scope). */
  scopes_wanted: string | null;
  /** The RFC 8707 resource as the upstream's protected-resource metadata names it; null: the server's URL (migration 24). */
  resource?: string | null;
}

/** A client Gatehouse registered at an upstream's authorization server (Dynamic Client Registration). */
export interface UpstreamOAuthClientTable {
  server_id: string;
  issuer: string;
  client_id: string;
  /** Sealed, when the server issued one. */
  client_secret: string | null;
  created_at: string;
}

/**
 * The authorization server a server's configured (pre-registered) client was first used at (migration 29): with
 * no `auth.issuer`, its secret goes to that issuer only, whatever a later discovery names.
 */
export interface UpstreamOAuthPinTable {
  server_id: string;
  client_id: string;
  issuer: string;
  created_at: string;
}

/** An authorization started and not yet called back: single use, keyed by the SHA-256 of its `state`. */
export interface UpstreamOAuthFlowTable {
  state_hash: string;
  server_id: string;
  subject: string;
  issuer: string;
  client_id: string;
  metadata: string;
  code_verifier: string;
  redirect_uri: string;
  scopes: string;
  expires_at: string;
  /** As on the grant (migration 24). */
  resource?: string | null;
  /**
   * Migration 28, the browser binding (`upstream-auth/browser.ts`). Who may open the connect link
   * (`user:<id>` or `token:<id>`; null: nobody, the flow cannot complete), where it sends that browser,
   * and the SHA-256 of the nonce cookie it set there, which the callback requires.
   */
  opener?: string | null;
  authorization_url?: string | null;
  browser_hash?: string | null;
}

/** A fetched, checked Client ID Metadata Document, shared by replicas until `until_ms` (`oauth/clients.ts`). */
export interface OAuthClientDocumentTable {
  client_id: string;
  /** The client as the consent page and the checks use it (JSON). */
  client: string;
  until_ms: number;
}
