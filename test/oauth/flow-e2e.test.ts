/**
 * A client that knows only the MCP authorization spec connects with no token pasted anywhere: the
 * SDK's own OAuth client meets the 401, reads the protected-resource and authorization-server
 * metadata, registers (dynamic registration, or a Client ID Metadata Document as its client_id),
 * sends the person to the consent page (posted headlessly by a person signed in with an operator
 * token), exchanges the code, calls a tool through the hub to a real SDK server, refreshes, revokes,
 * and is refused again. Both protocol eras.
 */
import type http from 'node:http';
import { auth, Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../fixtures/http.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { consent, postForm, TestOAuthProvider } from '../helpers/oauth.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

describe('OAuth end to end with the SDK client', () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let documents: Listening;
  let base: string;
  let person: { id: string; token: string };
  const redirect = 'http://127.0.0.1:9/callback';

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBe(201);
    await gw.request('PATCH', '/api/mcp/servers/files/tools', { body: { allow: ['echo'], defaultTier: 'blocked' } });
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    person = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'ada' } })).json();
    // The metadata document of a client known by URL, on an address the egress test seam treats as public.
    documents = await listen((req: http.IncomingMessage, res: http.ServerResponse) => {
      const body = JSON.stringify({
        client_id: `${documents.origin}${req.url}`,
        client_name: 'Document agent',
        redirect_uris: ['http://127.0.0.1/callback'],
        token_endpoint_auth_method: 'none',
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    }, PUBLIC_TEST_HOST);
    base = await gw.listen();
  });
  const clients: Client[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await documents.close();
    await upstream.close();
    await gw.close();
  });

  const connect = async (provider: TestOAuthProvider, era: 'modern' | 'legacy') => {
    const client = new Client(
      { name: `oauth-${era}`, version: '1.0.0' },
      era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
    );
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
    clients.push(client);
    await client.connect(transport);
    return { client, transport };
  };

  const cases = [
    { registration: 'dynamic registration', era: 'modern' as const },
    { registration: 'dynamic registration', era: 'legacy' as const },
    { registration: 'metadata document', era: 'modern' as const },
    { registration: 'metadata document', era: 'legacy' as const },
  ];

  it.each(cases)(
    '$registration, $era era: 401 → consent → tools/call → refresh → revoke → 401',
    async ({ registration, era }) => {
      const provider =
        registration === 'metadata document'
          ? // The SDK only offers https metadata URLs on its own; a client may name its document as its client_id.
            new TestOAuthProvider('http://127.0.0.1:43123/callback', `${documents.origin}/clients/${era}.json`)
          : new TestOAuthProvider(redirect);

      // 1. No token: the SDK meets the 401, discovers, registers, and asks the person.
      const first = new Client(
        { name: 'first', version: '1.0.0' },
        era === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {},
      );
      const firstTransport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
      clients.push(first);
      await expect(first.connect(firstTransport)).rejects.toBeInstanceOf(UnauthorizedError);
      const authorizationUrl = provider.authorizationUrl as URL;
      expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${base}/authorize`);
      expect(authorizationUrl.searchParams.get('resource')).toBe(`${base}/mcp`);
      expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
      if (registration === 'dynamic registration') expect(String(provider.info?.client_id)).toMatch(/^gh_dyn_/);

      // 2. The person approves; the SDK exchanges the code.
      const callback = await consent(base, authorizationUrl, person.token);
      expect(callback.get('iss')).toBe(base);
      await firstTransport.finishAuth(callback);
      const tokens = provider.saved as Json;
      expect(tokens.token_type).toBe('Bearer');
      expect(tokens.expires_in).toBeLessThanOrEqual(300);
      expect(tokens.refresh_token).toBeTruthy();

      // 3. Connected: a tool call through the hub reaches the real upstream; the bearer never does.
      const { client } = await connect(provider, era);
      const result = (await client.callTool({ name: 'files__echo', arguments: { text: `hi ${era}` } })) as Json;
      expect(result.content[0].text).toContain(`hi ${era}`);
      const upstreamHeaders = upstream.log.records.map((r) => r.headers.authorization ?? '');
      expect(upstreamHeaders.some((h) => h.includes(tokens.access_token))).toBe(false);

      // 4. Refresh: the SDK's own refresh replaces both tokens; the new access token works, the old refresh token is spent.
      const oldRefresh = tokens.refresh_token as string;
      expect(await auth(provider, { serverUrl: new URL(`${base}/mcp`) })).toBe('AUTHORIZED');
      const renewed = provider.saved as Json;
      expect(renewed.refresh_token).not.toBe(oldRefresh);
      expect(renewed.access_token).not.toBe(tokens.access_token);
      const again = (await client.callTool({ name: 'files__echo', arguments: { text: 'renewed' } })) as Json;
      expect(again.content[0].text).toContain('renewed');

      // 5. Revoke the refresh token (RFC 7009): its family ends, so the access token is refused at once.
      const clientId = String((provider.clientInformation() as Json).client_id);
      const revoked = await postForm(`${base}/revoke`, { token: renewed.refresh_token, client_id: clientId });
      expect(revoked.status).toBe(200);
      const refused = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${renewed.access_token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
      expect(refused.headers.get('www-authenticate')).toContain(
        `resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
      );

      // The grant was recorded for the person and the client, with the person's groups.
      const grants = (await gw.request('GET', '/api/oauth/grants')).json().grants as Json[];
      expect(grants).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            subject: `token:${person.id}`,
            clientId,
            resource: `${base}/mcp`,
            groups: ['default'],
          }),
        ]),
      );
    },
  );
});
