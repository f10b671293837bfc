import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type Catalog, createCatalog, loadCatalog } from '../../src/registry/catalog.js';
import { SERVER_ID_PATTERN } from '../../src/registry/ids.js';
import { parseSpec } from '../../src/registry/manifest.js';
import { rejection, thrown } from './helpers.js';

const stdio = (name: string, category: string, description: string, extra: object = {}) => ({
  name,
  title: name.split('/').at(-1),
  description,
  category,
  transport: 'stdio',
  command: 'npx',
  args: ['-y', `${name.split('/').at(-1)}-pkg`],
  ...extra,
});
const SMALL = {
  version: 1,
  servers: [
    stdio('io.github.acme/alpha', 'files', 'Reads files.'),
    stdio('io.github.acme/beta', 'database', 'Queries SQL databases.', { envRequired: ['DB_URL'] }),
    stdio('io.github.acme/gamma', 'database', 'A graph store for files and notes.'),
    {
      name: 'com.example/delta',
      id: 'delta-remote',
      title: 'Delta',
      description: 'A hosted server.',
      category: 'web',
      transport: 'streamable-http',
      url: 'https://delta.example.com/mcp',
      homepage: 'https://example.com/delta',
    },
  ],
};

describe('the bundled catalog', async () => {
  const catalog = await loadCatalog();
  const all = catalog.list({ limit: 500 }).items;

  it('holds the MCP reference servers and popular ones', () => {
    expect(catalog.size).toBeGreaterThanOrEqual(25);
    for (const name of ['filesystem', 'git', 'memory', 'fetch', 'time', 'sequential-thinking', 'everything']) {
      expect(catalog.get(`io.github.modelcontextprotocol/${name}`), name).toBeDefined();
    }
    for (const id of [
      'github',
      'playwright',
      'puppeteer',
      'sqlite',
      'postgres',
      'slack',
      'brave-search',
      'notion',
      'sentry',
    ]) {
      expect(
        all.some((e) => catalog.toManifest(e).id === id),
        id,
      ).toBe(true);
    }
  });

  it('gives every entry a valid, unique id and a launch line within the spec grammars', () => {
    const ids = all.map((e) => catalog.toManifest(e).id);
    for (const id of ids) expect(id).toMatch(SERVER_ID_PATTERN);
    expect(new Set(ids).size).toBe(ids.length);
    for (const entry of all) {
      const args = entry.args ?? [];
      // The package each preset runs passes the same strict grammar as a user's spec.
      if (entry.command === 'npx') expect(() => parseSpec(`npm:${args[1]}`), entry.name).not.toThrow();
      else if (entry.command === 'uvx') expect(() => parseSpec(`uvx:${args[0]}`), entry.name).not.toThrow();
      else if (entry.command === 'docker') expect(() => parseSpec(`oci://${args.at(-1)}`), entry.name).not.toThrow();
      else expect(entry.transport, entry.name).toBe('streamable-http');
    }
  });

  it('turns a preset into a ResolvedManifest', () => {
    expect(catalog.toManifest(catalog.preset('io.github.modelcontextprotocol/filesystem'))).toEqual({
      id: 'filesystem',
      name: 'io.github.modelcontextprotocol/filesystem',
      description: expect.stringContaining('directories'),
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-filesystem'],
      tools: [],
      resources: [],
      prompts: [],
      envRequired: [],
      // It serves nothing without folders: installing it asks for them.
      argsRequired: 'one or more folders it may use (absolute paths)',
      sourceKind: 'npm',
      sourceUrl: 'https://github.com/modelcontextprotocol/servers/tree/main/src/filesystem',
    });
    const github = catalog.toManifest(catalog.preset('io.github.github/github-mcp-server'));
    expect(github).toMatchObject({ id: 'github', sourceKind: 'oci', envRequired: ['GITHUB_PERSONAL_ACCESS_TOKEN'] });
    expect(github.args).toContain('GITHUB_PERSONAL_ACCESS_TOKEN'); // docker passes it into the container
    expect(catalog.toManifest(catalog.preset('io.github.modelcontextprotocol/time'))).toMatchObject({
      sourceKind: 'uvx',
    });
  });
});

describe('catalog queries', () => {
  const catalog: Catalog = createCatalog(SMALL);
  const names = (page: { items: Array<{ name: string }> }) => page.items.map((e) => e.name);

  it('lists everything in file order by default', () => {
    const page = catalog.list();
    expect(names(page)).toEqual(SMALL.servers.map((s) => s.name));
    expect(page.total).toBe(4);
  });

  it('filters by case-insensitive text in name, title or description', () => {
    expect(names(catalog.list({ q: 'ALPHA' }))).toEqual(['io.github.acme/alpha']);
    expect(names(catalog.list({ q: 'files' }))).toEqual(['io.github.acme/alpha', 'io.github.acme/gamma']);
    expect(names(catalog.list({ q: 'com.example' }))).toEqual(['com.example/delta']);
    expect(names(catalog.list({ q: 'sql' }))).toEqual(['io.github.acme/beta']);
    expect(catalog.list({ q: 'nothing like this' })).toEqual({ items: [], total: 0 });
  });

  it('filters by category, alone and with text', () => {
    expect(names(catalog.list({ category: 'database' }))).toEqual(['io.github.acme/beta', 'io.github.acme/gamma']);
    expect(names(catalog.list({ category: 'database', q: 'graph' }))).toEqual(['io.github.acme/gamma']);
    expect(catalog.list({ category: 'nope' }).total).toBe(0);
  });

  it('pages with limit and offset, total counting every match', () => {
    const page = catalog.list({ limit: 2, offset: 1 });
    expect(names(page)).toEqual(['io.github.acme/beta', 'io.github.acme/gamma']);
    expect(page.total).toBe(4);
    expect(catalog.list({ category: 'database', limit: 1, offset: 1 })).toMatchObject({ total: 2 });
    expect(names(catalog.list({ category: 'database', limit: 1, offset: 1 }))).toEqual(['io.github.acme/gamma']);
    expect(catalog.list({ offset: 10 })).toEqual({ items: [], total: 4 });
  });

  it('lists categories sorted and once each', () => {
    expect(catalog.categories()).toEqual(['database', 'files', 'web']);
  });

  it('gets by name case-insensitively, and presets refuse unknown names', () => {
    expect(catalog.get('IO.GITHUB.ACME/BETA')?.envRequired).toEqual(['DB_URL']);
    expect(catalog.get('io.github.acme/nope')).toBeUndefined();
    const error = thrown(() => catalog.preset('io.github.acme/nope'));
    expect(error.code).toBe('mcp.preset_not_found');
    expect(error.status).toBe(404);
  });

  it('makes manifests that the caller may change without changing the catalog', () => {
    const delta = catalog.toManifest(catalog.preset('com.example/delta'));
    expect(delta).toMatchObject({
      id: 'delta-remote',
      transport: 'streamable-http',
      url: 'https://delta.example.com/mcp',
      sourceKind: 'url',
      sourceUrl: 'https://example.com/delta',
    });
    expect(delta.command).toBeUndefined();
    const beta = catalog.toManifest(catalog.preset('io.github.acme/beta'));
    beta.args?.push('--evil');
    beta.envRequired.push('X');
    expect(catalog.get('io.github.acme/beta')?.args).toEqual(['-y', 'beta-pkg']);
    expect(catalog.toManifest(catalog.preset('io.github.acme/beta')).envRequired).toEqual(['DB_URL']);
  });
});

describe('a bad catalog file fails at start with a clear message', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-catalog-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };
  const withServer = (patch: object, at = 1) => ({
    version: 1,
    servers: SMALL.servers.map((s, i) => (i === at ? { ...s, ...patch } : s)),
  });

  it('names a missing file', async () => {
    const path = join(dir, 'missing.json');
    const error = await rejection(loadCatalog(path));
    expect(error.code).toBe('validation_error');
    expect(error.message).toContain(path);
    expect(error.message).toContain('ENOENT');
  });

  it('names a file that is not JSON', async () => {
    const path = file('broken.json', '{"version": 1, "servers": [');
    const error = await rejection(loadCatalog(path));
    expect(error.message).toContain(`The catalog file ${path} is not valid JSON`);
  });

  it.each([
    ['a misspelt field', withServer({ comand: 'npx' }), /servers\.1: .*comand/],
    ['a stdio entry without a command', withServer({ command: undefined }), /servers\.1: a stdio entry has a command/],
    ['an http entry with a command', withServer({ command: 'npx' }, 3), /servers\.3: a streamable-http entry/],
    ['a plain-http url', withServer({ url: 'http://delta.example.com/mcp' }, 3), /servers\.3\.url/],
    ['a command with spaces', withServer({ command: 'sh -c' }), /servers\.1\.command/],
    ['a bad env name', withServer({ envRequired: ['DB-URL'] }), /servers\.1\.envRequired\.0/],
    ['a bad category', withServer({ category: 'Data Base' }), /servers\.1\.category/],
    ['a reserved id', withServer({ id: 'gatehouse' }), /servers\.1\.id: that server id is reserved/],
    ['a name with no id in it', withServer({ name: 'io.github.acme/---' }), /servers\.1\.name: no server id/],
    ['a duplicate name', withServer({ name: 'IO.GITHUB.ACME/ALPHA' }), /servers\.1\.name: duplicate name/],
    ['a duplicate id', withServer({ id: 'alpha' }), /servers\.1\.id: duplicate id/],
    ['a wrong version', { ...SMALL, version: 2 }, /version/],
    ['no servers list', { version: 1 }, /servers/],
  ])('refuses %s', async (_what, content, message) => {
    const path = file('bad.json', JSON.stringify(content));
    const error = await rejection(loadCatalog(path));
    expect(error.code).toBe('validation_error');
    expect(error.message).toContain(`Invalid catalog file ${path}`);
    expect(error.message).toMatch(message);
    expect(error.details?.issues).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: expect.any(String) })]),
    );
  });

  it('loads a good file given by path', async () => {
    const catalog = await loadCatalog(file('good.json', JSON.stringify(SMALL)));
    expect(catalog.size).toBe(4);
  });
});
