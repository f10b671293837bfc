/**
 * A person's groups bound their agents' view: a group the person leaves leaves the tokens they own, and a change
 * of a token's groups ends the 2025-era sessions opened with the old view on every path, the SDK's included (the
 * session's server was built with the principal of its initialize). A real
 * gateway on loopback, a real upstream, SDK clients of both eras.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

describe("a person's groups bound their agents", () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  const clients: Client[] = [];

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'ledger' } });
    await gw.request('PATCH', '/api/mcp/servers/ledger/tools', { body: { mode: 'all', defaultTier: 'allow' } });
    expect(
      (await gw.request('PATCH', '/api/mcp/servers/ledger/exposure', { body: { groups: ['fin'] } })).statusCode,
    ).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/ledger/test')).json().ok).toBe(true);
    base = await gw.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
  });

  const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name);

  it('a member who leaves a group takes it from their agents at once, open 2025 sessions included', async () => {
    const member = (await gw.request('POST', '/api/users', { body: { name: 'una', groups: ['eng', 'fin'] } })).json();
    const token = (
      await gw.request('POST', '/api/tokens', {
        body: { role: 'agent', name: 'una-agent', userId: member.id, groups: ['eng', 'fin'] },
      })
    ).json().token as string;
    const modern = await connectAgent(`${base}/mcp`, token);
    const legacy = await connectAgent(`${base}/mcp`, token, { era: 'legacy' });
    clients.push(modern, legacy);
    expect(await names(modern)).toContain('ledger__echo');
    expect(await names(legacy)).toContain('ledger__echo');

    expect((await gw.request('PATCH', `/api/users/${member.id}`, { body: { groups: ['eng'] } })).statusCode).toBe(200);
    // Before: the token kept `fin` (only its role followed its owner), and so did the open session.
    expect(await names(modern)).not.toContain('ledger__echo');
    await expect(modern.callTool({ name: 'ledger__echo', arguments: { text: 'x' } })).rejects.toThrow(/not found/);
    await expect(legacy.listTools()).rejects.toThrow();
    const again = await connectAgent(`${base}/mcp`, token, { era: 'legacy' });
    clients.push(again);
    expect(await names(again)).not.toContain('ledger__echo');
    expect(upstream.log.count('tools/call')).toBe(0);
  });

  it('a group a token was given that its owner never held stays (an admin chose it)', async () => {
    const member = (await gw.request('POST', '/api/users', { body: { name: 'mo', groups: ['eng'] } })).json();
    const token = (
      await gw.request('POST', '/api/tokens', {
        body: { role: 'agent', name: 'mo-agent', userId: member.id, groups: ['fin'] },
      })
    ).json();
    expect((await gw.request('PATCH', `/api/users/${member.id}`, { body: { groups: ['ops'] } })).statusCode).toBe(200);
    const client = await connectAgent(`${base}/mcp`, token.token);
    clients.push(client);
    expect(await names(client)).toContain('ledger__echo');
    expect(
      (await gw.request('GET', '/api/tokens')).json().tokens.find((t: { id: string }) => t.id === token.id).groups,
    ).toEqual(['fin']);
  });
});
