/**
 * A small OAuth authorization server and an MCP upstream (official SDK) that trusts it, for the upstream OAuth
 * tests that need what `oidc-provider` does not do: access tokens without `expires_in`, no refresh token at
 * all, access tokens revoked while the grant lives on (the upstream asks the server, so a revoked token gets a
 * 401 at once), every token request recorded with the client secret it carried, and an upstream whose
 * protected-resource metadata can turn to another authorization server (a hostile or compromised upstream).
 *
 * The authorization server listens on 127.0.0.1 (the SDK sends client credentials over plain http only to
 * loopback names), the upstream on 127.0.0.2; servers using them are installed with `privateNetwork`.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

export const MINI_SCOPE = 'mcp:tools';

export interface TokenRequest {
  grantType: string;
  clientId: string | undefined;
  /** The client secret the request carried (Basic or form), as the tests check where a secret went. */
  secret: string | undefined;
}

export interface MiniAuthServer {
  issuer: string;
  /** Every request to the token endpoint, in order. */
  tokenRequests: TokenRequest[];
  /** Whether the token answers carry `expires_in` (seconds); undefined: they carry none. */
  expiresIn: number | undefined;
  /** Whether authorization-code grants get a refresh token. */
  issueRefreshTokens: boolean;
  /** The subject an access token is valid for, if it is (the upstream asks this). */
  subjectOf(token: string): string | undefined;
  /**
   * Holds the answers to the next refresh-token requests, granted already, until `release`; `arrived` settles
   * when the first of them is here. For races with what a person does meanwhile (a disconnect).
   */
  holdRefreshes(): { arrived: Promise<void>; release(): void };
  /** Revokes every access token issued so far; refresh tokens stay valid. Answers how many. */
  revokeAccessTokens(): number;
  /** Plays the person: follows the authorization URL and answers the redirect back to the client. */
  consent(authorizationUrl: string, account?: string): Promise<URL>;
  close(): Promise<void>;
}

export interface MiniClient {
  client_id: string;
  client_secret?: string;
  redirect_uris?: string[];
}

function listen(server: http.Server, host: string): Promise<number> {
  return new Promise((resolve) => server.listen(0, host, () => resolve((server.address() as AddressInfo).port)));
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

async function bodyOf(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

const random = () => randomBytes(24).toString('base64url');

export async function startMiniAuthServer(
  options: { clients?: MiniClient[]; expiresIn?: number; issueRefreshTokens?: boolean } = {},
): Promise<MiniAuthServer> {
  const server = http.createServer();
  const port = await listen(server, '127.0.0.1');
  const issuer = `http://127.0.0.1:${port}`;
  const clients = new Map<string, MiniClient>((options.clients ?? []).map((c) => [c.client_id, c]));
  const codes = new Map<
    string,
    { clientId: string; redirectUri: string; challenge: string; scope: string; sub: string }
  >();
  const accessTokens = new Map<string, string>();
  const refreshTokens = new Map<string, { clientId: string; sub: string; scope: string }>();
  const state: Pick<MiniAuthServer, 'expiresIn' | 'issueRefreshTokens' | 'tokenRequests'> = {
    expiresIn: options.expiresIn,
    issueRefreshTokens: options.issueRefreshTokens ?? true,
    tokenRequests: [],
  };

  let held: { arrive(): void; gate: Promise<void> } | undefined;

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  const issue = (res: http.ServerResponse, sub: string, scope: string, refresh?: string) => {
    const accessToken = random();
    accessTokens.set(accessToken, sub);
    json(res, 200, {
      access_token: accessToken,
      token_type: 'Bearer',
      scope,
      ...(state.expiresIn !== undefined && { expires_in: state.expiresIn }),
      ...(refresh !== undefined && { refresh_token: refresh }),
    });
  };

  server.on('request', (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', issuer);
      if (
        url.pathname === '/.well-known/oauth-authorization-server' ||
        url.pathname === '/.well-known/openid-configuration'
      ) {
        return json(res, 200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          registration_endpoint: `${issuer}/register`,
          revocation_endpoint: `${issuer}/revoke`,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
        });
      }
      if (url.pathname === '/register' && req.method === 'POST') {
        const asked = JSON.parse(await bodyOf(req)) as {
          redirect_uris?: string[];
          token_endpoint_auth_method?: string;
        };
        const client: MiniClient = {
          client_id: random(),
          ...(asked.token_endpoint_auth_method !== 'none' && { client_secret: random() }),
          ...(asked.redirect_uris && { redirect_uris: asked.redirect_uris }),
        };
        clients.set(client.client_id, client);
        return json(res, 201, { ...asked, ...client });
      }
      if (url.pathname === '/authorize') {
        const q = url.searchParams;
        const client = clients.get(q.get('client_id') ?? '');
        const redirectUri = q.get('redirect_uri') ?? '';
        if (!client || (client.redirect_uris && !client.redirect_uris.includes(redirectUri))) {
          return json(res, 400, { error: 'invalid_request' });
        }
        if (q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge')) {
          return json(res, 400, { error: 'invalid_request' });
        }
        const code = random();
        codes.set(code, {
          clientId: client.client_id,
          redirectUri,
          challenge: q.get('code_challenge') ?? '',
          scope: q.get('scope') ?? MINI_SCOPE,
          sub: q.get('test_account') ?? 'alice',
        });
        const back = new URL(redirectUri);
        back.searchParams.set('code', code);
        const requestState = q.get('state');
        if (requestState !== null) back.searchParams.set('state', requestState);
        back.searchParams.set('iss', issuer);
        res.writeHead(302, { location: back.href });
        return res.end();
      }
      if (url.pathname === '/token' && req.method === 'POST') {
        const form = new URLSearchParams(await bodyOf(req));
        let clientId = form.get('client_id') ?? undefined;
        let secret = form.get('client_secret') ?? undefined;
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        if (basic) {
          const [id = '', pass = ''] = Buffer.from(basic, 'base64').toString().split(':');
          clientId = decodeURIComponent(id.replace(/\+/g, ' '));
          secret = decodeURIComponent(pass.replace(/\+/g, ' '));
        }
        const grantType = form.get('grant_type') ?? '?';
        state.tokenRequests.push({ grantType, clientId, secret });
        const client = clients.get(clientId ?? '');
        if (!client || (client.client_secret !== undefined && client.client_secret !== secret)) {
          return json(res, 401, { error: 'invalid_client' });
        }
        if (grantType === 'authorization_code') {
          const found = codes.get(form.get('code') ?? '');
          codes.delete(form.get('code') ?? '');
          const verifier = form.get('code_verifier') ?? '';
          const challenge = createHash('sha256').update(verifier).digest('base64url');
          if (
            !found ||
            found.clientId !== client.client_id ||
            found.redirectUri !== form.get('redirect_uri') ||
            found.challenge !== challenge
          ) {
            return json(res, 400, { error: 'invalid_grant' });
          }
          let refresh: string | undefined;
          if (state.issueRefreshTokens) {
            refresh = random();
            refreshTokens.set(refresh, { clientId: client.client_id, sub: found.sub, scope: found.scope });
          }
          return issue(res, found.sub, found.scope, refresh);
        }
        if (grantType === 'refresh_token') {
          const found = refreshTokens.get(form.get('refresh_token') ?? '');
          if (!found || found.clientId !== client.client_id) return json(res, 400, { error: 'invalid_grant' });
          // Granted, the answer held on its way (a revocation meanwhile comes too late for it).
          if (held) {
            held.arrive();
            await held.gate;
          }
          return issue(res, found.sub, found.scope);
        }
        // A client registered without a secret here takes any (the server of a hostile upstream keeps it).
        if (grantType === 'client_credentials' && secret !== undefined) {
          return issue(res, client.client_id, form.get('scope') ?? MINI_SCOPE);
        }
        return json(res, 400, { error: 'unsupported_grant_type' });
      }
      if (url.pathname === '/revoke' && req.method === 'POST') {
        const token = new URLSearchParams(await bodyOf(req)).get('token') ?? '';
        accessTokens.delete(token);
        refreshTokens.delete(token);
        res.writeHead(200).end();
        return;
      }
      json(res, 404, { error: 'not_found' });
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });

  return {
    issuer,
    get tokenRequests() {
      return state.tokenRequests;
    },
    get expiresIn() {
      return state.expiresIn;
    },
    set expiresIn(value: number | undefined) {
      state.expiresIn = value;
    },
    get issueRefreshTokens() {
      return state.issueRefreshTokens;
    },
    set issueRefreshTokens(value: boolean) {
      state.issueRefreshTokens = value;
    },
    subjectOf: (token) => accessTokens.get(token),
    holdRefreshes() {
      let arrive = () => {};
      let release = () => {};
      const arrived = new Promise<void>((resolve) => {
        arrive = resolve;
      });
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      held = { arrive, gate };
      return {
        arrived,
        release: () => {
          held = undefined;
          release();
        },
      };
    },
    revokeAccessTokens() {
      const count = accessTokens.size;
      accessTokens.clear();
      return count;
    },
    async consent(authorizationUrl, account = 'alice') {
      const url = new URL(authorizationUrl);
      if (url.origin !== issuer) throw new Error(`not this authorization server: ${url.origin}`);
      url.searchParams.set('test_account', account);
      const response = await fetch(url, { redirect: 'manual' });
      await response.arrayBuffer();
      const location = response.headers.get('location');
      if (!location) throw new Error(`authorization refused (${response.status})`);
      return new URL(location);
    },
    close: () => closeServer(server),
  };
}

export interface MiniUpstream {
  url: string;
  /** The authorization server the protected-resource metadata names; settable (an upstream turning hostile). */
  authorizationServer: MiniAuthServer;
  /** Requests answered 401 (discovery probes and refused tokens). */
  unauthorized: number;
  /** Tool calls that reached the upstream, with the subject of the token they carried. */
  calls: string[];
  close(): Promise<void>;
}

/** An MCP upstream (one `whoami` tool) whose every request needs an access token its authorization server knows. */
export async function startMiniUpstream(as: MiniAuthServer): Promise<MiniUpstream> {
  const server = http.createServer();
  const port = await listen(server, '127.0.0.2');
  const origin = `http://127.0.0.2:${port}`;
  const url = `${origin}/mcp`;
  const prm = `${origin}/.well-known/oauth-protected-resource/mcp`;
  const state = { as, unauthorized: 0, calls: [] as string[], sub: '' };
  const handler = createMcpHandler(
    () => {
      const mcp = new McpServer({ name: 'mini', version: '1.0.0' });
      mcp.registerTool('whoami', { description: 'Says whose token it was.', inputSchema: z.object({}) }, async () => {
        // Tests call one at a time: the token checked just before this request is the caller's.
        state.calls.push(state.sub);
        return { content: [{ type: 'text', text: state.sub }] };
      });
      return mcp;
    },
    { legacy: 'stateless' },
  );
  const node = toNodeHandler(handler);
  server.on('request', (req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', origin).pathname;
      if (path.startsWith('/.well-known/oauth-protected-resource')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ resource: url, authorization_servers: [state.as.issuer], scopes_supported: [MINI_SCOPE] }),
        );
        return;
      }
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      const sub = token === undefined ? undefined : state.as.subjectOf(token);
      if (sub === undefined) {
        state.unauthorized += 1;
        res.writeHead(401, {
          'www-authenticate': `Bearer resource_metadata="${prm}", scope="${MINI_SCOPE}"`,
          'content-type': 'application/json',
        });
        res.end(JSON.stringify({ error: 'invalid_token' }));
        return;
      }
      state.sub = sub;
      await node(req, res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  return {
    url,
    get authorizationServer() {
      return state.as;
    },
    set authorizationServer(value: MiniAuthServer) {
      state.as = value;
    },
    get unauthorized() {
      return state.unauthorized;
    },
    get calls() {
      return state.calls;
    },
    close: async () => {
      await handler.close();
      await closeServer(server);
    },
  };
}
