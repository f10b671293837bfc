/**
 * Upstream OAuth (issue 18): a server's grant state, connect and disconnect; a user's own grants; the
 * connect link a person opens (it binds their signed-in browser to the flow) and the callback the
 * authorization server sends that browser back to; Gatehouse's client metadata document.
 * No route returns a token.
 */
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import type { AuditLog } from '../audit/log.js';
import { GatehouseError } from '../errors.js';
import type { Principal } from '../identity/index.js';
import { serverIdSchema } from '../registry/ids.js';
import {
  browserNonceOf,
  CONNECT_PATH,
  clearBrowserCookie,
  openerOf,
  setBrowserCookie,
} from '../upstream-auth/browser.js';
import type { GrantStore, Subject } from '../upstream-auth/grants.js';
import { type AuthStatus, CALLBACK_PATH, CLIENT_METADATA_PATH, type UpstreamAuth } from '../upstream-auth/service.js';
import { securityHeaders } from '../web-serve.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const MANAGERS = ['admin', 'operator'] as const;
/** Anyone a person stands behind may manage their own grants. */
const PEOPLE = ['admin', 'operator', 'member', 'agent'] as const;

const idParams = z.strictObject({ id: serverIdSchema });
const scopeToken = z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/, 'not an OAuth scope token');
const connectBody = z
  .strictObject({
    /** Scopes beyond the server's configured ones (after a 403 insufficient_scope). */
    scopes: z.array(scopeToken).max(64).optional(),
  })
  .optional();

export interface UpstreamAuthRouteDeps {
  auth: UpstreamAuth;
  grants: GrantStore;
  audit: AuditLog;
  /** Runs the server's handshake after a shared grant is connected, so its status reflects it. */
  afterConnect(serverId: string, subject: Subject): Promise<void>;
}

function ownSubject(principal: Principal | undefined): Subject {
  const user = principal?.user;
  if (!user) throw new GatehouseError('auth.user_required', 'These are a person’s own grants; this token has no user.');
  return `user:${user.id}`;
}

export function upstreamAuthRoutes({ auth, grants, audit, afterConnect }: UpstreamAuthRouteDeps): RouteDeclaration[] {
  /** The server's shared grant, or — for a per-user server — the caller's own. */
  const subjectOf = async (serverId: string, principal: Principal | undefined): Promise<Subject> => {
    const status = await auth.status(serverId, 'shared');
    return status.mode === 'shared' ? 'shared' : ownSubject(principal);
  };
  const connect = async (
    serverId: string,
    subject: Subject,
    principal: Principal | undefined,
    start: () => Promise<{ authorizationUrl: string } | { connected: AuthStatus }>,
  ) => {
    const answer = await start();
    await audit.recordAdmin({
      action: 'server.auth.connect',
      actor: principal,
      serverId,
      data: { subject: subject === 'shared' ? 'shared' : 'user', started: 'authorizationUrl' in answer },
    });
    if ('connected' in answer) await afterConnect(serverId, subject);
    return answer;
  };
  const disconnect = async (serverId: string, subject: Subject, principal: Principal | undefined) => {
    const outcome = await auth.disconnect(serverId, subject);
    await audit.recordAdmin({
      action: 'server.auth.disconnect',
      actor: principal,
      serverId,
      data: { subject: subject === 'shared' ? 'shared' : 'user', ...outcome },
    });
    return { server: serverId, ...outcome };
  };

  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/servers/:id/auth',
      summary: "A server's OAuth state: mode, grant, connected or needs_reconnect, scopes, expiry (never a token).",
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_auth_get', tier: 'autonomousRead' },
      params: idParams,
      async handler({ params, principal }) {
        const shared = await auth.status(params.id, 'shared');
        if (shared.mode === 'shared' || !principal?.user) return { auth: shared };
        return { auth: await auth.status(params.id, `user:${principal.user.id}`) };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/mcp/servers/:id/auth/connect',
      summary:
        'Start connecting the server (its shared grant, or the caller’s own for a per-user server): the authorization URL to open; client_credentials connects at once.',
      scope: 'servers',
      access: MANAGERS,
      // Hands the upstream a grant every allowed agent then uses: a person decides.
      mcp: { tool: 'mcp_server_auth_connect', tier: 'gated' },
      params: idParams,
      body: connectBody,
      async handler({ params, body, principal }) {
        const subject = await subjectOf(params.id, principal);
        return connect(params.id, subject, principal, () =>
          auth.connect(params.id, subject, { scopes: body?.scopes, by: principal }),
        );
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/mcp/servers/:id/auth',
      summary: 'Disconnect the server’s grant (revoked at the authorization server when it offers RFC 7009).',
      scope: 'servers',
      access: MANAGERS,
      mcp: { tool: 'mcp_server_auth_disconnect', tier: 'gated' },
      params: idParams,
      async handler({ params, principal }) {
        return disconnect(params.id, await subjectOf(params.id, principal), principal);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/users/me/grants',
      summary: 'The signed-in user’s own upstream OAuth grants (never a token).',
      scope: 'servers',
      access: PEOPLE,
      mcp: { exclude: 'a person’s own upstream accounts, managed by that person in the dashboard' },
      async handler({ principal }) {
        const list = await grants.ofSubject(ownSubject(principal));
        return { grants: list, count: list.length, total: list.length };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/users/me/grants/:id/connect',
      summary:
        'Start connecting the signed-in user’s own account to a per-user server exposed to their groups: the connect link.',
      scope: 'servers',
      access: PEOPLE,
      mcp: { exclude: 'a person signs in to their own upstream account; an agent cannot' },
      params: idParams,
      body: connectBody,
      async handler({ params, body, principal }) {
        return connect(params.id, ownSubject(principal), principal, () =>
          auth.connectOwn(params.id, principal, body?.scopes),
        );
      },
    }),
    defineRoute({
      method: 'DELETE',
      url: '/api/users/me/grants/:id',
      summary: 'Disconnect the signed-in user’s own grant to a server.',
      scope: 'servers',
      access: PEOPLE,
      mcp: { exclude: 'a person’s own upstream accounts, managed by that person in the dashboard' },
      params: idParams,
      async handler({ params, principal }) {
        const subject = ownSubject(principal);
        await auth.assertHolds(params.id, subject);
        return disconnect(params.id, subject, principal);
      },
    }),
    defineRoute({
      method: 'GET',
      url: CONNECT_PATH,
      summary:
        'The connect link a person opens: in a browser signed in as them, binds it to the flow and sends it to the authorization server.',
      scope: 'servers',
      access: 'public',
      mcp: { exclude: 'a browser page, not a tool' },
      query: z.strictObject({ flow: z.string().regex(/^[0-9a-f]{64}$/, 'not a connect link') }),
      async handler({ query, reply, request }) {
        pageHeaders(reply);
        // Only the dashboard session cookie proves whose browser this is (a bearer header proves no browser).
        const principal = request.session ? request.principal : undefined;
        try {
          const opened = await auth.openLink(query.flow, principal && openerOf(principal));
          setBrowserCookie(reply, auth.publicBaseUrl(), query.flow, opened.nonce, opened.maxAgeS);
          return reply.redirect(opened.authorizationUrl, 302);
        } catch (error) {
          const { status, code } = refusalOf(error);
          request.log.info({ code }, 'upstream OAuth connect link refused');
          const message =
            error instanceof GatehouseError && code !== 'internal_error'
              ? error.message
              : 'Connecting failed. Start again from Gatehouse.';
          return reply
            .code(status)
            .type('text/html; charset=utf-8')
            .send(
              page(code === 'unauthorized' ? 'Sign in to Gatehouse first' : 'Not connected', `${message} (${code})`),
            );
        }
      },
    }),
    defineRoute({
      method: 'GET',
      url: CALLBACK_PATH,
      summary: 'Where an upstream’s authorization server sends the person back (single-use state).',
      scope: 'servers',
      access: 'public',
      mcp: { exclude: 'a browser redirect target, not a tool' },
      query: z.object({
        state: z.string().min(1).max(512),
        code: z.string().min(1).max(4096).optional(),
        iss: z.string().max(2048).optional(),
        error: z.string().max(256).optional(),
      }),
      async handler({ query, reply, request }) {
        pageHeaders(reply);
        reply.type('text/html; charset=utf-8');
        let status = 200;
        let body: string;
        // The flow's cookie is used once, whatever the answer.
        clearBrowserCookie(reply, auth.publicBaseUrl(), query.state);
        try {
          const { serverId, subject } = await auth.callback(query, browserNonceOf(request, query.state));
          await audit.recordAdmin({
            action: 'server.auth.connected',
            actor: undefined,
            serverId,
            data: { subject: subject === 'shared' ? 'shared' : 'user' },
          });
          await afterConnect(serverId, subject);
          body = page('Connected', `Gatehouse is connected to ${serverId}. You can close this window.`);
        } catch (error) {
          const refusal = refusalOf(error);
          const { code } = refusal;
          status = refusal.status;
          const reason = error instanceof GatehouseError ? error.details?.reason : undefined;
          request.log.warn({ code, reason }, 'upstream OAuth callback refused');
          body = page('Not connected', `Connecting failed (${code}). Start again from Gatehouse.`);
        }
        // Sent here: a person's browser gets a page, never the JSON error envelope.
        return reply.code(status).send(body);
      },
    }),
    defineRoute({
      method: 'GET',
      url: CLIENT_METADATA_PATH,
      summary: 'Gatehouse’s OAuth Client ID Metadata Document (its URL is its client_id at upstreams).',
      scope: 'servers',
      access: 'public',
      mcp: { exclude: 'public metadata fetched by authorization servers' },
      handler: () => auth.clientMetadata(),
    }),
  ];
}

function refusalOf(error: unknown): { status: number; code: string } {
  return error instanceof GatehouseError
    ? { status: error.status, code: error.code }
    : { status: 500, code: 'internal_error' };
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

/** The dashboard's own headers on these two small pages (no framing of a connect link), never cached. */
function pageHeaders(reply: FastifyReply): void {
  securityHeaders(reply);
  reply.header('cache-control', 'no-store');
}

function page(title: string, message: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></body></html>`;
}
