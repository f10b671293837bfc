/**
 * A per-user server's resources, prompts and instructions through the hub: each person's agent sees their
 * own account's, never what the handshake discovered under the operator's account. The upstream (official
 * SDK, behind a real authorization server) answers each account with its own documents, prompts and
 * instructions. Alice (an operator) connects and tests the server; Bob's agent, in both eras, lists nothing
 * of hers: none at all before he connects, his own after (paged through the hub's stable cursors), and only
 * the prompts pinned as they stand. `/mcp/s/{server}` passes on no account's instructions.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { encodeCursor } from '../../src/surfaces/cursor.js';
import { type AuthServer, SCOPE, startAuthServer } from '../fixtures/oauth.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { connectIn, installPerUser, person, signedIn } from './browser.js';

const PUBLIC_URL = 'http://127.0.0.1:7';
const NOTES = 5;

/** A Drive-like upstream: every account (the token's subject) has its own notes, prompt and instructions. */
async function startWorkspace(issuer: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer();
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.2', () => resolve((server.address() as AddressInfo).port)),
  );
  const origin = `http://127.0.0.2:${port}`;
  const url = `${origin}/mcp`;
  const prm = `${origin}/.well-known/oauth-protected-resource/mcp`;
  const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  const account = new AsyncLocalStorage<string>();
  const handler = createMcpHandler(
    () => {
      const sub = account.getStore() ?? '';
      const mcp = new McpServer({ name: 'workspace', version: '1.0.0' }, { instructions: `Workspace of ${sub}.` });
      mcp.registerTool(
        'whoami',
        { description: 'Says whose account this is.', inputSchema: z.object({}) },
        async () => ({
          content: [{ type: 'text', text: sub }],
        }),
      );
      for (let i = 0; i < NOTES; i++) {
        mcp.registerResource(
          `note-${i}`,
          `doc://${sub}/note-${i}`,
          { description: `${sub}'s private note ${i}`, mimeType: 'text/plain' },
          async (uri) => ({ contents: [{ uri: uri.href, text: `${sub} wrote note ${i}` }] }),
        );
      }
      const messages = async () => ({
        messages: [{ role: 'user' as const, content: { type: 'text' as const, text: sub } }],
      });
      mcp.registerPrompt('summarize', { description: 'Summarizes a note.' }, messages);
      mcp.registerPrompt(`${sub}-notes`, { description: `The notes of ${sub}.` }, messages);
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
        res.end(JSON.stringify({ resource: url, authorization_servers: [issuer], scopes_supported: [SCOPE] }));
        return;
      }
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      let sub: string;
      try {
        if (!token) throw new Error('no token');
        sub = String((await jwtVerify(token, jwks, { issuer, audience: url })).payload.sub ?? '');
      } catch {
        res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${prm}", scope="${SCOPE}"` });
        res.end();
        return;
      }
      await account.run(sub, () => node(req, res));
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  return {
    url,
    close: async () => {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("upstream OAuth, per-user: resources, prompts and instructions are the caller's own", () => {
  let as: AuthServer;
  let upstream: Awaited<ReturnType<typeof startWorkspace>>;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    as = await startAuthServer();
    upstream = await startWorkspace(as.issuer);
    // Two items a page: every list through the hub is paged.
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL, GATEHOUSE_LIST_PAGE_SIZE: '2' });
    base = await gw.listen();
  });
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await gw.close();
    await upstream.close();
    await as.close();
  });

  async function agent(path: string, token: string, era: Era): Promise<Client> {
    const client = await connectAgent(`${base}${path}`, token, { era });
    clients.push(client);
    return client;
  }

  /**
   * resources/list as agents call it (the SDK client walks every page itself), and page by page (a cursor
   * after the empty key asks for the raw first page): each page at most the page size, the same items.
   */
  async function allResources(client: Client): Promise<{ uris: string[]; text: string; pages: number }> {
    const whole = (await client.listResources({}, { cacheMode: 'bypass' })).resources;
    const uris: string[] = [];
    let cursor: string | undefined = encodeCursor('resources', '');
    let pages = 0;
    do {
      const page = await client.listResources({ cursor }, { cacheMode: 'bypass' });
      expect(page.resources.length).toBeLessThanOrEqual(2);
      uris.push(...page.resources.map((r) => r.uri));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 20);
    expect(uris).toEqual(whole.map((r) => r.uri).sort());
    return { uris, text: JSON.stringify(whole), pages };
  }

  async function allPrompts(client: Client): Promise<string[]> {
    const names: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const page = await client.listPrompts(cursor ? { cursor } : {}, { cacheMode: 'bypass' });
      names.push(...page.prompts.map((p) => p.name));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    return names.sort();
  }

  it('lists each person their own account, never the operator’s, in both eras', async () => {
    await installPerUser(gw, 'team', upstream.url, { toolPolicy: { allow: ['whoami'] } });

    // Alice, an operator, connects her own account and tests the server with it.
    const alice = await person(gw, 'alice', { role: 'admin', groups: ['default'] });
    const aliceAgent = alice.token;
    const created = await gw.request('POST', '/api/tokens', {
      body: { role: 'operator', name: 'alice-operator', userId: alice.id },
    });
    expect(created.statusCode, created.body).toBe(201);
    const aliceOps = created.json().token as string;
    const started = await gw.request('POST', '/api/users/me/grants/team/connect', { token: aliceAgent });
    expect(started.statusCode, started.body).toBe(200);
    const aliceBrowser = await signedIn(gw, aliceOps);
    expect((await connectIn(aliceBrowser, as, started.json().authorizationUrl, 'alice-at-upstream')).statusCode).toBe(
      200,
    );
    const tested = (await gw.request('POST', '/api/mcp/servers/team/test', { token: aliceOps })).json();
    expect(tested.ok, JSON.stringify(tested)).toBe(true);

    const bob = await person(gw, 'bob', { groups: ['default'] });
    for (const era of ['modern', 'legacy'] as Era[]) {
      // Bob has not connected: nothing of that server, and above all nothing of Alice's.
      const b = await agent('/mcp', bob.token, era);
      const listed = await allResources(b);
      expect(listed.text).not.toContain('alice');
      expect(listed.uris).toEqual([]);
      expect(await allPrompts(b)).toEqual([]);
      const single = await agent('/mcp/s/team', bob.token, era);
      expect(single.getInstructions() ?? '').not.toContain('alice');
      expect((await allResources(single)).uris).toEqual([]);
    }

    // Bob connects his own account: from then on he lists his own notes, paged, and never Alice's.
    const own = await gw.request('POST', '/api/users/me/grants/team/connect', { token: bob.token });
    expect(own.statusCode, own.body).toBe(200);
    expect(
      (await connectIn(await signedIn(gw, bob.token), as, own.json().authorizationUrl, 'bob-at-upstream')).statusCode,
    ).toBe(200);
    for (const era of ['modern', 'legacy'] as Era[]) {
      const b = await agent('/mcp', bob.token, era);
      const listed = await allResources(b);
      expect(listed.text).not.toContain('alice');
      expect(listed.uris).toHaveLength(NOTES);
      expect(new Set(listed.uris).size).toBe(NOTES);
      expect(listed.pages).toBe(Math.ceil(NOTES / 2));
      expect(listed.uris.every((uri) => uri.includes('bob-at-upstream'))).toBe(true);
      // What is listed reads, from his account.
      const read = await b.readResource({ uri: listed.uris[0] as string });
      expect(JSON.stringify(read.contents)).toContain('bob-at-upstream wrote note');
      // Only prompts pinned as they stand: his own unreviewed one is not listed, Alice's never.
      expect(await allPrompts(b)).toEqual(['team__summarize']);

      const single = await agent('/mcp/s/team', bob.token, era);
      expect(single.getInstructions() ?? '').not.toContain('alice');
      const direct = await allResources(single);
      expect(direct.uris.sort()).toEqual(
        Array.from({ length: NOTES }, (_, i) => `doc://bob-at-upstream/note-${i}`).sort(),
      );

      // Alice's own agent lists her own notes and prompts.
      const a = await agent('/mcp', aliceAgent, era);
      const hers = await allResources(a);
      expect(hers.uris).toHaveLength(NOTES);
      expect(hers.text).not.toContain('bob');
      expect(await allPrompts(a)).toEqual(['team__alice-at-upstream-notes', 'team__summarize']);
    }
  });
});
