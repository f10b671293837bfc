/**
 * The dashboard's Connect-a-client screen: for each client `gatehouse connect` knows, the exact config entry that
 * points it at this gateway's hub (its public URL), from the same writers as the CLI (`cli/connect/clients.ts`).
 * `GET` shows the entry with the token left as the client expects it (a variable, an input, or a placeholder);
 * `POST …/token` creates an agent token for the client and answers the entry with it — the only time it is shown.
 */
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import { CLIENT_IDS, CLIENTS, type ClientId, snippetOf, type WiringInput } from '../cli/connect/clients.js';
import { selfLaunch } from '../cli/launch.js';
import { GatehouseError } from '../errors.js';
import type { TokenStore } from '../store/tokens.js';
import { defineRoute, type RouteDeclaration } from './route.js';
import { groupName } from './tokens.js';

export const entryName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, '1–64 letters, digits, ".", "_" or "-"');
const snippetQuery = z.strictObject({ name: entryName.default('gatehouse') });
const tokenBody = z.strictObject({
  name: entryName.default('gatehouse'),
  tokenName: z.string().trim().min(1).max(100),
  groups: z.array(groupName).max(64).optional(),
});
const clientParams = z.strictObject({ client: z.enum(CLIENT_IDS) });
const TOKEN_ENV = 'GATEHOUSE_TOKEN';

export interface ConnectDeps {
  tokens: TokenStore;
  audit: AuditLog;
  events: EventHub;
  /** This gateway as its clients reach it (`GATEHOUSE_PUBLIC_URL`, or where it listens). */
  baseUrl(): string;
}

/** What the writers of `gatehouse connect` need to point `client` at this gateway's hub (also the import's rewrite). */
export function wiringInput(baseUrl: string, client: ClientId, name: string, token?: string): WiringInput {
  const launch = selfLaunch();
  return {
    hubUrl: `${baseUrl.replace(/\/+$/, '')}/mcp`,
    name,
    tokenEnv: TOKEN_ENV,
    command: launch.command,
    commandArgs: launch.args,
    token: CLIENTS[client].secret === 'clear' ? token : undefined,
  };
}

function answer(deps: ConnectDeps, client: ClientId, name: string, token?: string) {
  const spec = CLIENTS[client];
  const input = wiringInput(deps.baseUrl(), client, name, token);
  return {
    client,
    label: spec.label,
    usualPath: spec.usualPath,
    secret: spec.secret,
    hubUrl: input.hubUrl,
    snippet: snippetOf(spec, input),
    note: spec.tokenNote(input, token, input.token !== undefined),
  };
}

export function connectRoutes(deps: ConnectDeps): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/connect/:client',
      summary:
        "The config entry that points a client (claude-code, cursor, vscode, lmstudio, claude-desktop) at this gateway's hub, as `gatehouse connect` prints it.",
      scope: 'tokens',
      access: ['admin'],
      mcp: { exclude: 'a dashboard screen; agents are already connected' },
      params: clientParams,
      query: snippetQuery,
      handler: ({ params, query }) => answer(deps, params.client, query.name),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/connect/:client/token',
      summary:
        'Create an agent token for a client and answer its config entry with it; the answer is the only time the token is shown.',
      scope: 'tokens',
      access: ['admin'],
      mcp: { exclude: 'an agent could mint itself credentials' },
      params: clientParams,
      body: tokenBody,
      status: 201,
      async handler({ params, body, principal }) {
        const live = await deps.tokens.findByName(body.tokenName);
        // As `connect --token-name`: no second live token of that name (the first one's value cannot be shown again).
        if (live) {
          throw new GatehouseError(
            'conflict',
            `A live token named "${body.tokenName}" exists (${live.id}); its value cannot be shown again. Revoke it first or choose another name.`,
          );
        }
        const { record, token } = await deps.tokens.create({
          name: body.tokenName,
          role: 'agent',
          groups: body.groups,
          userId: principal?.user?.id ?? null,
          source: 'api',
        });
        await deps.audit.recordAdmin({
          action: 'token.create',
          actor: principal,
          data: { id: record.id, role: record.role, client: params.client },
        });
        await deps.events.publish('token.changed', { id: record.id, change: 'created' });
        return { ...answer(deps, params.client, body.name, token), tokenId: record.id, token };
      },
    }),
  ];
}
