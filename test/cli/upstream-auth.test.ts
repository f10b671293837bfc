/**
 * Upstream OAuth from the CLI against a listening gateway, a real authorization server (oidc-provider) and
 * the JWT-checking MCP fixture: `servers add <url> --oauth`, `servers auth <id> oauth …`, then
 * `servers auth-connect|auth-status|auth-disconnect`. The `gatehouse servers` commands run in this process
 * over real HTTP (a CLI child takes ~25 s to start on a loaded machine); one run of the real CLI checks the wiring.
 */
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { addServerCommands } from '../../src/cli/servers.js';
import { loadConfig } from '../../src/config.js';
import {
  type AuthServer,
  type ProtectedServer,
  SCOPE,
  startAuthServer,
  startProtectedServer,
} from '../fixtures/oauth.js';
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { signedIn } from '../upstream-auth/browser.js';
import { runCli } from './helpers.js';

const PUBLIC_URL = 'http://127.0.0.1:7';
const SECRET = 'cli-client-secret-0123456789abcdef';
/** The gateway runs in this process: the env reference the CLI names resolves here. */
const SECRET_ENV = 'MCP_SECRET_CLI_OAUTH_CLIENT';

describe('gatehouse servers … upstream OAuth', { timeout: 240_000 }, () => {
  let as: AuthServer;
  let mcp: ProtectedServer;
  let gw: TestGateway;
  let env: Record<string, string>;

  beforeAll(async () => {
    process.env[SECRET_ENV] = SECRET;
    as = await startAuthServer({
      clients: [
        {
          client_id: 'cli-client',
          client_secret: SECRET,
          redirect_uris: [`${PUBLIC_URL}/oauth/callback`],
          grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
          response_types: ['code'],
          scope: `openid offline_access ${SCOPE}`,
        },
      ],
    });
    mcp = await startProtectedServer(as.issuer);
    gw = await startTestGateway(sqliteTarget, { GATEHOUSE_PUBLIC_URL: PUBLIC_URL });
    env = { GATEHOUSE_URL: await gw.listen(), GATEHOUSE_CLI_TOKEN: TEST_ADMIN_TOKEN };
  });
  afterAll(async () => {
    delete process.env[SECRET_ENV];
    await gw?.close();
    await mcp?.close();
    await as?.close();
  });

  /** `gatehouse servers …` as main.ts builds it; answers the JSON it printed. */
  const cli = async (...args: string[]) => {
    const program = new Command('gatehouse').exitOverride();
    addServerCommands(program, () => loadConfig({ env: {} }));
    const printed: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      printed.push(String(chunk));
      return true;
    });
    try {
      await program.parseAsync(
        ['servers', ...args, '--url', env.GATEHOUSE_URL as string, '--token', TEST_ADMIN_TOKEN],
        {
          from: 'user',
        },
      );
    } finally {
      spy.mockRestore();
    }
    return JSON.parse(printed.join(''));
  };
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => expect.unreachable('accepted'),
      (error: Error & { code?: string }) => ({ code: error.code, message: error.message }),
    );

  it('adds an OAuth server, connects it through consent, shows its state, disconnects; client_credentials by flags', async () => {
    // The real CLI, once: `servers add --oauth` is wired into `gatehouse`.
    const added = await runCli(
      ['servers', 'add', mcp.url, '--id', 'docs', '--private-network', '--oauth', 'shared', '--scope', SCOPE, '--json'],
      env,
    );
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout).installed.auth).toMatchObject({ type: 'oauth', mode: 'shared', scopes: [SCOPE] });
    // A flag without its mode, and OAuth flags on another auth type: clear refusals, nothing sent.
    expect(await refusal(cli('add', mcp.url, '--id', 'nope', '--client-id', 'x'))).toEqual({
      code: 'validation_error',
      message: 'The OAuth flags (--grant, --client-id, …) go with --oauth <mode>.',
    });
    expect(await refusal(cli('auth', 'docs', 'bearer', '--mode', 'shared'))).toMatchObject({
      code: 'validation_error',
    });
    expect(await refusal(cli('add', mcp.url, '--id', 'nope', '--oauth', 'sometimes'))).toMatchObject({
      code: 'validation_error',
    });
    expect((await gw.request('GET', '/api/mcp/servers/nope')).statusCode).toBe(404);

    expect((await cli('auth-status', 'docs')).auth).toMatchObject({
      mode: 'shared',
      state: 'not_connected',
    });
    const started = await cli('auth-connect', 'docs');
    // The printed link is Gatehouse's: opened in a browser signed in with the same token, it goes upstream.
    expect(new URL(started.authorizationUrl).pathname).toBe('/oauth/connect');
    const browser = await signedIn(gw, TEST_ADMIN_TOKEN);
    const opened = await browser.get(started.authorizationUrl);
    expect(opened.statusCode).toBe(302);
    const url = new URL(String(opened.headers.location));
    expect(url.origin).toBe(as.issuer);
    expect(url.searchParams.get('scope')?.split(' ')).toContain(SCOPE);
    const callback = await as.consent(url.href);
    expect((await browser.get(callback.href)).statusCode).toBe(200);
    const status = (await cli('auth-status', 'docs')).auth;
    expect(status).toMatchObject({ state: 'connected', issuer: as.issuer });
    expect((await gw.request('GET', '/api/mcp/servers/docs')).json().status).toBe('connected');
    expect(await cli('auth-disconnect', 'docs')).toMatchObject({ server: 'docs', removed: true });
    expect((await cli('auth-status', 'docs')).auth.state).toBe('not_connected');

    // Switching an installed server to client_credentials, its secret an env reference (never on the command line).
    await cli(
      'auth',
      'docs',
      'oauth',
      '--mode',
      'shared',
      '--grant',
      'client_credentials',
      '--client-id',
      'cli-client',
      '--client-secret-env',
      SECRET_ENV,
    );
    const record = (await gw.request('GET', '/api/mcp/servers/docs')).json();
    expect(record.auth).toEqual({
      type: 'oauth',
      mode: 'shared',
      grant: 'client_credentials',
      clientId: 'cli-client',
      clientSecret: { env: SECRET_ENV },
    });
    expect(JSON.stringify(record)).not.toContain(SECRET);
    const connected = await cli('auth-connect', 'docs');
    expect(connected.connected).toMatchObject({ state: 'connected', grant: 'client_credentials' });
  });

  it('--issuer binds the server to one authorization server; a bad one, or one without --oauth, is refused', async () => {
    const help = new Command('gatehouse');
    addServerCommands(help, () => loadConfig({ env: {} }));
    const add = help.commands.find((c) => c.name() === 'servers')?.commands.find((c) => c.name() === 'add');
    expect(add?.helpInformation()).toContain('--issuer <url>');

    const added = await cli(
      'add',
      mcp.url,
      '--id',
      'pinned',
      '--private-network',
      '--oauth',
      'shared',
      '--issuer',
      as.issuer,
      '--json',
    );
    expect(added.installed.auth).toMatchObject({ type: 'oauth', mode: 'shared', issuer: as.issuer });
    expect((await gw.request('GET', '/api/mcp/servers/pinned')).json().auth).toEqual({
      type: 'oauth',
      mode: 'shared',
      grant: 'authorization_code',
      issuer: as.issuer,
    });

    // The gateway's rule for auth.issuer: an http(s) URL without query, fragment or credentials; nothing installed.
    for (const bad of ['not a url', 'ftp://as.example', `${as.issuer}?tenant=1`, 'https://user:pw@as.example']) {
      const refused = await cli(
        'add',
        mcp.url,
        '--id',
        'nope',
        '--private-network',
        '--oauth',
        'shared',
        '--issuer',
        bad,
      ).then(
        () => expect.unreachable(`accepted ${bad}`),
        (error: Error & { code?: string; issues?: { path: string; message: string }[] }) => error,
      );
      expect(refused.code, bad).toBe('validation_error');
      expect(refused.issues, bad).toContainEqual({
        path: 'body.auth.issuer',
        message: "an http(s) URL without query, fragment or credentials (its metadata's issuer)",
      });
    }
    expect(await refusal(cli('add', mcp.url, '--id', 'nope', '--issuer', as.issuer))).toEqual({
      code: 'validation_error',
      message: 'The OAuth flags (--grant, --client-id, …) go with --oauth <mode>.',
    });
    expect((await gw.request('GET', '/api/mcp/servers/nope')).statusCode).toBe(404);
  });
});
