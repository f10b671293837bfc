/**
 * Toolset names are not enumerable by a caller who may not use them: `/mcp/t/{name}` of a toolset none of
 * whose servers the caller's groups see answers exactly as a name that does not exist (the rule of
 * `/mcp/s/{id}` for a server outside the caller's groups), in both protocol eras, over raw HTTP and through
 * SDK agents; and the REST routes under `/api/toolsets` answer an agent or a member the same for any name.
 * A real gateway on loopback, two SDK-built upstreams on 127.0.0.2: `calc` exposed to `default`, `vault` to
 * `finance`.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const MODERN = '2026-07-28';
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'probe', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** What a probe saw: everything an agent could tell two names apart by. */
interface Seen {
  status: number;
  contentType: string | null;
  sessionId: string | null;
  body: string;
}

describe('toolset names are not enumerable', () => {
  let gw: TestGateway;
  let calc: McpFixture;
  let vault: McpFixture;
  let base: string;
  /** An agent in `default`: sees calc, not vault. */
  let agent: { token: string };
  /** An agent in `finance`: sees vault. */
  let banker: { token: string };
  const clients: Client[] = [];

  const api = async (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
    const response = await gw.request(method, url, body === undefined ? {} : { body });
    return { status: response.statusCode, body: response.json() as Json };
  };

  /** One raw request over loopback, as any HTTP client could send it. */
  const probe = async (path: string, token: string, era: Era): Promise<Seen> => {
    const headers: Record<string, string> = {
      authorization: `Bearer ${token}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    };
    const body =
      era === 'modern'
        ? { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: ENVELOPE } }
        : {
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
          };
    if (era === 'modern') {
      headers['mcp-protocol-version'] = MODERN;
      headers['mcp-method'] = 'tools/list';
    }
    const response = await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    return {
      status: response.status,
      contentType: response.headers.get('content-type'),
      sessionId: response.headers.get('mcp-session-id'),
      body: await response.text(),
    };
  };
  /** The same answer, but for the name itself (and a request id an implementation may echo). */
  const sameAnswer = (a: Seen, aName: string, b: Seen, bName: string) => {
    expect({ ...a, body: a.body.replaceAll(aName, '<name>') }).toEqual({
      ...b,
      body: b.body.replaceAll(bName, '<name>'),
    });
  };

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    calc = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['add', 'echo'] });
    vault = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['add', 'echo'] });
    for (const [id, fixture, groups] of [
      ['calc', calc, ['default']],
      ['vault', vault, ['finance']],
    ] as const) {
      expect((await api('POST', '/api/mcp/install', { url: fixture.url, id })).status).toBe(201);
      await api('PATCH', `/api/mcp/servers/${id}/tools`, { defaultTier: 'allow' });
      expect((await api('POST', `/api/mcp/servers/${id}/test`)).body.ok).toBe(true);
      expect((await api('PATCH', `/api/mcp/servers/${id}/exposure`, { groups: [...groups] })).status).toBe(200);
    }
    expect(
      (
        await api('POST', '/api/toolsets', {
          name: 'payroll',
          description: 'Payroll tools for the finance team.',
          tools: [{ server: 'vault', tool: 'add' }],
        })
      ).status,
    ).toBe(201);
    expect(
      (await api('POST', '/api/toolsets', { name: 'maths', tools: [{ server: 'calc', tool: 'add' }] })).status,
    ).toBe(201);
    agent = (await api('POST', '/api/tokens', { role: 'agent', name: 'default-agent' })).body as { token: string };
    banker = (await api('POST', '/api/tokens', { role: 'agent', name: 'banker', groups: ['finance'] })).body as {
      token: string;
    };
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await calc.close();
    await vault.close();
    await gw.close();
  });

  for (const era of ['modern', 'legacy'] as const) {
    it(`a toolset outside the caller's groups answers as an unknown name does, raw HTTP (${era})`, async () => {
      // Controls: each toolset is served to the agents whose groups see its servers.
      expect((await probe('/mcp/t/maths', agent.token, era)).status).toBe(200);
      expect((await probe('/mcp/t/payroll', banker.token, era)).status).toBe(200);

      const unknown = await probe('/mcp/t/no-such-set', agent.token, era);
      expect(unknown.status).toBe(404);
      const foreign = await probe('/mcp/t/payroll', agent.token, era);
      sameAnswer(foreign, 'payroll', unknown, 'no-such-set');
      // Nothing of the toolset (its description, its server) is in the answer.
      expect(foreign.body).not.toMatch(/Payroll tools|vault/);

      // The one rule, as servers have it: a server outside the caller's groups is an unknown id.
      const unknownServer = await probe('/mcp/s/no-such-server', agent.token, era);
      const foreignServer = await probe('/mcp/s/vault', agent.token, era);
      sameAnswer(foreignServer, 'vault', unknownServer, 'no-such-server');
      expect(foreign.status).toBe(foreignServer.status);
      sameAnswer(foreign, 'payroll', foreignServer, 'vault');
    });

    it(`an SDK agent cannot connect to a toolset outside its groups, as to an unknown one (${era})`, async () => {
      const errorOf = async (path: string) => {
        try {
          const client = await connectAgent(`${base}${path}`, agent.token, { era });
          clients.push(client);
          // Connected: a first request must still say nothing of the toolset.
          return { connected: true, tools: (await client.listTools()).tools.map((t) => t.name) };
        } catch (error) {
          return { connected: false, message: String((error as Error).message).replaceAll(path, '<path>') };
        }
      };
      const unknown = await errorOf('/mcp/t/no-such-set');
      expect(unknown.connected).toBe(false);
      expect(await errorOf('/mcp/t/payroll')).toEqual(unknown);
    });
  }

  it('a toolset with a server the caller sees is served; one whose servers it no longer sees stops being', async () => {
    // Mixed: one entry the agent sees, one it does not. Served, with only the visible tool.
    await api('PUT', '/api/toolsets/payroll', {
      tools: [
        { server: 'vault', tool: 'add' },
        { server: 'calc', tool: 'echo' },
      ],
    });
    const client = await connectAgent(`${base}/mcp/t/payroll`, agent.token, { era: 'modern' });
    clients.push(client);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['calc__echo', 'gatehouse__approval_status']);
    // The exposure narrows: the next request (same client) gets the unknown-name answer.
    await api('PATCH', '/api/mcp/servers/calc/exposure', { groups: ['finance'] });
    sameAnswer(
      await probe('/mcp/t/payroll', agent.token, 'modern'),
      'payroll',
      await probe('/mcp/t/no-such-set', agent.token, 'modern'),
      'no-such-set',
    );
    await expect(client.listTools()).rejects.toThrow();
  });

  it('a 2025 session opened on a toolset ends there once the caller no longer sees any of its servers', async () => {
    const client = await connectAgent(`${base}/mcp/t/maths`, agent.token, { era: 'legacy' });
    clients.push(client);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['calc__add', 'gatehouse__approval_status']);
    await api('PATCH', '/api/mcp/servers/calc/exposure', { groups: ['finance'] });
    await expect(client.listTools()).rejects.toThrow(/404|not found|No such MCP endpoint/i);
  });

  it('the REST routes answer an agent token and a member session the same for any toolset name', async () => {
    const asAgent = (method: 'GET' | 'PUT' | 'DELETE', url: string, body?: unknown) =>
      gw.request(method, url, { token: agent.token, ...(body !== undefined ? { body } : {}) });
    const replace = { tools: [{ server: 'calc', tool: 'add' }] };
    for (const [method, existing, missing, body] of [
      ['GET', '/api/toolsets/payroll', '/api/toolsets/no-such-set', undefined],
      ['PUT', '/api/toolsets/payroll', '/api/toolsets/no-such-set', replace],
      ['DELETE', '/api/toolsets/payroll', '/api/toolsets/no-such-set', undefined],
    ] as const) {
      const a = await asAgent(method, existing, body);
      const b = await asAgent(method, missing, body);
      expect(a.statusCode).toBe(403);
      expect({ status: a.statusCode, body: a.body.replaceAll('payroll', '<name>') }).toEqual({
        status: b.statusCode,
        body: b.body.replaceAll('no-such-set', '<name>'),
      });
    }
    expect((await asAgent('GET', '/api/toolsets')).statusCode).toBe(403);

    // A member (a person signed in to the dashboard with a token of theirs).
    const mia = (await api('POST', '/api/users', { name: 'mia', groups: ['default'] })).body as { id: string };
    const miaToken = (await api('POST', '/api/tokens', { role: 'agent', name: 'mia-laptop', userId: mia.id })).body as {
      token: string;
    };
    const signIn = await gw.request('POST', '/auth/session', { token: null, body: { token: miaToken.token } });
    expect(signIn.statusCode).toBe(200);
    const csrf = signIn.json().csrf as string;
    const cookie = ([] as string[])
      .concat(signIn.headers['set-cookie'] ?? [])
      .map((c) => c.split(';')[0])
      .join('; ');
    const asMember = (method: 'GET' | 'PUT' | 'DELETE', url: string, body?: unknown) =>
      gw.request(method, url, {
        token: null,
        headers: { cookie, 'x-gatehouse-csrf': csrf },
        ...(body !== undefined ? { body } : {}),
      });
    expect((await asMember('GET', '/auth/session')).json().principal.role).toBe('member');
    for (const [method, body] of [
      ['GET', undefined],
      ['PUT', replace],
      ['DELETE', undefined],
    ] as const) {
      const a = await asMember(method, '/api/toolsets/payroll', body);
      const b = await asMember(method, '/api/toolsets/no-such-set', body);
      expect(a.statusCode).toBe(403);
      expect({ status: a.statusCode, body: a.body.replaceAll('payroll', '<name>') }).toEqual({
        status: b.statusCode,
        body: b.body.replaceAll('no-such-set', '<name>'),
      });
    }
    // Still there, untouched.
    expect((await api('GET', '/api/toolsets/payroll')).body.tools).toHaveLength(1);
  });

  // A member may give its own agent tokens any tool view: /mcp's instructions must not tell names apart either.
  it("a toolView naming a toolset outside the caller's groups reads as an undefined one on /mcp", async () => {
    const instructionsFor = async (toolView: string) => {
      const minted = (await api('POST', '/api/tokens', { role: 'agent', name: toolView.replace(':', '-'), toolView }))
        .body as { token: string };
      const client = await connectAgent(`${base}/mcp`, minted.token, { era: 'modern' });
      clients.push(client);
      return client.getInstructions() ?? '';
    };
    const foreign = await instructionsFor('toolset:payroll');
    const unknown = await instructionsFor('toolset:no-such-set');
    expect(foreign.replaceAll('payroll', '<name>')).toBe(unknown.replaceAll('no-such-set', '<name>'));
  });
});
