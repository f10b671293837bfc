import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDeclarativeConfig } from '../../src/declarative/load.js';
import { hashToken } from '../../src/identity/index.js';
import { rejection, thrown } from '../registry/helpers.js';
import { parse, sha256 } from './helpers.js';

const issuesOf = (text: string, env: NodeJS.ProcessEnv = {}) => {
  const error = thrown(() => parse(text, env));
  expect(error.code).toBe('validation_error');
  return {
    message: error.message,
    issues: error.details?.issues as Array<{ path: string; message: string; at?: string }>,
  };
};

describe('declarative config: loading gatehouse.yaml', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('names the file, the YAML path and the line of every problem', () => {
    const { message, issues } = issuesOf(
      [
        'servers:',
        '  - id: good',
        '    name: Good',
        '    transport: streamable-http',
        '    url: https://mcp.example.com/mcp',
        '  - id: second',
        '    name: Second',
        '    transport: streamable-http',
        '    colour: blue',
        '  - id: Bad_Id',
        '    name: Third',
        '    transport: stdio',
        '    command: node',
        'settings:',
        '  mcp.scope.audit: write',
        '  mcp.everything: true',
        'tokens:',
        '  - name: ci',
        '    role: agent',
        'extra: 1',
      ].join('\n'),
    );
    expect(message).toMatch(/^gatehouse\.yaml is not a valid Gatehouse config:/);
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'servers[1].colour', message: 'unknown key', at: '9:5' },
        { path: 'servers[1].url', message: 'required for streamable-http', at: '6:5' },
        expect.objectContaining({ path: 'servers[2].id', at: '10:5' }),
        expect.objectContaining({ path: 'settings["mcp.scope.audit"]', message: expect.stringContaining('no higher') }),
        expect.objectContaining({
          path: 'settings["mcp.everything"]',
          message: expect.stringContaining('unknown setting'),
        }),
        { path: 'tokens[0]', message: 'give exactly one of hash or env', at: '18:5' },
        { path: 'extra', message: 'unknown key', at: '20:1' },
      ]),
    );
    expect(message).toContain('gatehouse.yaml:9:5: servers[1].colour: unknown key');
  });

  it('refuses duplicates, contradictory tool policies, and env references outside the secret prefix', () => {
    const { issues } = issuesOf(`
servers:
  - {id: a, name: A, transport: streamable-http, url: "https://a.example/mcp", headers: {X-Key: {env: HOME}}}
  - id: a
    name: A again
    transport: streamable-http
    url: https://a.example/mcp
    toolPolicy: {allow: [echo], blocked: [echo]}
tokens:
  - {name: ci, role: agent, hash: "${sha256('x'.repeat(30))}"}
  - {name: ci, role: operator, groups: [x], hash: "${sha256('y'.repeat(30))}"}
`);
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'servers[1].id', message: 'duplicate of servers[0]' }),
        expect.objectContaining({ path: 'servers[1].toolPolicy', message: expect.stringContaining('echo is on both') }),
        expect.objectContaining({ path: 'tokens[1].name', message: 'duplicate of tokens[0]' }),
        expect.objectContaining({ path: 'tokens[1].groups', message: 'only agent tokens carry groups' }),
      ]),
    );
    const prefix = issuesOf(
      'servers: [{id: a, name: A, transport: streamable-http, url: "https://a.example/mcp", headers: {X-Key: {env: HOME}}}]',
    );
    expect(prefix.issues).toEqual([expect.objectContaining({ path: 'servers[0].headers.X-Key.env', at: '1:104' })]);
    expect(prefix.issues[0]?.message).toBe('must name a MCP_SECRET_* variable');
  });

  it('reads an env token reference at load and keeps only its hash', () => {
    const token = 'gh_env-token-value-0123456789abcdef';
    const loaded = parse('tokens: [{name: ops, role: operator, env: GH_OPS_TOKEN}]', { GH_OPS_TOKEN: token });
    expect(loaded.tokens).toEqual([{ name: 'ops', role: 'operator', hash: hashToken(token) }]);
    expect(JSON.stringify(loaded)).not.toContain(token);

    const byHash = parse(`tokens: [{name: ci, role: agent, hash: "sha256:${hashToken(token).toUpperCase()}"}]`);
    expect(byHash.tokens?.[0]?.hash).toBe(hashToken(token));

    expect(issuesOf('tokens: [{name: ops, role: operator, env: GH_UNSET_TOKEN}]').issues).toEqual([
      { path: 'tokens[0].env', message: 'GH_UNSET_TOKEN is not set', at: '1:38' },
    ]);
    expect(issuesOf('tokens: [{name: ops, role: operator, env: SHORT}]', { SHORT: 'abc' }).issues[0]?.message).toBe(
      'the token in SHORT is shorter than 24',
    );
  });

  it('warns about literal secrets without repeating them, and accepts an empty file', () => {
    const loaded = parse({
      servers: [
        {
          id: 'a',
          name: 'A',
          transport: 'stdio',
          command: 'node',
          env: { API_KEY: 'literal-secret-value', OTHER: { env: 'MCP_SECRET_OTHER' } },
        },
      ],
    });
    expect(loaded.warnings).toHaveLength(1);
    expect(loaded.warnings[0]).toContain('servers[0].env.API_KEY is a literal secret in gatehouse.yaml');
    expect(loaded.warnings[0]).not.toContain('literal-secret-value');
    expect(parse('')).toEqual({ file: 'gatehouse.yaml', warnings: [] });
  });

  it('reports YAML syntax errors and unreadable files with their location', async () => {
    const syntax = issuesOf('servers:\n  - id: a\n   name: b\n');
    expect(syntax.message).toMatch(/gatehouse\.yaml:3:\d+: /);
    expect(issuesOf('- just\n- a list\n').issues).toEqual([
      expect.objectContaining({ path: '(top level)', at: '1:1' }),
    ]);

    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-declarative-'));
    dirs.push(dir);
    const missing = await rejection(
      loadDeclarativeConfig(join(dir, 'nope.yaml'), { env: {}, secretEnvPrefix: 'MCP_SECRET_' }),
    );
    expect(missing.message).toBe(`Cannot read the config file ${join(dir, 'nope.yaml')} (ENOENT).`);
    const file = join(dir, 'gatehouse.yaml');
    writeFileSync(file, 'settings: {hub.rateLimit: 0}\n');
    const invalid = await rejection(loadDeclarativeConfig(file, { env: {}, secretEnvPrefix: 'MCP_SECRET_' }));
    expect(invalid.message).toContain(`${file}:1:12: settings["hub.rateLimit"]: `);
  });
});
