/**
 * A refused config file changes nothing: every refusal the apply can meet is found before the first write
 * (settings, servers, tokens, audit rows, stream events). And a file applied twice writes nothing the second time.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';
import { rejection } from '../registry/helpers.js';
import { apply, parse, sha256, writes } from './helpers.js';

const GOOD = { id: 'good', name: 'Good', transport: 'streamable-http', url: 'http://127.0.0.2:9/mcp' };
const TOKEN = 'gh_declarative-atomic-token-0123456789abcdef';

describeEachStore('declarative config: a refused file changes nothing', (target) => {
  let gw: TestGateway;

  beforeEach(async () => {
    gw = await startTestGateway(target);
  });
  afterEach(async () => {
    await gw.close();
  });

  /** Applies the file expecting a refusal, and checks that nothing at all was written. */
  async function refused(file: object) {
    const before = await writes(gw.gateway.store);
    const error = await rejection(apply(gw, file));
    expect(await writes(gw.gateway.store)).toEqual(before);
    expect((await gw.gateway.settings.current())['hub.rateLimit']).toBe(600);
    expect((await gw.request('GET', '/api/mcp/servers')).json().total).toBe(0);
    const tokens = (await gw.request('GET', '/api/tokens')).json().tokens as Array<{ name: string }>;
    expect(tokens.map((t) => t.name)).toEqual(['admin']);
    return error;
  }

  it('refuses credentials in a later server URL before the settings and earlier servers are written', async () => {
    const error = await refused({
      settings: { 'hub.rateLimit': 7 },
      servers: [GOOD, { ...GOOD, id: 'bad', name: 'Bad', url: 'http://user:pw@127.0.0.2:9/mcp' }],
    });
    expect(error.code).toBe('validation_error');
    expect(error.message).toContain('gatehouse.yaml: servers[1].url: Credentials in the URL are refused');
    expect(error.details).toMatchObject({ reason: 'credentials_in_url', issues: [{ path: 'servers[1].url' }] });
  });

  it('refuses credentials in the URL an installed server would be given, writing nothing', async () => {
    await apply(gw, { servers: [GOOD] });
    const before = await writes(gw.gateway.store);
    const error = await rejection(
      apply(gw, { settings: { 'hub.rateLimit': 7 }, servers: [{ ...GOOD, url: 'http://user:pw@127.0.0.2:9/mcp' }] }),
    );
    expect(error.message).toContain('gatehouse.yaml: servers[0].url: Credentials in the URL are refused');
    expect(await writes(gw.gateway.store)).toEqual(before);
    expect((await gw.gateway.settings.current())['hub.rateLimit']).toBe(600);
    expect((await gw.request('GET', '/api/mcp/servers/good')).json().url).toBe(GOOD.url);
  });

  it('refuses a stdio command outside stdio.allowedCommands before anything is written', async () => {
    const error = await refused({
      settings: { 'hub.rateLimit': 7 },
      servers: [GOOD, { id: 'shell', name: 'Shell', transport: 'stdio', command: 'bash' }],
    });
    expect(error.code).toBe('stdio.command_not_allowed');
    expect(error.message).toContain('gatehouse.yaml: servers[1].command: The command "bash" is not allowed');
  });

  it("holds a stdio command to the allowlist the file's own settings make (normalized)", async () => {
    const report = await apply(gw, {
      settings: { 'stdio.allowedCommands': [' bash ', 'npx'] },
      servers: [{ id: 'shell', name: 'Shell', transport: 'stdio', command: 'bash', enabled: false }],
    });
    expect(report.servers.created).toEqual(['shell']);

    // And a file that narrows the list refuses the command it no longer allows, writing nothing.
    const narrowed = await rejection(
      apply(gw, {
        settings: { 'stdio.allowedCommands': ['npx'] },
        servers: [{ id: 'other', name: 'Other', transport: 'stdio', command: 'bash' }],
      }),
    );
    expect(narrowed.code).toBe('stdio.command_not_allowed');
    expect((await gw.gateway.settings.current())['stdio.allowedCommands']).toEqual(['bash', 'npx']);
  });

  it('refuses two token entries with the same hash before the settings and the first token are written', async () => {
    const error = await refused({
      settings: { 'hub.rateLimit': 7 },
      tokens: [
        { name: 'first', role: 'agent', hash: sha256(TOKEN) },
        { name: 'second', role: 'agent', hash: sha256(TOKEN) },
      ],
    });
    expect(error.code).toBe('conflict');
    expect(error.message).toContain('gatehouse.yaml: tokens[1].hash: the same token as tokens[0]');
  });

  it('refuses a revoked token before the settings and the servers are written', async () => {
    await apply(gw, { tokens: [{ name: 'old', role: 'agent', hash: sha256(TOKEN) }] });
    await apply(gw, { tokens: [] }, { prune: true });
    const before = await writes(gw.gateway.store);
    const error = await rejection(
      apply(gw, {
        settings: { 'hub.rateLimit': 7 },
        servers: [GOOD],
        tokens: [{ name: 'old', role: 'agent', hash: sha256(TOKEN) }],
      }),
    );
    expect(error.code).toBe('conflict');
    expect(error.message).toContain('tokens[0]: this token cannot be registered');
    expect(await writes(gw.gateway.store)).toEqual(before);
    expect((await gw.gateway.settings.current())['hub.rateLimit']).toBe(600);
    expect((await gw.request('GET', '/api/mcp/servers')).json().total).toBe(0);
  });

  it('refuses an OAuth client secret referencing a variable outside the secret prefix when the file is read', () => {
    const auth = { type: 'oauth', mode: 'shared', clientId: 'gatehouse', clientSecret: { env: 'HOME' } };
    expect(() => parse({ servers: [{ ...GOOD, auth }] })).toThrow(/servers\[0\]\.auth\.clientSecret\.env/);
  });

  it("an OAuth server's issuer is part of its settings: a file that changes only it is applied", async () => {
    const auth = { type: 'oauth', mode: 'shared', issuer: 'https://auth.one.example' };
    await apply(gw, { servers: [{ ...GOOD, auth }] });
    const moved = await apply(gw, { servers: [{ ...GOOD, auth: { ...auth, issuer: 'https://auth.two.example' } }] });
    expect(moved.servers.updated).toEqual(['good']);
    expect((await gw.request('GET', '/api/mcp/servers/good')).json().auth.issuer).toBe('https://auth.two.example');
    const again = await apply(gw, { servers: [{ ...GOOD, auth: { ...auth, issuer: 'https://auth.two.example' } }] });
    expect(again.servers.unchanged).toEqual(['good']);
  });

  it('applies untrimmed stdio.allowedCommands once: the second apply writes nothing', async () => {
    const file = { settings: { 'stdio.allowedCommands': [' node ', 'npx'] } };
    expect((await apply(gw, file)).settings.updated).toEqual(['stdio.allowedCommands']);
    const before = await writes(gw.gateway.store);
    const again = await apply(gw, file);
    expect(again.settings).toMatchObject({ updated: [], unchanged: ['stdio.allowedCommands'] });
    expect(await writes(gw.gateway.store)).toEqual(before);
    expect((await gw.gateway.settings.current())['stdio.allowedCommands']).toEqual(['node', 'npx']);
  });
});
