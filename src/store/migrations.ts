/**
 * Versioned schema migrations. They run at start inside one transaction that
 * first takes a cross-process lock (SQLite: `BEGIN IMMEDIATE`, PostgreSQL: an
 * advisory transaction lock), so processes starting together apply each
 * migration exactly once. Append new migrations; never edit an applied one.
 */
import { type Kysely, sql } from 'kysely';
import { memoryMigration } from '../memory/migration.js';
import { backfillRollup, createRollupTables } from '../overview/rollup.js';
import type { StoreKind } from './db.js';
import type { Database } from './schema.js';

// biome-ignore lint/suspicious/noExplicitAny: migrations create tables the typed schema does not know yet
type AnyDb = Kysely<any>;

export interface Migration {
  version: number;
  name: string;
  up(db: AnyDb, kind: StoreKind): Promise<void>;
}

function idColumn(kind: StoreKind) {
  return kind === 'postgres' ? sql`bigserial primary key` : sql`integer primary key autoincrement`;
}

const APPENDED: readonly Migration[] = [
  {
    version: 1,
    name: 'control plane: meta, tokens, settings, servers, pins, events, audit',
    async up(db, kind) {
      await db.schema
        .createTable('gatehouse_meta')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('tokens')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('groups', 'text', (c) => c.notNull())
        .addColumn('hash', 'text', (c) => c.notNull().unique())
        .addColumn('rate_limit', 'integer')
        .addColumn('max_concurrent', 'integer')
        .addColumn('source', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('last_used_at', 'text')
        .addColumn('revoked_at', 'text')
        .execute();
      await db.schema
        .createTable('settings')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('updated_by', 'text')
        .execute();
      await db.schema
        .createTable('servers')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('transport', 'text', (c) => c.notNull())
        .addColumn('url', 'text')
        .addColumn('command', 'text')
        .addColumn('args', 'text', (c) => c.notNull())
        .addColumn('headers', 'text', (c) => c.notNull())
        .addColumn('env', 'text', (c) => c.notNull())
        .addColumn('auth', 'text', (c) => c.notNull())
        .addColumn('enabled', 'integer', (c) => c.notNull())
        .addColumn('private_network', 'integer', (c) => c.notNull())
        .addColumn('trust_new_tools', 'integer', (c) => c.notNull())
        .addColumn('exposure', 'text', (c) => c.notNull())
        .addColumn('tool_policy', 'text', (c) => c.notNull())
        .addColumn('options', 'text', (c) => c.notNull())
        .addColumn('policy_version', 'integer', (c) => c.notNull())
        .addColumn('pinned_at', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('last_error', 'text')
        .addColumn('last_tested_at', 'text')
        .addColumn('latency_ms', 'integer')
        .addColumn('protocol_era', 'text')
        .addColumn('discover', 'text')
        .addColumn('discovered_tools', 'text', (c) => c.notNull())
        .addColumn('discovered_prompts', 'text', (c) => c.notNull())
        .addColumn('discovered_resources', 'text', (c) => c.notNull())
        .addColumn('spec', 'text')
        .addColumn('source_kind', 'text', (c) => c.notNull())
        .addColumn('source_url', 'text')
        .addColumn('author', 'text')
        .addColumn('installed_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('tool_pins')
        .addColumn('server_id', 'text', (c) => c.notNull().references('servers.id').onDelete('cascade'))
        .addColumn('tool_name', 'text', (c) => c.notNull())
        .addColumn('pin_hash', 'text', (c) => c.notNull())
        .addColumn('definition', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('pending_hash', 'text')
        .addColumn('pending_definition', 'text')
        .addColumn('first_seen_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('approved_by', 'text')
        .addPrimaryKeyConstraint('tool_pins_pk', ['server_id', 'tool_name'])
        .execute();
      await db.schema
        .createTable('server_events')
        .addColumn('id', idColumn(kind))
        .addColumn('server_id', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('data', 'text')
        .addColumn('at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('server_events_by_server').on('server_events').columns(['server_id', 'id']).execute();
      await db.schema
        .createTable('audit_events')
        .addColumn('id', idColumn(kind))
        .addColumn('at', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('actor_id', 'text')
        .addColumn('actor_name', 'text')
        .addColumn('server_id', 'text')
        .addColumn('tool', 'text')
        .addColumn('verdict', 'text')
        .addColumn('approval_id', 'text')
        .addColumn('outcome', 'text')
        .addColumn('latency_ms', 'integer')
        .addColumn('request_bytes', 'integer')
        .addColumn('response_bytes', 'integer')
        .addColumn('args_digest', 'text')
        .addColumn('data', 'text')
        .execute();
      await db.schema.createIndex('audit_events_by_time').on('audit_events').columns(['at']).execute();
      await db.schema
        .createTable('stream_events')
        .addColumn('id', idColumn(kind))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('at', 'text', (c) => c.notNull())
        .execute();
    },
  },
  {
    version: 2,
    name: 'hub: approvals',
    async up(db) {
      await db.schema
        .createTable('approvals')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('surface', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('requester_id', 'text', (c) => c.notNull())
        .addColumn('requester_name', 'text', (c) => c.notNull())
        .addColumn('server_id', 'text')
        .addColumn('tool', 'text', (c) => c.notNull())
        .addColumn('exposed_name', 'text', (c) => c.notNull())
        .addColumn('arguments', 'text', (c) => c.notNull())
        .addColumn('args_hash', 'text', (c) => c.notNull())
        .addColumn('pin_hash', 'text')
        .addColumn('policy_version', 'integer')
        .addColumn('detail', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('decided_at', 'text')
        .addColumn('decided_by', 'text')
        .addColumn('reason', 'text')
        .addColumn('executed_at', 'text')
        .addColumn('result', 'text')
        .addColumn('error', 'text')
        .execute();
      await db.schema.createIndex('approvals_by_status').on('approvals').columns(['status', 'created_at']).execute();
    },
  },
  {
    version: 3,
    name: 'audit indexes for the query routes',
    async up(db) {
      await db.schema.createIndex('audit_events_by_actor').on('audit_events').columns(['actor_id', 'at']).execute();
      await db.schema.createIndex('audit_events_by_server').on('audit_events').columns(['server_id', 'at']).execute();
      await db.schema
        .createIndex('audit_events_by_kind')
        .on('audit_events')
        .columns(['kind', 'actor_id', 'server_id', 'at'])
        .execute();
    },
  },
  {
    version: 4,
    name: 'memory: units, documents, history, directives, mental models, operations, full-text search',
    up: (db, kind) => memoryMigration(db, kind),
  },
  {
    version: 5,
    name: 'fleet: rate_windows (per-token call counts per window, shared by replicas)',
    async up(db) {
      await db.schema
        .createTable('rate_windows')
        .addColumn('token_id', 'text', (c) => c.notNull())
        .addColumn('window_start', 'bigint', (c) => c.notNull())
        .addColumn('used', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('rate_windows_pk', ['token_id', 'window_start'])
        .execute();
    },
  },
  {
    version: 6,
    name: 'pins: a kind (tool | prompt | resource) and a scheme version per pin (issue 15, prompts pinned)',
    async up(db, kind) {
      // Existing pins are tool pins of scheme 1; a prompt may share a tool's name, so the key gains the kind.
      if (kind === 'postgres') {
        await sql`alter table tool_pins add column kind text not null default 'tool'`.execute(db);
        await sql`alter table tool_pins add column scheme integer not null default 1`.execute(db);
        await sql`alter table tool_pins drop constraint tool_pins_pk`.execute(db);
        await sql`alter table tool_pins add constraint tool_pins_pk primary key (server_id, kind, tool_name)`.execute(
          db,
        );
        return;
      }
      // SQLite cannot change a primary key in place: rebuild the table.
      await db.schema
        .createTable('tool_pins_next')
        .addColumn('server_id', 'text', (c) => c.notNull().references('servers.id').onDelete('cascade'))
        .addColumn('kind', 'text', (c) => c.notNull().defaultTo('tool'))
        .addColumn('tool_name', 'text', (c) => c.notNull())
        .addColumn('scheme', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('pin_hash', 'text', (c) => c.notNull())
        .addColumn('definition', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('pending_hash', 'text')
        .addColumn('pending_definition', 'text')
        .addColumn('first_seen_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('approved_by', 'text')
        .addPrimaryKeyConstraint('tool_pins_pk', ['server_id', 'kind', 'tool_name'])
        .execute();
      await sql`insert into tool_pins_next (server_id, kind, tool_name, scheme, pin_hash, definition, state, reason,
        pending_hash, pending_definition, first_seen_at, updated_at, approved_by)
        select server_id, 'tool', tool_name, 1, pin_hash, definition, state, reason, pending_hash, pending_definition,
        first_seen_at, updated_at, approved_by from tool_pins`.execute(db);
      await db.schema.dropTable('tool_pins').execute();
      await sql`alter table tool_pins_next rename to tool_pins`.execute(db);
    },
  },
  {
    version: 7,
    name: 'trust core: tokens.max_sessions (a token’s own cap on live sessions)',
    async up(db) {
      await db.schema.alterTable('tokens').addColumn('max_sessions', 'integer').execute();
    },
  },
  {
    version: 8,
    name: 'users: people, dashboard sessions, OIDC sign-in state; tokens.user_id; user on audit and approvals',
    async up(db) {
      await db.schema
        .createTable('users')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('email', 'text')
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('groups', 'text', (c) => c.notNull())
        .addColumn('disabled', 'integer', (c) => c.notNull())
        .addColumn('source', 'text', (c) => c.notNull())
        // `issuer#subject` of an OIDC-provisioned user: the one key a returning sign-in is matched on.
        .addColumn('external_id', 'text', (c) => c.unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('last_seen_at', 'text')
        .execute();
      await db.schema
        .createTable('user_sessions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('hash', 'text', (c) => c.notNull().unique())
        .addColumn('csrf_hash', 'text', (c) => c.notNull())
        .addColumn('user_id', 'text')
        .addColumn('token_id', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('last_seen_at', 'text')
        .addColumn('revoked_at', 'text')
        .execute();
      await db.schema.createIndex('user_sessions_user').on('user_sessions').column('user_id').execute();
      await db.schema
        .createTable('oidc_logins')
        .addColumn('state_hash', 'text', (c) => c.primaryKey())
        .addColumn('verifier', 'text', (c) => c.notNull())
        .addColumn('nonce', 'text', (c) => c.notNull())
        .addColumn('return_to', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.alterTable('tokens').addColumn('user_id', 'text').execute();
      await db.schema.alterTable('audit_events').addColumn('user_id', 'text').execute();
      await db.schema.alterTable('audit_events').addColumn('user_name', 'text').execute();
      await db.schema.createIndex('audit_events_user').on('audit_events').columns(['user_id', 'at']).execute();
      await db.schema.alterTable('approvals').addColumn('requester_user_id', 'text').execute();
      await db.schema.alterTable('approvals').addColumn('requester_user_name', 'text').execute();
      await db.schema.alterTable('approvals').addColumn('decided_by_user_id', 'text').execute();
    },
  },
  {
    version: 9,
    name: 'oauth: clients, codes, grants, token families, refresh tokens, revoked access tokens, signing keys',
    async up(db) {
      await db.schema
        .createTable('oauth_clients')
        .addColumn('client_id', 'text', (c) => c.primaryKey())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('redirect_uris', 'text', (c) => c.notNull())
        .addColumn('metadata', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('created_by', 'text')
        .execute();
      await db.schema
        .createTable('oauth_codes')
        .addColumn('hash', 'text', (c) => c.primaryKey())
        .addColumn('grant_id', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('redirect_uri', 'text', (c) => c.notNull())
        .addColumn('resource', 'text', (c) => c.notNull())
        .addColumn('code_challenge', 'text', (c) => c.notNull())
        .addColumn('family_id', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('used_at', 'text')
        .execute();
      await db.schema
        .createTable('oauth_grants')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('subject_name', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('client_name', 'text', (c) => c.notNull())
        .addColumn('resource', 'text', (c) => c.notNull())
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('groups', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('last_used_at', 'text')
        .addColumn('revoked_at', 'text')
        .execute();
      await db.schema
        .createIndex('oauth_grants_consent')
        .on('oauth_grants')
        .columns(['subject', 'client_id', 'resource', 'scope'])
        .execute();
      await db.schema
        .createTable('oauth_families')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('grant_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('revoked_at', 'text')
        .addColumn('revoked_reason', 'text')
        .execute();
      await db.schema.createIndex('oauth_families_grant').on('oauth_families').column('grant_id').execute();
      await db.schema
        .createTable('oauth_refresh_tokens')
        .addColumn('hash', 'text', (c) => c.primaryKey())
        .addColumn('family_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('used_at', 'text')
        .execute();
      await db.schema
        .createIndex('oauth_refresh_tokens_family')
        .on('oauth_refresh_tokens')
        .column('family_id')
        .execute();
      await db.schema
        .createTable('oauth_revoked_access')
        .addColumn('jti', 'text', (c) => c.primaryKey())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('oauth_signing_keys')
        .addColumn('kid', 'text', (c) => c.primaryKey())
        .addColumn('alg', 'text', (c) => c.notNull())
        .addColumn('public_jwk', 'text', (c) => c.notNull())
        .addColumn('private_sealed', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
    },
  },
  {
    version: 13,
    name: 'context control: tokens.tool_view (all | search | toolset:<name>; null: the hub.toolView setting)',
    async up(db) {
      await db.schema.alterTable('tokens').addColumn('tool_view', 'text').execute();
    },
  },
  {
    version: 14,
    name: 'toolsets: named, curated sets of tools from several servers (issue 22); overrides ride in tool_pins as kind override',
    async up(db) {
      await db.schema
        .createTable('toolsets')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('description', 'text')
        .addColumn('tools', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('updated_by', 'text')
        .execute();
    },
  },
  {
    version: 12,
    name: 'fleet: mcp_sessions (2025-era sessions any replica can serve; rows expire), audit_events.trace_id',
    async up(db) {
      await db.schema
        .createTable('mcp_sessions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('surface', 'text', (c) => c.notNull())
        .addColumn('owner', 'text', (c) => c.notNull())
        .addColumn('token_id', 'text', (c) => c.notNull())
        .addColumn('init', 'text', (c) => c.notNull())
        .addColumn('log_level', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('last_seen', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('mcp_sessions_token').on('mcp_sessions').columns(['token_id', 'surface']).execute();
      await db.schema.createIndex('mcp_sessions_expiry').on('mcp_sessions').column('expires_at').execute();
      // A call's OpenTelemetry trace id (tracing on), so an audit row leads to its trace.
      await db.schema.alterTable('audit_events').addColumn('trace_id', 'text').execute();
    },
  },
  {
    version: 10,
    name: 'upstream OAuth: grants (sealed tokens per subject, server, issuer), registered clients, pending flows',
    async up(db) {
      await db.schema
        .createTable('upstream_oauth_grants')
        .addColumn('server_id', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('issuer', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('metadata', 'text', (c) => c.notNull())
        .addColumn('access_token', 'text', (c) => c.notNull())
        .addColumn('refresh_token', 'text')
        .addColumn('expires_at', 'text')
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('upstream_oauth_grants_pk', ['server_id', 'subject', 'issuer'])
        .execute();
      await db.schema
        .createTable('upstream_oauth_clients')
        .addColumn('server_id', 'text', (c) => c.notNull())
        .addColumn('issuer', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('client_secret', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('upstream_oauth_clients_pk', ['server_id', 'issuer'])
        .execute();
      await db.schema
        .createTable('upstream_oauth_flows')
        .addColumn('state_hash', 'text', (c) => c.primaryKey())
        .addColumn('server_id', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('issuer', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('metadata', 'text', (c) => c.notNull())
        .addColumn('code_verifier', 'text', (c) => c.notNull())
        .addColumn('redirect_uri', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
    },
  },
  {
    version: 16,
    name: 'upstream OAuth: upstream_oauth_grants.scopes_wanted (the wider scope a 403 insufficient_scope asked for)',
    async up(db) {
      await db.schema.alterTable('upstream_oauth_grants').addColumn('scopes_wanted', 'text').execute();
    },
  },
  {
    version: 19,
    name: 'fleet: approvals.trace_parent (an approved call runs in the trace of the call that waited for it); audit rows by trace',
    async up(db) {
      await db.schema.alterTable('approvals').addColumn('trace_parent', 'text').execute();
      // Partial: with tracing off no row has a trace id, and the audit's inserts pay nothing for it.
      await db.schema
        .createIndex('audit_events_by_trace')
        .on('audit_events')
        .column('trace_id')
        .where(sql.ref('trace_id'), 'is not', null)
        .execute();
    },
  },
  {
    version: 23,
    name: 'approvals: sealed_arguments (an admin call that carries secrets keeps them sealed; the card shows them masked)',
    async up(db) {
      await db.schema.alterTable('approvals').addColumn('sealed_arguments', 'text').execute();
    },
  },
  {
    version: 24,
    name: 'upstream OAuth: the RFC 8707 resource as the protected-resource metadata names it, on flows and grants',
    async up(db) {
      await db.schema.alterTable('upstream_oauth_flows').addColumn('resource', 'text').execute();
      await db.schema.alterTable('upstream_oauth_grants').addColumn('resource', 'text').execute();
    },
  },
  {
    version: 11,
    name: 'oauth: client metadata documents cached in the store (every replica uses one fetch until it expires)',
    async up(db) {
      await db.schema
        .createTable('oauth_client_documents')
        .addColumn('client_id', 'text', (c) => c.primaryKey())
        .addColumn('client', 'text', (c) => c.notNull())
        .addColumn('until_ms', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('oauth_client_documents_until')
        .on('oauth_client_documents')
        .column('until_ms')
        .execute();
    },
  },
  {
    version: 15,
    name: 'overview: a covering index for the Overview aggregation (the window by time, every grouped column)',
    async up(db) {
      // The Overview groups a window of call rows by bucket, verdict, outcome, server, tool and latency; with
      // every column in the index, the window is read from the index alone. It begins with `at`, so it serves
      // every query the plain time index served, and replaces it (one index more per audit insert, not two).
      await db.schema
        .createIndex('audit_events_overview')
        .on('audit_events')
        .columns(['at', 'kind', 'server_id', 'tool', 'verdict', 'outcome', 'latency_ms'])
        .execute();
      await db.schema.dropIndex('audit_events_by_time').execute();
    },
  },
  {
    version: 22,
    name: 'context: recent_tools (the tools each agent called most recently, shared by replicas)',
    async up(db) {
      await db.schema
        .createTable('recent_tools')
        .addColumn('token_id', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('used_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('recent_tools_pk', ['token_id', 'name'])
        .execute();
    },
  },
  {
    version: 17,
    name: 'hub: upstream tasks bound to the token that created them (the Tasks extension; any replica answers tasks/get)',
    async up(db) {
      await db.schema
        .createTable('hub_tasks')
        .addColumn('server_id', 'text', (c) => c.notNull())
        .addColumn('task_id', 'text', (c) => c.notNull())
        .addColumn('token_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('hub_tasks_pk', ['server_id', 'task_id'])
        .execute();
      await db.schema.createIndex('hub_tasks_by_expiry').on('hub_tasks').column('expires_at').execute();
    },
  },
  {
    version: 20,
    name: 'overview: per-period rollups of call rows (ten minutes × verdict × outcome; per server and per tool by ten minutes and hour), backfilled',
    async up(db) {
      // Kept by the audit's group commit from now on; the rows already there are counted once here.
      await createRollupTables(db);
      await backfillRollup(db);
    },
  },
  {
    version: 25,
    name: 'audit: audit_journals (how much of each local audit journal is in the store; SQLite writes call rows through it)',
    async up(db) {
      await db.schema
        .createTable('audit_journals')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('stored_bytes', 'bigint', (c) => c.notNull())
        .execute();
    },
  },
  {
    version: 26,
    name: 'fleet: held_rounds (a round of a held upstream call that reached another replica, relayed to its holder)',
    async up(db) {
      await db.schema
        .createTable('held_rounds')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('created_ms', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('held_rounds_by_age').on('held_rounds').column('created_ms').execute();
    },
  },
  {
    version: 27,
    name: "fleet: mcp_session_subscriptions (who relays a shared session's resource subscription), mcp_sessions.principal",
    async up(db) {
      // Additive only: the previous release still reads and writes mcp_sessions during a rolling upgrade.
      await db.schema.alterTable('mcp_sessions').addColumn('principal', 'text').execute();
      await db.schema
        .createTable('mcp_session_subscriptions')
        .addColumn('session_id', 'text', (c) => c.notNull().references('mcp_sessions.id').onDelete('cascade'))
        .addColumn('uri', 'text', (c) => c.notNull())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('mcp_session_subscriptions_pk', ['session_id', 'uri'])
        .execute();
      await db.schema
        .createIndex('mcp_session_subscriptions_holder')
        .on('mcp_session_subscriptions')
        .column('holder')
        .execute();
    },
  },
  {
    version: 28,
    name: 'upstream OAuth: upstream_oauth_flows.opener, authorization_url, browser_hash (a flow completes only in the browser of the person who started it)',
    async up(db) {
      // Nullable and additive: a flow started by the previous release has no binding and cannot complete (ten minutes).
      await db.schema.alterTable('upstream_oauth_flows').addColumn('opener', 'text').execute();
      await db.schema.alterTable('upstream_oauth_flows').addColumn('authorization_url', 'text').execute();
      await db.schema.alterTable('upstream_oauth_flows').addColumn('browser_hash', 'text').execute();
    },
  },
  {
    version: 29,
    name: 'upstream OAuth: upstream_oauth_pins (the issuer a configured client is bound to; its secret goes nowhere else)',
    async up(db) {
      // A table of its own: the pin outlives edits of the record's auth that keep the client, and goes with the server.
      await db.schema
        .createTable('upstream_oauth_pins')
        .addColumn('server_id', 'text', (c) => c.notNull())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('issuer', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('upstream_oauth_pins_pk', ['server_id', 'client_id'])
        .execute();
    },
  },
  {
    version: 30,
    name: 'sign-in: oidc_logins.browser_hash (an OpenID Connect sign-in completes only in the browser that started it)',
    async up(db) {
      // Nullable and additive: the previous release still inserts rows without it; such a sign-in cannot complete
      // on this release (its browser holds no cookie) and is started again, the rows expire in ten minutes.
      await db.schema.alterTable('oidc_logins').addColumn('browser_hash', 'text').execute();
    },
  },
];

/** Every migration in version order, whatever order the issues appended them in. */
export const MIGRATIONS: readonly Migration[] = [...APPENDED].sort((a, b) => a.version - b.version);

const ADVISORY_LOCK_ID = 0x6761_7465; // "gate"

/** Applies every pending migration under a cross-process lock; returns the versions applied now. */
export async function migrate(db: Kysely<Database>, kind: StoreKind): Promise<number[]> {
  const anyDb = db as AnyDb;
  await anyDb.schema
    .createTable('gatehouse_migrations')
    .ifNotExists()
    .addColumn('version', 'integer', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('applied_at', 'text', (c) => c.notNull())
    .execute()
    .catch(async (error: unknown) => {
      // Two PostgreSQL processes can race on CREATE TABLE IF NOT EXISTS; the loser sees a duplicate.
      const exists = await anyDb
        .selectFrom('gatehouse_migrations')
        .select('version')
        .limit(1)
        .execute()
        .then(
          () => true,
          () => false,
        );
      if (!exists) throw error;
    });

  return db.transaction().execute(async (trx) => {
    if (kind === 'postgres') await sql`select pg_advisory_xact_lock(${ADVISORY_LOCK_ID})`.execute(trx);
    const applied = new Set(
      (await trx.selectFrom('gatehouse_migrations').select('version').execute()).map((r) => Number(r.version)),
    );
    const now: number[] = [];
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      await migration.up(trx as AnyDb, kind);
      await trx
        .insertInto('gatehouse_migrations')
        .values({ version: migration.version, name: migration.name, applied_at: new Date().toISOString() })
        .execute();
      now.push(migration.version);
    }
    return now;
  });
}

export const LATEST_MIGRATION = Math.max(...MIGRATIONS.map((m) => m.version));
