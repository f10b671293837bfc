import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';

describeEachStore('control plane', (target) => {
  let gw: TestGateway;
  beforeEach(async () => {
    gw = await startTestGateway(target);
  });
  afterEach(async () => gw.close());

  it('serves /healthz publicly and /info to any valid token', async () => {
    expect((await gw.request('GET', '/healthz', { token: null })).json()).toEqual({ status: 'ok' });
    expect((await gw.request('GET', '/info', { token: null })).statusCode).toBe(401);
    const info = (await gw.request('GET', '/info')).json();
    expect(info).toMatchObject({
      name: 'gatehouse',
      version: expect.any(String),
      capabilities: ['registry', 'hub', 'memory'],
    });
    await gw.request('PATCH', '/api/settings', { body: { 'mcp.hubEnabled': false } });
    expect((await gw.request('GET', '/info')).json().capabilities).toEqual(['registry', 'memory']);
  });

  it('creates tokens shown once, lists them without the token, and revokes them on the next request', async () => {
    const created = await gw.request('POST', '/api/tokens', {
      body: { role: 'agent', name: 'claude-laptop', groups: ['a', 'b'] },
    });
    expect(created.statusCode).toBe(201);
    const agent = created.json();
    expect(agent).toMatchObject({
      name: 'claude-laptop',
      role: 'agent',
      groups: ['a', 'b'],
      token: expect.stringMatching(/^gh_/),
    });

    const listed = await gw.request('GET', '/api/tokens');
    expect(listed.json()).toMatchObject({ count: 2, total: 2 });
    expect(listed.body).not.toContain(agent.token);
    expect(listed.body).not.toContain(TEST_ADMIN_TOKEN);

    expect((await gw.request('GET', '/info', { token: agent.token })).statusCode).toBe(200);
    expect((await gw.request('GET', '/api/tokens', { token: agent.token })).statusCode).toBe(403);
    expect((await gw.request('DELETE', `/api/tokens/${agent.id}`)).json()).toEqual({ revoked: agent.id });
    expect((await gw.request('GET', '/info', { token: agent.token })).statusCode).toBe(401);
    expect((await gw.request('DELETE', `/api/tokens/${agent.id}`)).statusCode).toBe(404);

    const limited = await gw.request('POST', '/api/tokens', {
      body: { role: 'agent', name: 'limited', rateLimit: 10 },
    });
    const updated = await gw.request('PATCH', `/api/tokens/${limited.json().id}`, { body: { maxConcurrent: 2 } });
    expect(updated.json()).toMatchObject({ rateLimit: 10, maxConcurrent: 2 });
    const bad = await gw.request('POST', '/api/tokens', { body: { role: 'root', name: 'x' } });
    expect(bad.json().error).toMatchObject({
      code: 'validation_error',
      issues: [expect.objectContaining({ path: 'body.role' })],
    });
    const opGroups = await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'x', groups: ['a'] } });
    expect(opGroups.statusCode).toBe(400);
  });

  it('reads and patches settings, refusing unknown keys and values above a scope maximum', async () => {
    const settings = (await gw.request('GET', '/api/settings')).json().settings;
    expect(settings).toMatchObject({
      'mcp.hubEnabled': true,
      'mcp.adminEnabled': false,
      'mcp.scope.servers': 'off',
      'audit.payloads': 'metadata',
      'hub.rateLimit': 600,
    });
    const patched = await gw.request('PATCH', '/api/settings', {
      body: { 'mcp.adminEnabled': true, 'mcp.scope.audit': 'read' },
    });
    expect(patched.json().settings).toMatchObject({ 'mcp.adminEnabled': true, 'mcp.scope.audit': 'read' });
    expect((await gw.request('PATCH', '/api/settings', { body: { 'mcp.scope.audit': 'write' } })).statusCode).toBe(400);
    expect((await gw.request('PATCH', '/api/settings', { body: { 'hub.rateLimit': 0 } })).statusCode).toBe(400);
    const unknown = await gw.request('PATCH', '/api/settings', { body: { 'mcp.everything': true } });
    expect(unknown.json().error).toMatchObject({
      code: 'validation_error',
      issues: [expect.objectContaining({ path: 'mcp.everything' })],
    });
    // Nothing of a refused patch was applied.
    expect((await gw.request('GET', '/api/settings')).json().settings['mcp.scope.audit']).toBe('read');
    const operator = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'op' } })).json();
    expect((await gw.request('GET', '/api/settings', { token: operator.token })).statusCode).toBe(200);
    expect(
      (await gw.request('PATCH', '/api/settings', { token: operator.token, body: { 'mcp.hubEnabled': false } }))
        .statusCode,
    ).toBe(403);
  });

  it('survives hostile bodies: malformed JSON, wrong types, __proto__, oversized', async () => {
    const raw = (payload: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
      gw.gateway.app.inject({
        method: 'POST',
        url: '/api/tokens',
        payload,
        headers: { ...headers, authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      });
    expect((await raw('{"role": ')).json().error.code).toBe('validation_error');
    expect((await raw('{"role": 1, "name": []}')).json().error.code).toBe('validation_error');
    expect((await raw('{"role":"agent","name":"x","__proto__":{"admin":true}}')).statusCode).toBe(400);
    expect((await raw('{"role":"agent","name":"x","constructor":{"prototype":{"x":1}}}')).statusCode).toBe(400);
    expect((await raw('role=agent', { 'content-type': 'text/plain' })).statusCode).toBe(415);
    const big = await raw(JSON.stringify({ role: 'agent', name: 'x'.repeat(3 * 1024 * 1024) }));
    expect(big.statusCode).toBe(413);
    expect(big.json().error.code).toBe('payload_too_large');
    expect((await gw.request('GET', '/healthz', { token: null })).statusCode).toBe(200);
  });

  it('streams events over SSE and resumes from Last-Event-ID', async () => {
    await gw.gateway.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = gw.gateway.app.server.address() as AddressInfo;
    const frames: string[] = [];
    const request = http.get(`http://127.0.0.1:${port}/api/mcp/stream`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const response = await new Promise<http.IncomingMessage>((resolve) => request.once('response', resolve));
    expect(response.headers['content-type']).toContain('text/event-stream');
    response.on('data', (chunk: Buffer) => frames.push(chunk.toString()));
    await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'streamed' } });
    await gw.request('PATCH', '/api/settings', { body: { 'hub.rateLimit': 100 } });
    for (let i = 0; i < 200 && !frames.join('').includes('settings.changed'); i++)
      await new Promise((r) => setTimeout(r, 10));
    request.destroy();
    const text = frames.join('');
    expect(text).toMatch(/id: \d+\nevent: token\.changed\ndata: \{.*"change":"created"/);
    expect(text).toContain('event: settings.changed');

    const firstId = Number(/id: (\d+)\nevent: token\.changed/.exec(text)?.[1]);
    const resumed: string[] = [];
    const again = http.get(`http://127.0.0.1:${port}/api/mcp/stream`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'last-event-id': String(firstId) },
    });
    const second = await new Promise<http.IncomingMessage>((resolve) => again.once('response', resolve));
    second.on('data', (chunk: Buffer) => resumed.push(chunk.toString()));
    for (let i = 0; i < 200 && !resumed.join('').includes('settings.changed'); i++)
      await new Promise((r) => setTimeout(r, 10));
    again.destroy();
    expect(resumed.join('')).toContain('event: settings.changed');
    expect(resumed.join('')).not.toContain(`id: ${firstId}\n`);
  });
});
