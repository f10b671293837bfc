import { afterEach, describe, expect, it } from 'vitest';
import { createEgressGuard, type EgressGuard } from '../../src/egress/index.js';
import { fetchManifest, MANIFEST_MAX_BYTES, resolveInstallUrl } from '../../src/registry/manifest.js';
import { PRIVATE_HOST, PUBLIC_HOST, rejection, serveBody, startServer, type TestServer } from './helpers.js';

const cleanup: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((c) => c.close()));
});

function guard(): EgressGuard {
  const g = createEgressGuard({ testPublicAddresses: [PUBLIC_HOST], allowHttp: true });
  cleanup.push(g);
  return g;
}
async function server(...args: Parameters<typeof startServer>): Promise<TestServer> {
  const s = await startServer(...args);
  cleanup.push(s);
  return s;
}

const weather = {
  name: 'io.github.acme/weather',
  description: 'Forecasts.',
  transport: 'stdio',
  command: 'npx',
  args: ['-y', '@acme/weather-mcp', '--units=metric'],
  tools: [{ name: 'forecast', description: 'Forecast for a city', inputSchema: { type: 'object' } }],
  resources: [{ uri: 'weather://cities' }, { name: 'stations', uri: 'weather://stations', description: 'All' }],
  prompts: [{ name: 'daily' }],
  env: { WEATHER_API_KEY: 'paste your key here' },
  author: 'Acme',
};

describe('fetchManifest: a manifest served from loopback through the guard', () => {
  it('fetches, validates and resolves a good manifest', async () => {
    const upstream = await server(PUBLIC_HOST, serveBody(weather));
    const url = `${upstream.origin}/weather/manifest.json`;
    expect(await fetchManifest(url, guard())).toEqual({
      id: 'weather',
      name: 'io.github.acme/weather',
      description: 'Forecasts.',
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@acme/weather-mcp', '--units=metric'],
      tools: [{ name: 'forecast', description: 'Forecast for a city' }],
      resources: [
        { name: 'weather://cities', uri: 'weather://cities' },
        { name: 'stations', uri: 'weather://stations', description: 'All' },
      ],
      prompts: [{ name: 'daily' }],
      envRequired: ['WEATHER_API_KEY'],
      sourceKind: 'manifest',
      sourceUrl: url,
    });
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]?.method).toBe('GET');
    expect(upstream.requests[0]?.headers.accept).toBe('application/json');
  });

  it('reads env declarations in their common forms', async () => {
    const upstream = await server(
      PUBLIC_HOST,
      serveBody({
        name: 'x',
        url: 'https://mcp.example.com/mcp',
        envRequired: ['A'],
        env_required: ['B'],
        env: ['C', { name: 'D' }, { name: 'E', required: false }, { name: 'F', isRequired: false }],
      }),
    );
    const manifest = await fetchManifest(`${upstream.origin}/m.json`, guard());
    expect(manifest.envRequired).toEqual(['A', 'B', 'C', 'D']);
    expect(manifest).toMatchObject({ transport: 'streamable-http', url: 'https://mcp.example.com/mcp' });
    expect(manifest.command).toBeUndefined();
  });

  it('reads an MCP registry server.json: remotes first, packages when stdio is asked for', async () => {
    const serverJson = {
      name: 'io.github.acme/notes',
      description: 'Notes.',
      version: '1.0.0',
      remotes: [
        { type: 'sse', url: 'https://notes.example.com/sse' },
        { type: 'streamable-http', url: 'https://notes.example.com/mcp' },
      ],
      packages: [
        { registryType: 'nuget', identifier: 'Acme.Notes', version: '1.0.0' },
        { registryType: 'constructor', identifier: 'x' },
        {
          registryType: 'npm',
          identifier: '@acme/notes-mcp',
          version: '1.0.0',
          transport: { type: 'stdio' },
          environmentVariables: [
            { name: 'NOTES_TOKEN', isRequired: true, isSecret: true },
            { name: 'NOTES_LOG', isRequired: false },
          ],
        },
      ],
    };
    const remote = await server(PUBLIC_HOST, serveBody(serverJson));
    expect(await fetchManifest(`${remote.origin}/server.json`, guard())).toMatchObject({
      id: 'notes',
      transport: 'streamable-http',
      url: 'https://notes.example.com/mcp',
      envRequired: ['NOTES_TOKEN'],
    });
    const local = await server(PUBLIC_HOST, serveBody({ ...serverJson, transport: 'stdio' }));
    expect(await fetchManifest(`${local.origin}/server.json`, guard())).toMatchObject({
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@acme/notes-mcp@1.0.0'],
      spec: 'npm:@acme/notes-mcp@1.0.0',
    });
    // The legacy HTTP+SSE remote when asked for, or when it is the only way to reach the server.
    const sse = await server(PUBLIC_HOST, serveBody({ ...serverJson, transport: 'sse' }));
    expect(await fetchManifest(`${sse.origin}/server.json`, guard())).toMatchObject({
      transport: 'sse',
      url: 'https://notes.example.com/sse',
    });
    const onlySse = await server(
      PUBLIC_HOST,
      serveBody({ ...serverJson, remotes: [serverJson.remotes[0]], packages: [] }),
    );
    expect(await fetchManifest(`${onlySse.origin}/server.json`, guard())).toMatchObject({ transport: 'sse' });
  });

  it.each([
    [{ registryType: 'pypi', identifier: 'mcp-server-notes', version: '2.0' }, 'uvx', ['mcp-server-notes@2.0']],
    [
      { registryType: 'oci', identifier: 'ghcr.io/acme/notes', version: '2.0' },
      'docker',
      ['run', '-i', '--rm', 'ghcr.io/acme/notes:2.0'],
    ],
    [
      { registryType: 'oci', identifier: 'ghcr.io/acme/notes:1.0', version: '2.0' },
      'docker',
      ['run', '-i', '--rm', 'ghcr.io/acme/notes:1.0'],
    ],
  ])('runs a registry package %j', async (pkg, command, args) => {
    const upstream = await server(PUBLIC_HOST, serveBody({ name: 'io.github.acme/notes', packages: [pkg] }));
    expect(await fetchManifest(`${upstream.origin}/server.json`, guard())).toMatchObject({ command, args });
  });

  it('refuses a registry package outside the spec grammar', async () => {
    const pkg = { registryType: 'npm', identifier: '@acme/notes;rm -rf ~', version: '1.0.0' };
    const upstream = await server(PUBLIC_HOST, serveBody({ name: 'io.github.acme/notes', packages: [pkg] }));
    const error = await rejection(fetchManifest(`${upstream.origin}/server.json`, guard()));
    expect(error.code).toBe('mcp.manifest_invalid');
    expect(error.details?.reason).toBe('invalid_spec');
  });

  it('takes the id from the options, then the manifest, then the name', async () => {
    const upstream = await server(PUBLIC_HOST, serveBody({ ...weather, id: 'acme-weather' }));
    const url = `${upstream.origin}/manifest.json`;
    expect((await fetchManifest(url, guard())).id).toBe('acme-weather');
    expect((await fetchManifest(url, guard(), { id: 'mine' })).id).toBe('mine');
  });

  it('refuses bad JSON and text that is not UTF-8', async () => {
    const bad = await server(PUBLIC_HOST, serveBody('{"name": "x",'));
    const error = await rejection(fetchManifest(`${bad.origin}/manifest.json`, guard()));
    expect(error.code).toBe('mcp.manifest_invalid');
    expect(error.details?.reason).toBe('invalid_json');
    expect(error.status).toBe(400);

    const latin1 = await server(PUBLIC_HOST, (_req, res) => res.end(Buffer.from([0x7b, 0x22, 0xe9, 0x22, 0x7d])));
    expect((await rejection(fetchManifest(`${latin1.origin}/m.json`, guard()))).details?.reason).toBe('invalid_json');
  });

  it.each([
    ['a non-object', [], 'invalid_shape'],
    ['a name of the wrong type', { name: 5, command: 'npx' }, 'invalid_shape'],
    ['a command with spaces', { name: 'x', command: 'rm -rf /' }, 'invalid_shape'],
    ['an option-looking command', { name: 'x', command: '--help' }, 'invalid_shape'],
    ['an argument with a control character', { name: 'x', command: 'npx', args: ['a\u0000b'] }, 'invalid_shape'],
    ['a reserved id', { ...weather, id: 'gatehouse' }, 'invalid_shape'],
    ['a bad env name', { ...weather, env: ['NOT-A-NAME'] }, 'invalid_shape'],
    ['an unknown transport', { ...weather, transport: 'websocket' }, 'invalid_shape'],
    ['no way to reach the server', { name: 'x', description: 'nothing else' }, 'no_launch'],
    ['stdio asked for but only a url', { name: 'x', transport: 'stdio', url: 'https://a.example/mcp' }, 'no_launch'],
    ['a hostile embedded spec', { name: 'x', spec: 'npm:foo;rm -rf /' }, 'invalid_spec'],
    ['credentials in the url', { name: 'x', url: 'https://u:p@a.example/mcp' }, 'invalid_url'],
    ['a url that is not http(s)', { name: 'x', url: 'file:///etc/passwd' }, 'invalid_url'],
  ])('refuses %s', async (_what, body, reason) => {
    const upstream = await server(PUBLIC_HOST, serveBody(body));
    const error = await rejection(fetchManifest(`${upstream.origin}/manifest.json`, guard()));
    expect(error.code).toBe('mcp.manifest_invalid');
    expect(error.details?.reason).toBe(reason);
    if (reason === 'invalid_shape') expect(error.details?.issues).toEqual(expect.arrayContaining([expect.anything()]));
  });

  it('accepts a manifest of exactly 256 KB and refuses one byte more', async () => {
    const json = JSON.stringify(weather);
    const exact = json + ' '.repeat(MANIFEST_MAX_BYTES - json.length);
    const atCap = await server(PUBLIC_HOST, serveBody(exact));
    expect((await fetchManifest(`${atCap.origin}/m.json`, guard())).id).toBe('weather');
    const over = await server(PUBLIC_HOST, serveBody(`${exact} `));
    const error = await rejection(fetchManifest(`${over.origin}/m.json`, guard()));
    expect(error.details).toMatchObject({ reason: 'too_large', limit: MANIFEST_MAX_BYTES });
  });

  it('stops reading an endless chunked body (no content-length) at the cap', async () => {
    let closed = false;
    const endless = await server(PUBLIC_HOST, (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }); // no content-length: chunked
      res.write('{"name": "x", "description": "');
      const chunk = 'a'.repeat(16 * 1024);
      const pump = () => {
        while (!closed && res.write(chunk)) {}
      };
      res.on('drain', pump);
      req.socket.on('close', () => {
        closed = true;
      });
      pump();
    });
    const error = await rejection(fetchManifest(`${endless.origin}/m.json`, guard(), { timeoutMs: 20_000 }));
    expect(error.code).toBe('mcp.manifest_invalid');
    expect(error.details?.reason).toBe('too_large');
    expect(endless.requests[0]?.headers['content-length']).toBeUndefined();
  });

  it('refuses a declared content-length over the cap without waiting for the body', async () => {
    const liar = await server(PUBLIC_HOST, (_req, res) => {
      res.writeHead(200, { 'content-length': String(MANIFEST_MAX_BYTES + 1) });
      res.write('{'); // and then nothing: only the header can end this quickly
    });
    const error = await rejection(fetchManifest(`${liar.origin}/m.json`, guard(), { timeoutMs: 10_000 }));
    expect(error.details?.reason).toBe('too_large');
  });

  it('times out a server that never answers, and one that stalls mid-body', async () => {
    const silent = await server(PUBLIC_HOST, () => {});
    const started = Date.now();
    const error = await rejection(fetchManifest(`${silent.origin}/m.json`, guard(), { timeoutMs: 300 }));
    expect(error.code).toBe('upstream_timeout');
    expect(error.status).toBe(504);
    expect(error.details).toEqual({ timeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(5_000);

    const stalling = await server(PUBLIC_HOST, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"name": "x", ');
    });
    expect((await rejection(fetchManifest(`${stalling.origin}/m.json`, guard(), { timeoutMs: 300 }))).code).toBe(
      'upstream_timeout',
    );
  });

  it('answers a non-2xx status as an invalid manifest', async () => {
    const missing = await server(PUBLIC_HOST, serveBody({ error: 'nope' }, 404));
    const error = await rejection(fetchManifest(`${missing.origin}/m.json`, guard()));
    expect(error.code).toBe('mcp.manifest_invalid');
    expect(error.details).toMatchObject({ reason: 'http_status', status: 404 });
  });

  it("passes the guard's own refusals through", async () => {
    const privateServer = await server(PRIVATE_HOST, serveBody(weather));
    const blocked = await rejection(fetchManifest(`${privateServer.origin}/manifest.json`, guard()));
    expect(blocked.code).toBe('private_network_blocked');
    expect(privateServer.requests).toHaveLength(0);

    const redirecting = await server(PUBLIC_HOST, (_req, res) => {
      res.writeHead(302, { location: `${privateServer.origin}/manifest.json` });
      res.end();
    });
    const redirect = await rejection(fetchManifest(`${redirecting.origin}/m.json`, guard()));
    expect(redirect.code).toBe('upstream_protocol_error');
    expect(privateServer.requests).toHaveLength(0);

    const gone = await server(PUBLIC_HOST, () => {});
    const origin = gone.origin;
    await gone.close();
    expect((await rejection(fetchManifest(`${origin}/m.json`, guard()))).code).toBe('upstream_unreachable');
  });
});

describe('resolveInstallUrl: the {url} install rules', () => {
  it('parses specs locally', async () => {
    const g = guard();
    expect(await resolveInstallUrl('npm:@acme/tool@1.0.0', g)).toMatchObject({ sourceKind: 'npm', id: 'tool' });
    expect(await resolveInstallUrl('uvx:mcp-server-time', g)).toMatchObject({ sourceKind: 'uvx' });
    expect(await resolveInstallUrl('oci://ghcr.io/a/b:1', g)).toMatchObject({ sourceKind: 'oci' });
    expect(await resolveInstallUrl('git+https://github.com/a/b', g)).toMatchObject({ sourceKind: 'git' });
  });

  it('fetches an http(s) URL ending in .json as a manifest', async () => {
    const upstream = await server(PUBLIC_HOST, serveBody(weather));
    const manifest = await resolveInstallUrl(`${upstream.origin}/path/Manifest.JSON?v=1`, guard());
    expect(manifest).toMatchObject({ sourceKind: 'manifest', id: 'weather', command: 'npx' });
    expect(upstream.requests[0]?.url).toBe('/path/Manifest.JSON?v=1');
  });

  it('takes any other http(s) URL as a Streamable HTTP server named after its host, port and path, without fetching it', async () => {
    const upstream = await server(PUBLIC_HOST, serveBody(weather));
    const { port } = new URL(upstream.origin);
    expect(await resolveInstallUrl(`${upstream.origin}/mcp`, guard())).toEqual({
      id: `127-0-0-2-${port}`,
      name: `${PUBLIC_HOST}:${port}`,
      description: `Streamable HTTP server at ${new URL(upstream.origin).host}`,
      transport: 'streamable-http',
      url: `${upstream.origin}/mcp`,
      tools: [],
      resources: [],
      prompts: [],
      envRequired: [],
      sourceKind: 'url',
    });
    expect(upstream.requests).toHaveLength(0);
    expect(await resolveInstallUrl('https://MCP.Example.com/api/mcp', guard())).toMatchObject({
      id: 'mcp-example-com-api',
      name: 'mcp.example.com/api',
      url: 'https://mcp.example.com/api/mcp',
    });
    expect(await resolveInstallUrl('https://mcp.example.com/mcp', guard())).toMatchObject({
      id: 'mcp-example-com',
      name: 'mcp.example.com',
    });
    expect((await resolveInstallUrl('http://[::1]:9000/mcp', guard())).name).toBe('[::1]:9000');
    expect((await resolveInstallUrl('http://[::1]/mcp', guard())).name).toBe('::1');
    // Two servers on one host are two names and two ids.
    const [a, b] = await Promise.all([
      resolveInstallUrl('http://127.0.0.1:3001/mcp', guard()),
      resolveInstallUrl('http://127.0.0.1:3002/tools/mcp', guard()),
    ]);
    expect([a.name, a.id, b.name, b.id]).toEqual([
      '127.0.0.1:3001',
      '127-0-0-1-3001',
      '127.0.0.1:3002/tools',
      '127-0-0-1-3002-tools',
    ]);
  });

  it('needs an explicit id where the host derives a reserved one', async () => {
    expect((await rejection(resolveInstallUrl('http://gatehouse/mcp', guard()))).code).toBe('validation_error');
    expect((await resolveInstallUrl('http://gatehouse:8080/mcp', guard(), { id: 'lan-gw' })).id).toBe('lan-gw');
  });

  it('refuses credentials in the URL, other schemes and malformed input', async () => {
    const credentials = await rejection(resolveInstallUrl('https://user:secret@mcp.example.com/mcp', guard()));
    expect(credentials.code).toBe('validation_error');
    expect(credentials.details?.reason).toBe('credentials_in_url');
    expect(JSON.stringify(credentials.toBody())).not.toContain('secret');
    for (const input of ['ftp://example.com/x', 'file:///etc/passwd', 'ws://example.com/mcp', 'example.com/mcp']) {
      expect((await rejection(resolveInstallUrl(input, guard()))).code).toBe('mcp.spec_unsupported');
    }
    for (const input of ['https://exa mple.com/', 'https://', `https://example.com/${'a'.repeat(2100)}`]) {
      expect((await rejection(resolveInstallUrl(input, guard()))).code).toBe('validation_error');
    }
  });
});
