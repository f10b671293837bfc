/**
 * Sealing-key rotation end to end, on SQLite and PostgreSQL: values are sealed with K1 (server header,
 * bearer token, upstream OAuth grant, upstream client secret, pending flow, OAuth signing key, and one
 * value in the format from before key ids); the gateway restarts with K2 current and K1 previous and
 * everything still opens; `POST /api/secrets/rotate` re-seals everything to K2 (in small batches) and
 * the inventory says K1 is retirable; the gateway restarts with K2 alone and everything still opens; a
 * value sealed only under K1 then fails with `secrets.key_missing`, and a process with K1 alone refuses
 * to start. No answer carries a key or a value.
 */
import { createCipheriv, randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runDoctor } from '../../src/cli/doctor.js';
import { addSecretCommands } from '../../src/cli/secrets.js';
import { loadConfig } from '../../src/config.js';
import { SigningKeys } from '../../src/oauth/keys.js';
import { bindingOf } from '../../src/registry/records.js';
import { aad } from '../../src/registry/secret-values.js';
import type { SealKey } from '../../src/secrets/seal.js';
import { aadFor, seal, sealKeyFrom, unseal } from '../../src/secrets/seal.js';
import { type GrantKey, GrantStore } from '../../src/upstream-auth/grants.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore, type StoreTarget } from '../helpers/stores.js';

const K1 = 'a1'.repeat(32); // the test gateway's default key
const K2 = randomBytes(32).toString('hex');
const SENTINEL = 'ROTATE-SENTINEL-5d1e';
const ISSUER = 'https://as.example.com';
const METADATA = {
  issuer: ISSUER,
  authorization_endpoint: `${ISSUER}/authorize`,
  token_endpoint: `${ISSUER}/token`,
  response_types_supported: ['code'],
};

/** A value in the format every store held before values named their key (`v1:`). */
function legacySeal(key: Buffer, plaintext: string, data: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(data);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `v1:${Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64')}`;
}

describeEachStore('secret-key rotation with re-sealing', (target: StoreTarget) => {
  let place: Awaited<ReturnType<StoreTarget['fresh']>>;
  let upstream: McpFixture;
  let gw: TestGateway | undefined;
  let grantKey: GrantKey;
  const k1 = sealKeyFrom(Buffer.from(K1, 'hex'));
  const k2 = sealKeyFrom(Buffer.from(K2, 'hex'));

  beforeAll(async () => {
    place = await target.fresh();
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo'] });
    grantKey = { serverId: 'vault', serverUrl: new URL(upstream.url).href, subject: 'shared' };
  });
  afterAll(async () => {
    await gw?.close();
    await upstream.close();
    await place.cleanup();
  });

  const start = (env: Record<string, string>) => startTestGateway(target, env, {}, place);
  const restart = async (env: Record<string, string>) => {
    await gw?.close();
    gw = undefined;
    gw = await start(env);
    return gw;
  };
  const bodyOf = (text: string) => {
    for (const secret of [SENTINEL, K1, K2]) expect(text).not.toContain(secret);
    return JSON.parse(text);
  };

  /** Every sealed value opens with the gateway's ring: the upstream gets its header and token, grants open. */
  const everythingOpens = async (g: TestGateway, key: SealKey) => {
    const before = upstream.log.records.length;
    expect((await g.request('POST', '/api/mcp/servers/vault/test')).json()).toMatchObject({ ok: true });
    const received = upstream.log.records.slice(before).map((r) => r.headers);
    expect(received.some((h) => h['x-api-key'] === `${SENTINEL}-header`)).toBe(true);
    expect(received.some((h) => h['x-legacy'] === `${SENTINEL}-legacy`)).toBe(true);
    expect(received.some((h) => h.authorization === `Bearer ${SENTINEL}-bearer`)).toBe(true);
    const grants = new GrantStore(g.gateway.store, key);
    const grant = await grants.open(grantKey);
    expect([grant?.accessToken, grant?.refreshToken]).toEqual([`${SENTINEL}-access`, `${SENTINEL}-refresh`]);
    expect((await grants.client(grantKey, ISSUER))?.clientSecret).toBe(`${SENTINEL}-client-secret`);
    const signing = await new SigningKeys(g.gateway.store, key).signing();
    expect(signing.kid).toBeTruthy();
  };

  it('seals with K1, opens after rotating to K2, re-seals everything, retires K1, and a K1-only value fails clearly', async () => {
    // 1. Everything sealed under K1.
    const g1 = await restart({});
    const installed = await g1.request('POST', '/api/mcp/install', {
      body: {
        manifest: {
          id: 'vault',
          name: 'Vault',
          transport: 'streamable-http',
          url: upstream.url,
          headers: { 'X-Api-Key': `${SENTINEL}-header` },
          auth: { type: 'bearer', token: `${SENTINEL}-bearer` },
        },
      },
    });
    expect(installed.statusCode).toBe(201);
    // One header as every store held it before values named their key.
    const row = await g1.gateway.store.db
      .selectFrom('servers')
      .selectAll()
      .where('id', '=', 'vault')
      .executeTakeFirstOrThrow();
    const binding = bindingOf(row.id, 'streamable-http', row.url, row.command);
    const headers = JSON.parse(row.headers);
    headers['X-Legacy'] = { sealed: legacySeal(k1.key, `${SENTINEL}-legacy`, aad(binding, 'headers', 'X-Legacy')) };
    await g1.gateway.store.db
      .updateTable('servers')
      .set({ headers: JSON.stringify(headers) })
      .where('id', '=', 'vault')
      .execute();
    await g1.gateway.store.changed('servers');
    const grants = new GrantStore(g1.gateway.store, k1);
    await grants.save(
      grantKey,
      { issuer: ISSUER, clientId: 'gatehouse', metadata: METADATA as never, resource: grantKey.serverUrl },
      { accessToken: `${SENTINEL}-access`, refreshToken: `${SENTINEL}-refresh`, expiresIn: 3600, scopes: ['read'] },
    );
    await grants.saveClient(grantKey, ISSUER, { clientId: 'gatehouse', clientSecret: `${SENTINEL}-client-secret` });
    await grants.startFlow(grantKey, {
      state: 'state-1',
      issuer: ISSUER,
      clientId: 'gatehouse',
      metadata: METADATA as never,
      codeVerifier: `${SENTINEL}-verifier`,
      redirectUri: 'http://127.0.0.1/oauth/callback',
      scopes: ['read'],
      ttlMs: 600_000,
      resource: grantKey.serverUrl,
    });
    expect((await g1.request('GET', '/oauth/jwks', { token: null })).statusCode).toBe(200); // makes a signing key
    // An admin call waiting for approval keeps its literal arguments sealed.
    const waiting = await g1.gateway.approvals.create({
      surface: 'admin',
      requester: { id: 'tok_agent', name: 'agent', role: 'agent', groups: [] },
      serverId: null,
      tool: 'mcp_server_install',
      exposedName: 'mcp_server_install',
      arguments: { url: upstream.url, headers: { 'X-Api-Key': `${SENTINEL}-approval` } },
      shownArguments: { url: upstream.url, headers: { 'X-Api-Key': { set: true } } },
      pinHash: null,
      policyVersion: null,
      detail: {},
    });
    const approvalArguments = async (g: TestGateway, key: SealKey) => {
      const row = await g.gateway.store.db
        .selectFrom('approvals')
        .select('sealed_arguments')
        .where('id', '=', waiting.id)
        .executeTakeFirstOrThrow();
      return unseal(key, row.sealed_arguments ?? '', aadFor(['approval-arguments', waiting.id]));
    };
    expect(await approvalArguments(g1, k1)).toContain(`${SENTINEL}-approval`);
    await everythingOpens(g1, k1);
    const before = bodyOf((await g1.request('GET', '/api/secrets/keys')).body);
    // header, bearer, access, refresh, client secret, verifier, signing key, approval arguments under K1; the
    // legacy header unlabelled.
    expect(before).toEqual({
      current: k1.kid,
      keys: [{ kid: k1.kid, current: true, values: 8 }],
      unknown: [],
      unlabelled: 1,
      retirable: false,
    });

    // 2. Rotate: K2 current, K1 previous. The store records K2; everything still opens.
    const g2 = await restart({ GATEHOUSE_SECRET_KEY: K2, GATEHOUSE_SECRET_KEY_PREVIOUS: K1 });
    const fingerprint = await g2.gateway.store.db
      .selectFrom('gatehouse_meta')
      .select('value')
      .where('key', '=', 'secret_key_fingerprint')
      .executeTakeFirstOrThrow();
    expect(fingerprint.value).toBe(k2.fingerprint);
    const ring = sealKeyFrom(Buffer.from(K2, 'hex'), [Buffer.from(K1, 'hex')]);
    await everythingOpens(g2, ring);
    const during = bodyOf((await g2.request('GET', '/api/secrets/keys')).body);
    expect(during.keys).toEqual([
      { kid: k2.kid, current: true, values: 0 },
      { kid: k1.kid, current: false, values: 8 },
    ]);
    expect(during.retirable).toBe(false);
    // doctor reads the same ring: the store's key is in it, and the signing key (still under K1) opens.
    const doctor = async (env: Record<string, string>) => {
      const config = loadConfig({
        env: {
          NODE_ENV: 'test',
          GATEHOUSE_DATA_DIR: place.dataDir,
          ...(place.databaseUrl ? { GATEHOUSE_DATABASE_URL: place.databaseUrl } : {}),
          ...env,
        },
      });
      const { checks } = await runDoctor(config);
      return Object.fromEntries(checks.map((c) => [c.name, c.status]));
    };
    expect(await doctor({ GATEHOUSE_SECRET_KEY: K2, GATEHOUSE_SECRET_KEY_PREVIOUS: K1 })).toMatchObject({
      'secret key fingerprint': 'ok',
      'oauth signing keys': 'ok',
    });
    expect(await doctor({ GATEHOUSE_SECRET_KEY: K2 })).toMatchObject({ 'oauth signing keys': 'fail' });
    expect(await doctor({ GATEHOUSE_SECRET_KEY: K1 })).toMatchObject({ 'secret key fingerprint': 'fail' });
    // An agent-free admin operation only: another role is refused.
    const operator = (await g2.request('POST', '/api/tokens', { body: { role: 'operator', name: 'op' } })).json();
    expect((await g2.request('POST', '/api/secrets/rotate', { token: operator.token, body: {} })).statusCode).toBe(403);

    // 3. Re-seal, in batches of one row.
    const resealed = await g2.request('POST', '/api/secrets/rotate', { body: { batchSize: 1 } });
    expect(resealed.statusCode).toBe(200);
    const report = bodyOf(resealed.body);
    expect(report).toMatchObject({ resealed: 9, alreadyCurrent: 0, changedMeanwhile: 0, failed: 0, failures: [] });
    expect(report.inventory).toEqual({
      current: k2.kid,
      keys: [
        { kid: k2.kid, current: true, values: 9 },
        { kid: k1.kid, current: false, values: 0 },
      ],
      unknown: [],
      unlabelled: 0,
      retirable: true,
    });
    await everythingOpens(g2, ring);
    // Again, from the shell: nothing left to move.
    const base = await g2.listen();
    const out: string[] = [];
    let exitCode = 0;
    const program = new Command().exitOverride();
    addSecretCommands(program, {
      stdout: (t) => out.push(t),
      stderr: (t) => out.push(t),
      env: { GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN },
      setExitCode: (code) => {
        exitCode = code;
      },
    });
    await program.parseAsync(['node', 'gatehouse', 'secrets', 'rotate', '--url', base]);
    const printed = out.join('');
    expect(printed).toContain('re-sealed 0, already current 9, changed meanwhile 0, failed 0');
    expect(printed).toContain(`${k2.kid}\tcurrent\t9`);
    expect(printed).toContain(`${k1.kid}\tprevious\t0`);
    expect(printed).toContain('previous keys can be retired');
    for (const secret of [SENTINEL, K1, K2]) expect(printed).not.toContain(secret);
    expect(exitCode).toBe(0);
    await g2.gateway.audit.flush();
    const audited = await g2.gateway.store.db
      .selectFrom('audit_events')
      .select(['action', 'data'])
      .where('action', '=', 'secrets.rotate')
      .execute();
    expect(audited).toHaveLength(2);
    for (const row of audited) bodyOf(row.data ?? '{}');
    // The pending flow was re-sealed too: its verifier opens under K2 alone.
    const flow = await new GrantStore(g2.gateway.store, k2).takeFlow('state-1', async () => upstream.url);
    expect(flow?.codeVerifier).toBe(`${SENTINEL}-verifier`);

    // 4. Retire K1: K2 alone opens everything.
    const g3 = await restart({ GATEHOUSE_SECRET_KEY: K2 });
    await everythingOpens(g3, k2);
    expect(await approvalArguments(g3, k2)).toContain(`${SENTINEL}-approval`);

    // 5. A value sealed only under K1 (say, written by a replica still on K1 after the re-seal) fails clearly.
    await g3.gateway.store.db
      .updateTable('upstream_oauth_clients')
      .set({
        client_secret: seal(k1, 'late', aadFor(['upstream-oauth-client', 'vault', grantKey.serverUrl, ISSUER])),
      })
      .execute();
    await expect(new GrantStore(g3.gateway.store, k2).client(grantKey, ISSUER)).rejects.toMatchObject({
      code: 'secrets.key_missing',
      details: { kid: k1.kid },
    });
    const after = bodyOf((await g3.request('GET', '/api/secrets/keys')).body);
    expect(after).toMatchObject({ unknown: [{ kid: k1.kid, values: 1 }], retirable: false });
    const stuck = bodyOf((await g3.request('POST', '/api/secrets/rotate')).body);
    expect(stuck).toMatchObject({
      resealed: 0,
      failed: 1,
      failures: [{ table: 'upstream_oauth_clients', row: `vault ${ISSUER}`, field: 'client_secret' }],
    });

    // 6. A process with K1 alone cannot open this store any more and refuses to start.
    await gw?.close();
    gw = undefined;
    await expect(start({ GATEHOUSE_SECRET_KEY: K1 })).rejects.toMatchObject({ code: 'validation_error' });
  });
});
