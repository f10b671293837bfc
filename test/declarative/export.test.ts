import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { exportServers } from '../../src/declarative/export.js';
import { isNoop } from '../../src/declarative/report.js';
import type { ServerView } from '../../src/registry/records.js';
import { listToolsets } from '../../src/toolsets/store.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { PUBLIC_TEST_HOST, startTestGateway, TEST_SECRET_KEY, type TestGateway } from '../helpers/gateway.js';
import { NODE_TS } from '../helpers/processes.js';
import { describeEachStore } from '../helpers/stores.js';
import { apply, parse, SENTINEL } from './helpers.js';

const MAIN = new URL('../../src/cli/main.ts', import.meta.url).pathname;
/** The configuration fields a round trip must reproduce exactly (secrets are compared by what reaches the upstream). */
const CONFIG_FIELDS = [
  'id',
  'name',
  'description',
  'transport',
  'url',
  'command',
  'args',
  'enabled',
  'privateNetwork',
  'trustNewTools',
  'exposure',
  'toolPolicy',
  'workspaceRoots',
  'pathArgs',
  'lazyStart',
  'idleShutdownS',
] as const;
const configOf = (s: ServerView) => Object.fromEntries(CONFIG_FIELDS.map((f) => [f, s[f]]));

function exportCli(gw: TestGateway, extra: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const [node, ...flags] = NODE_TS;
  const store = ['--data-dir', gw.dataDir, ...(gw.databaseUrl ? ['--database-url', gw.databaseUrl] : [])];
  return new Promise((resolve) => {
    execFile(
      node,
      [...flags, MAIN, 'servers', 'export', ...store, '--secret-key', TEST_SECRET_KEY, ...extra],
      { env: { ...process.env, NODE_ENV: 'test' }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describeEachStore('declarative config: export and round trip', (target) => {
  let source: TestGateway;
  let copy: TestGateway | undefined;
  let upstream: McpFixture;
  let dir: string;
  const envSet: string[] = [];
  const setEnv = (name: string, value: string) => {
    process.env[name] = value;
    envSet.push(name);
  };

  beforeEach(async () => {
    source = await startTestGateway(target);
    upstream = await startModernServer({ host: PUBLIC_TEST_HOST, tools: ['echo', 'add'] });
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-export-'));
    setEnv('MCP_SECRET_EXPORT_REF', `${SENTINEL}-ref`);
    setEnv('MCP_SECRET_DUP_X_KEY', `${SENTINEL}-taken`);
    const install = async (manifest: object) =>
      expect((await source.request('POST', '/api/mcp/install', { body: { manifest } })).statusCode).toBe(201);
    await install({
      id: 'secretive',
      name: 'io.example/secretive',
      description: 'holds secrets',
      transport: 'streamable-http',
      url: upstream.url,
      headers: { 'X-Api-Key': `${SENTINEL}-header`, 'X-From-Env': { env: 'MCP_SECRET_EXPORT_REF' } },
      auth: { type: 'bearer', token: `${SENTINEL}-bearer` },
      exposure: ['team-a'],
    });
    await source.request('PATCH', '/api/mcp/servers/secretive/tools', {
      body: { mode: 'exclude', exclude: ['add'], allow: ['echo'] },
    });
    // The path sandbox, set after the install (an install by manifest does not take it).
    const configure = async (id: string, body: object) =>
      expect((await source.request('PATCH', `/api/mcp/servers/${id}/config`, { body })).statusCode).toBe(200);
    await configure('secretive', { workspaceRoots: ['/srv/ws'], pathArgs: ['target'] });
    await install({
      id: 'runner',
      name: 'Runner',
      transport: 'stdio',
      command: 'node',
      args: ['server.js', '--flag'],
      env: { API_KEY: `${SENTINEL}-env` },
      enabled: false,
      trustNewTools: true,
    });
    await configure('runner', { lazyStart: true, idleShutdownS: 300 });
    // OAuth to the upstream, with a registered client whose secret is sealed.
    await install({
      id: 'vault',
      name: 'Vault',
      transport: 'streamable-http',
      url: `${upstream.url}?vault`,
      auth: {
        type: 'oauth',
        mode: 'per-user',
        clientId: 'gatehouse-client',
        clientSecret: `${SENTINEL}-client`,
        scopes: ['read', 'write'],
      },
    });
    // Names that collide once upper-cased, and with an existing reference.
    await install({
      id: 'dup',
      name: 'Dup',
      transport: 'streamable-http',
      url: upstream.url,
      headers: { 'X-Key': `${SENTINEL}-1`, X_Key: `${SENTINEL}-2`, Other: { env: 'MCP_SECRET_DUP_X_KEY' } },
    });
    // Toolsets across two servers (one entry naming a tool no server has): they travel with the export.
    const toolset = async (body: object) =>
      expect((await source.request('POST', '/api/toolsets', { body })).statusCode).toBe(201);
    await toolset({
      name: 'pair',
      description: 'echo from two servers',
      tools: [
        { server: 'secretive', tool: 'echo' },
        { server: 'dup', tool: 'echo' },
        { server: 'dup', tool: 'gone' },
      ],
    });
    await toolset({ name: 'solo', tools: [{ server: 'runner', tool: 'anything' }] });
  });
  const exported = async () =>
    exportServers(await source.gateway.registry.records.all(), {
      secretEnvPrefix: 'MCP_SECRET_',
      toolsets: await listToolsets(source.gateway.store.db),
    });
  const toolsetsOf = async (gw: TestGateway) =>
    ((await gw.request('GET', '/api/toolsets')).json().toolsets as Array<Record<string, unknown>>).map(
      ({ name, description, tools }) => ({
        name,
        description,
        tools: (tools as Array<{ server: string; tool: string }>).map(({ server, tool }) => ({ server, tool })),
      }),
    );
  afterEach(async () => {
    for (const name of envSet.splice(0)) delete process.env[name];
    await copy?.close();
    copy = undefined;
    await upstream.close();
    await source.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes every sealed value as an env reference, lists the variables, and leaks nothing', async () => {
    const { yaml, variables } = await exported();
    expect(yaml).not.toContain(SENTINEL);
    expect(variables).toEqual([
      { name: 'MCP_SECRET_DUP_X_KEY_2', path: 'servers[0].headers.X-Key', sealed: true },
      { name: 'MCP_SECRET_DUP_X_KEY_3', path: 'servers[0].headers.X_Key', sealed: true },
      { name: 'MCP_SECRET_DUP_X_KEY', path: 'servers[0].headers.Other', sealed: false },
      { name: 'MCP_SECRET_RUNNER_API_KEY', path: 'servers[1].env.API_KEY', sealed: true },
      { name: 'MCP_SECRET_SECRETIVE_X_API_KEY', path: 'servers[2].headers.X-Api-Key', sealed: true },
      { name: 'MCP_SECRET_EXPORT_REF', path: 'servers[2].headers.X-From-Env', sealed: false },
      { name: 'MCP_SECRET_SECRETIVE_AUTH_TOKEN', path: 'servers[2].auth.token', sealed: true },
      { name: 'MCP_SECRET_VAULT_AUTH_CLIENT_SECRET', path: 'servers[3].auth.clientSecret', sealed: true },
    ]);
    for (const v of variables)
      expect(yaml).toMatch(new RegExp(`^#\\s+${v.name}\\s+${v.path.replace(/[[\]]/g, '\\$&')}`, 'm'));
    const secretive = parseYaml(yaml).servers[2];
    expect(secretive).toMatchObject({
      headers: {
        'X-Api-Key': { env: 'MCP_SECRET_SECRETIVE_X_API_KEY' },
        'X-From-Env': { env: 'MCP_SECRET_EXPORT_REF' },
      },
      auth: { type: 'bearer', token: { env: 'MCP_SECRET_SECRETIVE_AUTH_TOKEN' } },
      workspaceRoots: ['/srv/ws'],
      pathArgs: ['target'],
    });
    expect(parseYaml(yaml).servers[1]).toMatchObject({ lazyStart: true, idleShutdownS: 300 });
    expect(parseYaml(yaml).servers[3].auth).toEqual({
      type: 'oauth',
      mode: 'per-user',
      grant: 'authorization_code',
      clientId: 'gatehouse-client',
      clientSecret: { env: 'MCP_SECRET_VAULT_AUTH_CLIENT_SECRET' },
      scopes: ['read', 'write'],
    });
    // What it writes, `--config` accepts.
    expect(parse(yaml).servers?.map((s) => s.id)).toEqual(['dup', 'runner', 'secretive', 'vault']);
    expect(parse(yaml).toolsets).toEqual([
      {
        name: 'pair',
        description: 'echo from two servers',
        tools: [
          { server: 'secretive', tool: 'echo' },
          { server: 'dup', tool: 'echo' },
          { server: 'dup', tool: 'gone' },
        ],
      },
      { name: 'solo', tools: [{ server: 'runner', tool: 'anything' }] },
    ]);
  });

  it('applied to a fresh store with the secrets as env vars, reproduces the registry and its toolsets', async () => {
    const { yaml, variables } = await exported();
    const values: Record<string, string> = {
      MCP_SECRET_DUP_X_KEY_2: `${SENTINEL}-1`,
      MCP_SECRET_DUP_X_KEY_3: `${SENTINEL}-2`,
      MCP_SECRET_RUNNER_API_KEY: `${SENTINEL}-env`,
      MCP_SECRET_SECRETIVE_X_API_KEY: `${SENTINEL}-header`,
      MCP_SECRET_SECRETIVE_AUTH_TOKEN: `${SENTINEL}-bearer`,
      MCP_SECRET_VAULT_AUTH_CLIENT_SECRET: `${SENTINEL}-client`,
    };
    for (const v of variables.filter((v) => v.sealed)) setEnv(v.name, values[v.name] as string);

    copy = await startTestGateway(target);
    const report = await apply(copy, yaml);
    expect(report.servers.created).toEqual(['dup', 'runner', 'secretive', 'vault']);
    expect(report.servers.warnings).toEqual([]);
    expect(report.toolsets?.created).toEqual(['pair', 'solo']);
    expect(await toolsetsOf(copy)).toEqual(await toolsetsOf(source));
    const original = (await source.request('GET', '/api/mcp/servers')).json().servers as ServerView[];
    const reproduced = (await copy.request('GET', '/api/mcp/servers')).json().servers as ServerView[];
    expect(reproduced.map(configOf)).toEqual(original.map(configOf));
    for (const [i, server] of reproduced.entries()) {
      for (const field of ['headers', 'env'] as const) {
        expect(Object.keys(server[field])).toEqual(Object.keys(original[i]?.[field] ?? {}));
      }
      // The auth settings, every one (a secret compared by where it is: sealed before, a reference now).
      const settings = (auth: object) => {
        const { token: _t, clientSecret: _c, ...rest } = auth as Record<string, unknown>;
        return rest;
      };
      expect(settings(server.auth)).toEqual(settings(original[i]?.auth ?? {}));
      expect('clientSecret' in server.auth).toBe('clientSecret' in (original[i]?.auth ?? {}));
    }
    expect(reproduced.find((s) => s.id === 'vault')?.auth).toMatchObject({
      clientSecret: { env: 'MCP_SECRET_VAULT_AUTH_CLIENT_SECRET' },
    });

    // The same values reach the upstream: sealed before, env references now.
    upstream.log.clear();
    expect((await copy.request('POST', '/api/mcp/servers/secretive/test')).json()).toMatchObject({ ok: true });
    expect((await copy.request('POST', '/api/mcp/servers/dup/test')).json()).toMatchObject({ ok: true });
    const received = upstream.log.records.map((r) => r.headers);
    expect(received.some((h) => h['x-api-key'] === `${SENTINEL}-header`)).toBe(true);
    expect(received.some((h) => h.authorization === `Bearer ${SENTINEL}-bearer`)).toBe(true);
    expect(received.some((h) => h['x-from-env'] === `${SENTINEL}-ref`)).toBe(true);
    expect(received.some((h) => h['x-key'] === `${SENTINEL}-1` && h.x_key === `${SENTINEL}-2`)).toBe(true);

    // And the round trip is a fixed point.
    expect(isNoop(await apply(copy, yaml))).toBe(true);
  });

  // Two CLI processes, each compiling the CLI's TypeScript: slow on a loaded machine.
  it('`gatehouse servers export` prints the YAML, or writes it to a 0600 file', { timeout: 120_000 }, async () => {
    const printed = await exportCli(source, []);
    // stderr names the store it read (never a secret: a PostgreSQL URL is shown without its password).
    expect(printed).toMatchObject({ code: 0, stderr: expect.stringMatching(/^gatehouse: using the store at \S+\n$/) });
    expect(printed.stdout).not.toContain(SENTINEL);
    expect(parse(printed.stdout).servers).toHaveLength(4);
    expect(parse(printed.stdout).toolsets?.map((t) => t.name)).toEqual(['pair', 'solo']);

    const out = join(dir, 'gatehouse.yaml');
    writeFileSync(out, 'old contents\n', { mode: 0o644 });
    const written = await exportCli(source, ['--out', out]);
    expect(written.code).toBe(0);
    expect(written.stdout).toBe('');
    expect(written.stderr).toContain(`wrote ${out}: 8 env variables to set (6 were sealed values)`);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const text = readFileSync(out, 'utf8');
    expect(text).not.toContain(SENTINEL);
    // Same document, bar the timestamp in the first comment line.
    const body = (s: string) => s.split('\n').slice(1).join('\n');
    expect(body(text)).toBe(body(printed.stdout));
  });
});
