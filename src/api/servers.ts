/** The server registry and lifecycle REST API under `/api/mcp/servers`, plus install. */
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import type { EgressGuard } from '../egress/index.js';
import { GatehouseError, validationError } from '../errors.js';
import { toolPolicySchema } from '../policy/tool-policy.js';
import type { Catalog } from '../registry/catalog.js';
import { deriveServerId, serverIdSchema } from '../registry/ids.js';
import { type ResolvedManifest, resolveInstallUrl } from '../registry/manifest.js';
import type { ConfigPatch, NewServer } from '../registry/records.js';
import { type SecretInput, secretInputSchema, showInput } from '../registry/secret-values.js';
import type { Registry } from '../registry/service.js';
import { shownEnvValue } from '../upstream/stdio/env.js';
import { listAnswer, pageQuery } from './lists.js';
import { recordUrl, upstreamHeaders } from './ops.js';
import { defineRoute, type RouteDeclaration, type Tier } from './route.js';
import { groupName } from './tokens.js';

const MANAGERS = ['admin', 'operator'] as const;

const idParams = z.strictObject({ id: serverIdSchema });
const headerMap = z.record(z.string(), secretInputSchema);
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'not an environment variable name');
const envMap = z.record(envName, secretInputSchema);
/** An RFC 8414 issuer identifier: an http(s) URL without query or fragment (compared exactly with the metadata's). */
function isIssuer(value: string): boolean {
  try {
    const url = new URL(value);
    return (
      (url.protocol === 'https:' || url.protocol === 'http:') &&
      !url.search &&
      !url.hash &&
      !url.username &&
      !url.password &&
      !value.includes('?') &&
      !value.includes('#')
    );
  } catch {
    return false;
  }
}
const authSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('none') }),
  z.strictObject({ type: z.literal('bearer'), token: secretInputSchema }),
  // OAuth 2.1 to the upstream (see src/upstream-auth): the grant's tokens are sealed apart from the record.
  z
    .strictObject({
      type: z.literal('oauth'),
      mode: z.enum(['shared', 'per-user']),
      grant: z.enum(['authorization_code', 'client_credentials']).optional(),
      clientId: z.string().min(1).max(512).optional(),
      clientSecret: secretInputSchema.optional(),
      scopes: z
        .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/, 'not an OAuth scope token'))
        .max(64)
        .optional(),
      // The only authorization server the server's grants (and the client secret) may go to; RFC 8414 §2 form.
      issuer: z
        .string()
        .max(2048)
        .refine(isIssuer, "an http(s) URL without query, fragment or credentials (its metadata's issuer)")
        .optional(),
    })
    .superRefine((auth, ctx) => {
      if (auth.grant === 'client_credentials' && (auth.mode !== 'shared' || !auth.clientId)) {
        ctx.addIssue({
          code: 'custom',
          path: ['grant'],
          message: 'client_credentials needs mode "shared" and a clientId (machine to machine)',
        });
      }
      if (auth.clientSecret !== undefined && !auth.clientId) {
        ctx.addIssue({ code: 'custom', path: ['clientSecret'], message: 'goes with clientId' });
      }
    }),
]);
const argList = z.array(z.string().max(4096)).max(256);
const command = z.string().min(1).max(1024);
const exposure = z.array(groupName).max(64);

const absolutePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => isAbsolute(p), 'must be an absolute path');

/**
 * The per-server options beside the manifest: the path sandbox and a stdio server's lifecycle. A config file
 * states them as they are; the config body takes each with null to remove it.
 */
export const serverOptionFields = {
  /** Arguments the path sandbox checks (default path, file, dir, directory). */
  pathArgs: z.array(z.string().min(1).max(128)).max(32),
  /** Folders path arguments must stay inside. */
  workspaceRoots: z.array(absolutePath).max(32),
  /** stdio: start the server on its first call instead of at boot. */
  lazyStart: z.boolean(),
  /** stdio: stop the server after this many seconds without a call; 0 never. */
  idleShutdownS: z.number().int().min(0).max(604_800),
};

/**
 * A stdio server's bubblewrap sandbox: `mode: "off"` runs it unsandboxed (the admin's escape hatch),
 * `network: "none"` cuts it off the network, `readOnlyPaths` mounts more of the host read-only.
 * Admin-only: each of them widens or narrows what the server reaches.
 */
const sandboxSchema = z.strictObject({
  mode: z.enum(['on', 'off']).optional(),
  network: z.enum(['host', 'none']).optional(),
  readOnlyPaths: z.array(absolutePath).max(32).optional(),
});

/** Header names are checked like the conduit's (no transport-owned headers); values may be env references. */
/**
 * The header names an HTTP request can carry, and each literal value (an env reference is checked when it is
 * read): CR, LF or NUL in a value is refused here, not first when the server is connected.
 */
const checkHeaderNames = (headers: Record<string, unknown>, ctx: z.RefinementCtx) => {
  const checked = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, typeof v === 'string' ? v : 'x']));
  const parsed = upstreamHeaders.safeParse(checked);
  if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, code: 'custom' });
};

export const manifestSchema = z
  .strictObject({
    id: serverIdSchema.optional(),
    name: z.string().trim().min(1).max(200),
    description: z.string().max(4000).optional(),
    transport: z.enum(['streamable-http', 'sse', 'stdio']),
    url: recordUrl.optional(),
    command: command.optional(),
    args: argList.optional(),
    headers: headerMap.superRefine(checkHeaderNames).optional(),
    env: envMap.optional(),
    auth: authSchema.optional(),
    enabled: z.boolean().optional(),
    privateNetwork: z.boolean().optional(),
    trustNewTools: z.boolean().optional(),
    exposure: exposure.optional(),
    toolPolicy: toolPolicySchema.optional(),
    sandbox: sandboxSchema.optional(),
  })
  .superRefine((m, ctx) => {
    if (m.transport !== 'stdio' && !m.url)
      ctx.addIssue({ code: 'custom', path: ['url'], message: `required for ${m.transport}` });
    if (m.transport === 'stdio' && !m.command)
      ctx.addIssue({ code: 'custom', path: ['command'], message: 'required for stdio' });
    if (m.transport !== 'stdio' && m.sandbox) {
      ctx.addIssue({ code: 'custom', path: ['sandbox'], message: 'only stdio servers run in a sandbox' });
    }
    if (m.transport === 'stdio' && (m.url || m.headers || m.auth)) {
      ctx.addIssue({ code: 'custom', path: ['transport'], message: 'stdio servers take command, args and env' });
    }
    if (m.transport === 'sse' && m.auth?.type === 'oauth') {
      ctx.addIssue({ code: 'custom', path: ['auth'], message: 'OAuth is not supported over the legacy sse transport' });
    }
    if (m.transport !== 'stdio' && (m.command || m.args)) {
      ctx.addIssue({
        code: 'custom',
        path: ['transport'],
        message: `${m.transport} servers take url, headers and auth`,
      });
    }
  });

const installBody = z
  .strictObject({
    url: z.string().min(1).max(2048).optional(),
    manifest: manifestSchema.optional(),
    preset: z.string().min(1).max(256).optional(),
    /** With `url` or `preset`: the id to install under instead of the derived one. */
    id: serverIdSchema.optional(),
    /** With an `http(s)` `url`: its transport, instead of the one read from the URL (`…/sse` is `sse`). */
    transport: z.enum(['streamable-http', 'sse']).optional(),
    /** With `url` or `preset`: admit private and loopback addresses (admin only), as `privateNetwork` in a manifest. */
    privateNetwork: z.boolean().optional(),
    /** With `preset`: the variables it needs (sealed like any env value). */
    env: envMap.optional(),
    /** With `preset`: extra arguments after the preset's own (e.g. the folders of a filesystem server). */
    args: argList.optional(),
    /** With `url` (an HTTP server): its auth, e.g. `{"type": "oauth", "mode": "shared"}`. */
    auth: authSchema.optional(),
  })
  .refine((b) => b.auth === undefined || b.url !== undefined, {
    message: 'auth goes with url (a manifest carries its own)',
  })
  .refine((b) => b.transport === undefined || b.url !== undefined, { message: 'transport goes with url' })
  .refine((b) => b.preset !== undefined || (b.env === undefined && b.args === undefined), {
    message: 'env and args go with preset (a manifest carries its own)',
  })
  .refine((b) => [b.url, b.manifest, b.preset].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of url, manifest, preset',
  });

const configBody = z.strictObject({
  env: z.record(envName, secretInputSchema.nullable()).optional(),
  headers: z.record(z.string(), secretInputSchema.nullable()).superRefine(checkHeaderNames).optional(),
  enabled: z.boolean().optional(),
  url: recordUrl.optional(),
  command: command.optional(),
  args: argList.optional(),
  auth: authSchema.optional(),
  privateNetwork: z.boolean().optional(),
  trustNewTools: z.boolean().optional(),
  /** null restores the default. */
  pathArgs: serverOptionFields.pathArgs.nullable().optional(),
  /** null removes the sandbox. */
  workspaceRoots: serverOptionFields.workspaceRoots.nullable().optional(),
  /** null restores the default (false). */
  lazyStart: serverOptionFields.lazyStart.nullable().optional(),
  /** null or 0 never. */
  idleShutdownS: serverOptionFields.idleShutdownS.nullable().optional(),
  /** stdio, admin only: the sandbox (mode, network, readOnlyPaths), replaced whole; null restores the default. */
  sandbox: sandboxSchema.nullable().optional(),
});

/**
 * The blast radius of each config field. Whatever widens what a server runs, reaches, receives or may
 * touch is gated for agents; switching it on or off and its lifecycle knobs are not. A new field must be
 * classified here (the admin catalog refuses a field without a tier).
 */
const CONFIG_FIELD_TIERS: Readonly<Record<keyof z.input<typeof configBody>, Tier>> = {
  command: 'gated',
  args: 'gated',
  env: 'gated',
  url: 'gated',
  headers: 'gated',
  auth: 'gated',
  workspaceRoots: 'gated',
  pathArgs: 'gated',
  trustNewTools: 'gated',
  privateNetwork: 'gated',
  sandbox: 'gated', // off, its network, what it may read: what a stdio child can reach
  enabled: 'autonomousWrite',
  lazyStart: 'autonomousWrite',
  idleShutdownS: 'autonomousWrite',
};

/** A value the call writes, masked: a literal shows that a new value is set (not which), a reference its name. */
function showNewInput(input: SecretInput | null): Record<string, unknown> | null {
  const shown = showInput(input);
  return shown && 'set' in shown ? { ...shown, new: true } : shown;
}

/** A config body as an approval card shows it: header, env and bearer values masked, references named. */
function showConfigBody(body: Record<string, unknown>): Record<string, unknown> {
  const shown: Record<string, unknown> = { ...body };
  for (const field of ['env', 'headers'] as const) {
    const values = body[field] as Record<string, SecretInput | null> | undefined;
    if (values && typeof values === 'object') {
      shown[field] = Object.fromEntries(
        Object.entries(values).map(([name, value]) => [
          name,
          (field === 'env' ? shownEnvValue(name, value) : undefined) ?? showNewInput(value),
        ]),
      );
    }
  }
  const auth = body.auth as { type?: string; token?: SecretInput; clientSecret?: SecretInput } | undefined;
  if (auth && typeof auth === 'object') {
    shown.auth = {
      ...auth,
      ...(auth.token !== undefined ? { token: showNewInput(auth.token) } : {}),
      ...(auth.clientSecret !== undefined ? { clientSecret: showNewInput(auth.clientSecret) } : {}),
    };
  }
  // An install by manifest carries the same secret fields one level down.
  const manifest = body.manifest;
  if (manifest && typeof manifest === 'object' && !Array.isArray(manifest)) {
    shown.manifest = showConfigBody(manifest as Record<string, unknown>);
  }
  return shown;
}

/** Splits the config body into record fields and the per-server options (sandbox, later lifecycle). */
function toConfigPatch(body: z.output<typeof configBody>): ConfigPatch {
  const { pathArgs, workspaceRoots, lazyStart, idleShutdownS, sandbox, ...rest } = body;
  const options = Object.fromEntries(
    Object.entries({ pathArgs, workspaceRoots, lazyStart, idleShutdownS, sandbox }).filter(
      ([, value]) => value !== undefined,
    ),
  );
  return Object.keys(options).length > 0 ? { ...rest, options } : rest;
}

function fromManifest(manifest: ResolvedManifest, id: string | undefined): NewServer {
  return {
    id: id ?? manifest.id ?? deriveServerId(manifest.name),
    name: manifest.name,
    description: manifest.description ?? null,
    transport: manifest.transport,
    url: manifest.url ?? null,
    command: manifest.command ?? null,
    args: manifest.args ?? [],
    spec: manifest.spec ?? null,
    sourceKind: manifest.sourceKind,
    sourceUrl: manifest.sourceUrl ?? null,
    options: {
      ...(manifest.envRequired.length > 0 ? { envRequired: manifest.envRequired } : {}),
      ...(manifest.argsRequired
        ? { argsRequired: { what: manifest.argsRequired, after: manifest.args?.length ?? 0 } }
        : {}),
    },
  } as NewServer;
}

export interface ServerRouteDeps {
  registry: Registry;
  catalog: Catalog;
  /** Fetches manifests; public-address rules apply. */
  guard: EgressGuard;
}

export function serverRoutes({ registry, catalog, guard }: ServerRouteDeps): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers',
      summary: 'Installed MCP servers with their status (last handshake) and state (runtime now).',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_list', tier: 'autonomousRead' },
      query: pageQuery,
      async handler({ query }) {
        const { servers, total } = await registry.list(query);
        return listAnswer('servers', servers, total);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id',
      summary: 'One server with its discovered tools, prompts, resources and pins.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_get', tier: 'autonomousRead' },
      params: idParams,
      handler: ({ params }) => registry.detail(params.id),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/mcp/install',
      summary: 'Install a server from a URL or spec, a full manifest, or a catalog preset.',
      scope: 'servers',
      access: MANAGERS,
      // The card masks a preset's env values and an auth secret as a config change's does.
      mcp: { tool: 'mcp_server_install', tier: 'gated', shown: showConfigBody },
      body: installBody,
      status: 201,
      async handler({ body, principal }) {
        let input: NewServer;
        if ((body.privateNetwork || body.manifest?.privateNetwork) && principal?.role !== 'admin') {
          throw new GatehouseError('forbidden', 'Only an admin may install a server with privateNetwork.');
        }
        if (body.manifest) {
          const { id, sandbox, ...rest } = body.manifest;
          input = {
            ...rest,
            id: body.id ?? id ?? deriveServerId(rest.name),
            sourceKind: 'manifest',
            ...(sandbox && { options: { sandbox } }),
          };
        } else if (body.preset) {
          const preset = fromManifest(catalog.toManifest(catalog.preset(body.preset)), body.id);
          input = {
            ...preset,
            sourceKind: 'preset',
            args: [...(preset.args ?? []), ...(body.args ?? [])],
            ...(body.env ? { env: body.env } : {}),
          };
        } else {
          const resolved = await resolveInstallUrl(body.url as string, guard, body.id ? { id: body.id } : {});
          if (body.transport && resolved.transport !== body.transport) {
            if (resolved.transport === 'stdio' || resolved.sourceKind !== 'url') {
              throw validationError(
                [{ path: 'transport', message: 'goes with the URL of an HTTP server' }],
                'transport goes with the URL of an HTTP server.',
              );
            }
            resolved.transport = body.transport;
          }
          input = fromManifest(resolved, body.id);
        }
        if (body.privateNetwork !== undefined) input = { ...input, privateNetwork: body.privateNetwork };
        if (body.auth) {
          if (input.transport !== 'streamable-http') {
            throw new GatehouseError('validation_error', 'auth goes with a streamable-http server.');
          }
          input = { ...input, auth: body.auth };
        }
        serverIdSchema.parse(input.id);
        return { installed: await registry.install(input, principal) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/mcp/servers/:id',
      summary: 'Uninstall a server: its record, pins and events go.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_uninstall', tier: 'gated' },
      params: idParams,
      async handler({ params, principal }) {
        await registry.uninstall(params.id, principal);
        return { uninstalled: params.id };
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/mcp/servers/:id/config',
      summary:
        'Sparse change of env, headers, enabled, url, command, args, auth, privateNetwork, trustNewTools, pathArgs, workspaceRoots, lazyStart, idleShutdownS, sandbox (admin only); null removes a key.',
      scope: 'servers',
      access: MANAGERS,
      mcp: {
        tool: 'mcp_server_config_write',
        tier: 'autonomousWrite',
        fields: CONFIG_FIELD_TIERS,
        current: 'mcp_server_get',
        shown: showConfigBody,
      },
      params: idParams,
      body: configBody,
      handler: async ({ params, body, principal }) => ({
        server: await registry.configure(params.id, toConfigPatch(body), principal),
      }),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/mcp/servers/:id/test',
      summary: 'Handshake: connect, list tools, prompts and resources; store status and pins; classify every tool.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_test', tier: 'autonomousWrite' },
      params: idParams,
      handler: ({ params, principal }) => registry.test(params.id, principal),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/mcp/servers/:id/tools',
      summary: 'Replace the whole tool policy: mode, include, exclude, allow, gated, blocked, defaultTier.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_tools_write', tier: 'gated' },
      params: idParams,
      body: toolPolicySchema,
      handler: async ({ params, body, principal }) => ({
        server: await registry.setToolPolicy(params.id, body, principal),
      }),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/mcp/servers/:id/exposure',
      summary: 'Which client groups see the server.',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_exposure_write', tier: 'gated' },
      params: idParams,
      body: z.strictObject({ groups: exposure }),
      handler: async ({ params, body, principal }) => ({
        server: await registry.setExposure(params.id, body.groups, principal),
      }),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id/logs',
      summary: "The server's recent events, newest first, each with a kind.",
      scope: 'servers',
      access: MANAGERS,
      // A third-party process's stderr can hold anything (tokens it printed, paths, data): an operator decides.
      mcp: { tool: 'mcp_server_logs', tier: 'gated' },
      params: idParams,
      query: z.strictObject({ limit: z.coerce.number().int().min(1).max(500).default(100) }),
      async handler({ params, query }) {
        const events = await registry.logs(params.id, query.limit);
        return { server: params.id, events, count: events.length };
      },
    }),
  ];
}
