/**
 * People end to end on a real gateway: users over REST, tokens they own, dashboard sessions (cookie
 * flags, CSRF refusal, logout), disabling a user (sessions, tokens and pending approvals end), the
 * user on audit rows and clients, and requester ≠ approver per user.
 */
import type { Client } from '@modelcontextprotocol/client';
import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

// biome-ignore lint/suspicious/noExplicitAny: assertions walk arbitrary JSON
type Json = Record<string, any>;

const structured = (result: unknown) => (result as { structuredContent: Json }).structuredContent;

/** The cookies a sign-in set, as `name → {value, attributes}`. */
function cookiesOf(response: LightMyRequestResponse): Record<string, { value: string; attrs: string[] }> {
  const raw = response.headers['set-cookie'];
  const list = Array.isArray(raw) ? raw : raw ? [raw] : [];
  return Object.fromEntries(
    list.map((line) => {
      const [pair = '', ...attrs] = String(line)
        .split(';')
        .map((p) => p.trim());
      const eq = pair.indexOf('=');
      return [pair.slice(0, eq), { value: pair.slice(eq + 1), attrs }];
    }),
  );
}

interface Session {
  cookie: string;
  csrf: string;
}

async function signIn(gw: TestGateway, token: string): Promise<Session> {
  const response = await gw.request('POST', '/auth/session', { token: null, body: { token } });
  expect(response.statusCode).toBe(200);
  const cookies = cookiesOf(response);
  const secret = cookies.gatehouse_session?.value as string;
  const csrf = cookies.gatehouse_csrf?.value as string;
  expect(response.json().csrf).toBe(csrf);
  return { cookie: `gatehouse_session=${secret}; gatehouse_csrf=${csrf}`, csrf };
}

const asSession = (
  gw: TestGateway,
  session: Session,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  options: { body?: unknown; csrf?: boolean } = {},
) =>
  gw.request(method, url, {
    token: null,
    ...(options.body !== undefined ? { body: options.body } : {}),
    headers: { cookie: session.cookie, ...(options.csrf === false ? {} : { 'x-gatehouse-csrf': session.csrf }) },
  });

describe('users, sessions and sign-in', () => {
  let gw: TestGateway;
  afterEach(async () => {
    await gw.close();
  });

  it('users over REST: create, list, get, patch, delete; typed refusals; admin only', async () => {
    gw = await startTestGateway(sqliteTarget);
    const created = await gw.request('POST', '/api/users', {
      body: { name: 'alice', email: 'alice@example.com', groups: ['eng'] },
    });
    expect(created.statusCode).toBe(201);
    const alice = created.json();
    expect(alice).toMatchObject({ name: 'alice', role: 'member', groups: ['eng'], disabled: false, source: 'api' });

    const dup = await gw.request('POST', '/api/users', { body: { name: 'alice' } });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error.code).toBe('user.name_taken');
    const bad = await gw.request('POST', '/api/users', { body: { name: 'x', role: 'agent' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('validation_error');
    const badEmail = await gw.request('POST', '/api/users', { body: { name: 'y', email: 'not-an-email' } });
    expect(badEmail.statusCode).toBe(400);

    const listed = (await gw.request('GET', '/api/users')).json();
    expect(listed).toMatchObject({ count: 1, total: 1 });
    expect(listed.users[0].id).toBe(alice.id);

    const owned = (
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'alice-laptop', userId: alice.id } })
    ).json();
    expect(owned.userId).toBe(alice.id);
    const noSuchOwner = await gw.request('POST', '/api/tokens', {
      body: { role: 'agent', name: 'x', userId: 'usr_nobody' },
    });
    expect(noSuchOwner.statusCode).toBe(400);

    const got = (await gw.request('GET', `/api/users/${alice.id}`)).json();
    expect(got.tokens).toEqual([{ id: owned.id, name: 'alice-laptop', role: 'agent' }]);
    expect((await gw.request('GET', '/api/users/usr_nobody')).json().error.code).toBe('not_found');

    // Whoever a token acts for, /api/users/me says so.
    const me = (await gw.request('GET', '/api/users/me', { token: owned.token })).json();
    expect(me.principal).toMatchObject({ id: owned.id, role: 'agent' });
    expect(me.user).toMatchObject({ id: alice.id, name: 'alice' });
    expect((await gw.request('GET', '/api/users/me')).json().user).toBeNull();

    // Admin only.
    const operator = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'op' } })).json();
    expect((await gw.request('GET', '/api/users', { token: operator.token })).statusCode).toBe(403);
    expect((await gw.request('GET', '/api/users', { token: null })).statusCode).toBe(401);

    const patched = await gw.request('PATCH', `/api/users/${alice.id}`, { body: { role: 'operator', email: null } });
    expect(patched.json()).toMatchObject({ role: 'operator', email: null });

    const deleted = await gw.request('DELETE', `/api/users/${alice.id}`);
    expect(deleted.json()).toEqual({ deleted: alice.id, revokedTokens: [owned.id] });
    expect((await gw.request('GET', '/info', { token: owned.token })).statusCode).toBe(401);
    expect((await gw.request('DELETE', `/api/users/${alice.id}`)).statusCode).toBe(404);

    const actions = (await gw.request('GET', '/api/audit?kind=admin')).json().events.map((e: Json) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['user.create', 'user.update', 'user.delete']));
  });

  it("a token acts within its owner's role: a demotion reaches it at once, and none is made above its owner", async () => {
    gw = await startTestGateway(sqliteTarget);
    const dave = (await gw.request('POST', '/api/users', { body: { name: 'dave', role: 'operator' } })).json();
    const token = (
      await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'dave-ops', userId: dave.id } })
    ).json().token;
    expect((await gw.request('GET', '/api/approvals', { token })).statusCode).toBe(200);

    await gw.request('PATCH', `/api/users/${dave.id}`, { body: { role: 'member' } });
    // A member decides no approvals and manages no servers: nor does the operator token dave still holds.
    expect((await gw.request('GET', '/api/approvals', { token })).statusCode).toBe(403);
    expect((await gw.request('GET', '/api/mcp/servers', { token })).statusCode).toBe(403);
    const me = (await gw.request('GET', '/api/users/me', { token })).json();
    expect(me.principal).toMatchObject({ role: 'member' });
    expect(me.user).toMatchObject({ id: dave.id, role: 'member' });

    for (const role of ['operator', 'admin']) {
      const above = await gw.request('POST', '/api/tokens', { body: { role, name: `x-${role}`, userId: dave.id } });
      expect(above.statusCode).toBe(400);
      expect(above.json().error).toMatchObject({ code: 'validation_error', issues: [{ path: 'body.role' }] });
    }
    expect(
      (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'dave-agent', userId: dave.id } }))
        .statusCode,
    ).toBe(201);

    // Promoted back: the same token is an operator's again.
    await gw.request('PATCH', `/api/users/${dave.id}`, { body: { role: 'operator' } });
    expect((await gw.request('GET', '/api/approvals', { token })).statusCode).toBe(200);
  });

  it("signing in with an agent's token opens a member's session at most, and revoking the token ends it", async () => {
    gw = await startTestGateway(sqliteTarget);
    const alice = (await gw.request('POST', '/api/users', { body: { name: 'alice', role: 'admin' } })).json();
    const tokenOf = async (role: string, name: string) =>
      (await gw.request('POST', '/api/tokens', { body: { role, name, userId: alice.id } })).json() as Json;
    const agent = await tokenOf('agent', 'claude');
    // Before: the agent's token (in a config file, in an agent's reach) signed in as alice, an admin.
    const asAgent = await signIn(gw, agent.token);
    expect((await asSession(gw, asAgent, 'GET', '/auth/session')).json().principal).toMatchObject({
      id: alice.id,
      role: 'member',
      user: { id: alice.id, role: 'admin' },
    });
    expect((await asSession(gw, asAgent, 'GET', '/api/users')).statusCode).toBe(403);
    const minted = await asSession(gw, asAgent, 'POST', '/api/tokens', { body: { role: 'admin', name: 'escalated' } });
    expect(minted.statusCode).toBe(403);
    // A member's own view still works: its audit.
    expect((await asSession(gw, asAgent, 'GET', '/api/audit')).statusCode).toBe(200);

    // An operator token of alice's signs in as an operator; her admin token as an admin.
    const operator = await signIn(gw, (await tokenOf('operator', 'alice-ops')).token);
    expect((await asSession(gw, operator, 'GET', '/auth/session')).json().principal.role).toBe('operator');
    const admin = await signIn(gw, (await tokenOf('admin', 'alice-admin')).token);
    expect((await asSession(gw, admin, 'GET', '/api/users')).statusCode).toBe(200);

    // Revoking the token signed in with ends that session, and only that one.
    expect((await gw.request('DELETE', `/api/tokens/${agent.id}`)).statusCode).toBe(200);
    expect((await asSession(gw, asAgent, 'GET', '/api/audit')).statusCode).toBe(401);
    expect((await asSession(gw, asAgent, 'GET', '/auth/session')).json().signedIn).toBe(false);
    expect((await asSession(gw, admin, 'GET', '/api/users')).statusCode).toBe(200);
  });

  it("signing in with an agent's token keeps to the token's groups: no token minted for the person's others", async () => {
    gw = await startTestGateway(sqliteTarget);
    const bob = (await gw.request('POST', '/api/users', { body: { name: 'bob', groups: ['docs', 'finance'] } })).json();
    const narrow = (
      await gw.request('POST', '/api/tokens', {
        body: { role: 'agent', name: 'docs-bot', userId: bob.id, groups: ['docs'] },
      })
    ).json();
    // Before: the session was bob with all his groups, and minted a token for `finance`, which the bot never had.
    const asBot = await signIn(gw, narrow.token);
    expect((await asSession(gw, asBot, 'GET', '/auth/session')).json().principal).toMatchObject({
      id: bob.id,
      role: 'member',
      groups: ['docs'],
    });
    const wider = await asSession(gw, asBot, 'POST', '/api/tokens', {
      body: { role: 'agent', name: 'wider', groups: ['finance'] },
    });
    expect(wider.statusCode).toBe(403);
    const same = await asSession(gw, asBot, 'POST', '/api/tokens', { body: { role: 'agent', name: 'same' } });
    expect(same.statusCode).toBe(201);
    expect(same.json().groups).toEqual(['docs']);
    // A token holding all of bob's groups signs in with all of them.
    const full = (
      await gw.request('POST', '/api/tokens', {
        body: { role: 'agent', name: 'laptop', userId: bob.id, groups: ['docs', 'finance'] },
      })
    ).json();
    const asBob = await signIn(gw, full.token);
    expect((await asSession(gw, asBob, 'GET', '/auth/session')).json().principal.groups).toEqual(['docs', 'finance']);
  });

  it("a member's audit is its own by user id, not another user's whose name is that id", async () => {
    gw = await startTestGateway(sqliteTarget);
    const alice = (await gw.request('POST', '/api/users', { body: { name: 'alice' } })).json();
    const impostor = (await gw.request('POST', '/api/users', { body: { name: alice.id } })).json();
    const tokenOf = async (userId: string, name: string) =>
      (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name, userId } })).json().token as string;
    const aliceSession = await signIn(gw, await tokenOf(alice.id, 'alice-agent'));
    await signIn(gw, await tokenOf(impostor.id, 'impostor-agent'));

    const own = (await asSession(gw, aliceSession, 'GET', '/api/audit?kind=admin')).json();
    const users = own.events.map((e: Json) => e.userId);
    expect(users).toContain(alice.id);
    expect(users).not.toContain(impostor.id);
    // Asking for the other user by name changes nothing: the member's own id still bounds the answer.
    const asked = (await asSession(gw, aliceSession, 'GET', `/api/audit?user=${impostor.id}`)).json();
    expect(asked.total).toBe(0);
  });

  it('a session cookie: HttpOnly, SameSite=Lax, not Secure on loopback; CSRF refused; logout revokes it', async () => {
    gw = await startTestGateway(sqliteTarget);
    const alice = (await gw.request('POST', '/api/users', { body: { name: 'alice', role: 'admin' } })).json();
    const token = (
      await gw.request('POST', '/api/tokens', { body: { role: 'admin', name: 'alice-key', userId: alice.id } })
    ).json();

    const response = await gw.request('POST', '/auth/session', { token: null, body: { token: token.token } });
    const cookies = cookiesOf(response);
    expect(cookies.gatehouse_session?.attrs).toEqual(
      expect.arrayContaining(['HttpOnly', 'SameSite=Lax', 'Path=/', 'Max-Age=43200']),
    );
    expect(cookies.gatehouse_session?.attrs).not.toContain('Secure');
    // The CSRF cookie is readable by the dashboard's script (double submit); the session one is not.
    expect(cookies.gatehouse_csrf?.attrs).not.toContain('HttpOnly');
    expect(response.json().principal).toMatchObject({ id: alice.id, role: 'admin', user: { id: alice.id } });

    const session = await signIn(gw, token.token);
    // The session is the user, within the token's role (an admin's token here; an agent's would be a member's).
    const me = (await asSession(gw, session, 'GET', '/api/users/me')).json();
    expect(me.principal).toMatchObject({ id: alice.id, role: 'admin' });
    expect((await asSession(gw, session, 'GET', '/auth/session')).json()).toMatchObject({
      signedIn: true,
      principal: { id: alice.id },
      oidc: null,
    });

    // State changes signed in by cookie need the CSRF header; a wrong one is refused too.
    const noCsrf = await asSession(gw, session, 'POST', '/api/users', { body: { name: 'bob' }, csrf: false });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json().error.code).toBe('auth.csrf_failed');
    const wrong = await gw.request('POST', '/api/users', {
      token: null,
      body: { name: 'bob' },
      headers: { cookie: session.cookie, 'x-gatehouse-csrf': 'guessed' },
    });
    expect(wrong.json().error.code).toBe('auth.csrf_failed');
    expect((await asSession(gw, session, 'POST', '/api/users', { body: { name: 'bob' } })).statusCode).toBe(201);
    // MCP endpoints never take the cookie.
    expect(
      (await asSession(gw, session, 'POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'ping' } })).statusCode,
    ).toBe(401);

    const logoutNoCsrf = await asSession(gw, session, 'POST', '/auth/logout', { csrf: false });
    expect(logoutNoCsrf.json().error.code).toBe('auth.csrf_failed');
    const logout = await asSession(gw, session, 'POST', '/auth/logout');
    expect(logout.json()).toEqual({ signedOut: true });
    expect(cookiesOf(logout).gatehouse_session?.attrs).toContain('Max-Age=0');
    expect((await asSession(gw, session, 'GET', '/api/users/me')).statusCode).toBe(401);
    expect((await asSession(gw, session, 'GET', '/auth/session')).json().signedIn).toBe(false);

    // A bad token signs nobody in; an ownerless agent token may not open a dashboard session.
    expect((await gw.request('POST', '/auth/session', { token: null, body: { token: 'gh_nope' } })).statusCode).toBe(
      401,
    );
    const loose = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'loose' } })).json();
    expect((await gw.request('POST', '/auth/session', { token: null, body: { token: loose.token } })).statusCode).toBe(
      403,
    );
  });

  it('sign-in attempts are limited per address: 120 a minute, then 429 with Retry-After', async () => {
    gw = await startTestGateway(sqliteTarget);
    const attempt = (ip: string) =>
      gw.gateway.app.inject({
        method: 'POST',
        url: '/auth/session',
        remoteAddress: ip,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ token: 'gh_wrong' }),
      });
    for (let i = 0; i < 120; i++) expect((await attempt('203.0.113.7')).statusCode).toBe(401);
    const held = await attempt('203.0.113.7');
    expect(held.statusCode).toBe(429);
    expect(held.json().error.code).toBe('rate_limited');
    expect(Number(held.headers['retry-after'])).toBeGreaterThan(0);
    // Even the right token waits: the limit comes before the store is asked.
    const right = await gw.gateway.app.inject({
      method: 'POST',
      url: '/auth/session',
      remoteAddress: '203.0.113.7',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ token: TEST_ADMIN_TOKEN }),
    });
    expect(right.statusCode).toBe(429);
    // Another address has its own allowance.
    expect((await attempt('203.0.113.8')).statusCode).toBe(401);
  });

  it('cookies are Secure when the public address is not loopback', async () => {
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: 'https://gate.example.com' });
    const response = await gw.request('POST', '/auth/session', { token: null, body: { token: TEST_ADMIN_TOKEN } });
    expect(cookiesOf(response).gatehouse_session?.attrs).toContain('Secure');
    expect(cookiesOf(response).gatehouse_csrf?.attrs).toContain('Secure');
  });
});

describe('a user and their agents through the gate', () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let client: Client;
  let alice: Json;
  let agent: Json;

  beforeEach(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBeLessThan(300);
    expect(
      (await gw.request('PATCH', '/api/mcp/servers/files/tools', { body: { mode: 'all', gated: ['add'] } })).statusCode,
    ).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    alice = (await gw.request('POST', '/api/users', { body: { name: 'alice', role: 'operator' } })).json();
    agent = (
      await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'alice-agent', userId: alice.id } })
    ).json();
    const base = await gw.listen();
    client = await connectAgent(`${base}/mcp`, agent.token);
  });

  afterEach(async () => {
    await client.close().catch(() => {});
    await upstream.close();
    await gw.close();
  });

  const gatedCall = async (a: number): Promise<string> => {
    const pending = structured(await client.callTool({ name: 'files__add', arguments: { a, b: 1 } }));
    expect(pending.status).toBe('pending_approval');
    return pending.approval_id as string;
  };

  it('rows name the user and the agent; a user cannot approve their own agent; others can', async () => {
    expect(structured(await client.callTool({ name: 'files__echo', arguments: { text: 'hi' } }))).toBeDefined();
    const id = await gatedCall(1);
    const approval = (await gw.request('GET', `/api/approvals/${id}`)).json();
    expect(approval.requester).toEqual({ id: agent.id, name: 'alice-agent', user: { id: alice.id, name: 'alice' } });

    // Alice, signed in (operator), may decide approvals — but not her own agent's.
    const opToken = (
      await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'alice-op', userId: alice.id } })
    ).json();
    const own = await gw.request('POST', `/api/approvals/${id}/approve`, { token: opToken.token, body: {} });
    expect(own.statusCode).toBe(403);
    expect(own.json().error.code).toBe('approval.self_approval');
    const session = await signIn(gw, opToken.token);
    const ownBySession = await asSession(gw, session, 'POST', `/api/approvals/${id}/approve`, { body: {} });
    expect(ownBySession.json().error.code).toBe('approval.self_approval');

    // Bob decides it, and the decision names him.
    const bob = (await gw.request('POST', '/api/users', { body: { name: 'bob', role: 'operator' } })).json();
    const bobToken = (
      await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'bob-op', userId: bob.id } })
    ).json();
    const bobSession = await signIn(gw, bobToken.token);
    const decided = await asSession(gw, bobSession, 'POST', `/api/approvals/${id}/approve`, { body: {} });
    expect(decided.statusCode).toBe(200);
    expect(decided.json().decidedBy).toMatchObject({ id: bob.id, name: 'bob', userId: bob.id });
    await gw.gateway.approvals.idle();
    expect((await gw.request('GET', `/api/approvals/${id}`)).json().status).toBe('executed');

    // Audit rows carry the user; the activity filters by user; clients group by agent and user.
    await gw.gateway.audit.flush();
    const calls = (await gw.request('GET', `/api/audit?kind=call&user=${alice.id}`)).json();
    expect(calls.total).toBeGreaterThanOrEqual(2);
    for (const event of calls.events)
      expect(event).toMatchObject({ actorId: agent.id, userId: alice.id, userName: 'alice' });
    expect((await gw.request('GET', `/api/audit?kind=call&user=${bob.id}`)).json().total).toBe(0);
    const clients = (await gw.request('GET', '/api/mcp/clients')).json().clients;
    expect(clients).toEqual([
      expect.objectContaining({ id: agent.id, name: 'alice-agent', user: { id: alice.id, name: 'alice' } }),
    ]);
  });

  it('disabling a user ends their sessions and tokens and cancels their pending approvals', async () => {
    const ids = [await gatedCall(1), await gatedCall(2)];
    const session = await signIn(gw, agent.token);
    expect((await asSession(gw, session, 'GET', '/api/users/me')).statusCode).toBe(200);

    const disabled = await gw.request('PATCH', `/api/users/${alice.id}`, { body: { disabled: true } });
    expect(disabled.statusCode).toBe(200);
    expect(disabled.json()).toMatchObject({ disabled: true });
    expect([...disabled.json().cancelledApprovals].sort()).toEqual([...ids].sort());
    for (const id of ids) {
      const view = (await gw.request('GET', `/api/approvals/${id}`)).json();
      expect(view).toMatchObject({ status: 'cancelled', reason: 'The user was disabled.' });
      expect((await gw.request('POST', `/api/approvals/${id}/approve`, { body: {} })).statusCode).toBe(409);
    }
    expect((await asSession(gw, session, 'GET', '/api/users/me')).statusCode).toBe(401);
    expect((await gw.request('GET', '/info', { token: agent.token })).statusCode).toBe(401);
    expect((await gw.request('POST', '/auth/session', { token: null, body: { token: agent.token } })).statusCode).toBe(
      401,
    );
    expect(upstream.stats.calls.add ?? 0).toBe(0);

    // Enabled again: the token works again (it was never revoked), the cancelled approvals stay cancelled.
    await gw.request('PATCH', `/api/users/${alice.id}`, { body: { disabled: false } });
    expect((await gw.request('GET', '/info', { token: agent.token })).statusCode).toBe(200);
  });
});
