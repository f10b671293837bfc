import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSpec } from '../../src/registry/manifest.js';
import { thrown } from './helpers.js';

const DIGEST = `sha256:${'a1'.repeat(32)}`;

describe('parseSpec: every spec kind, parsed locally', () => {
  it('npm: with scope and version → npx -y', () => {
    expect(parseSpec('npm:@modelcontextprotocol/server-filesystem@2025.8.21')).toEqual({
      id: 'server-filesystem',
      name: '@modelcontextprotocol/server-filesystem',
      description: 'npm package @modelcontextprotocol/server-filesystem@2025.8.21',
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-filesystem@2025.8.21'],
      tools: [],
      resources: [],
      prompts: [],
      envRequired: [],
      sourceKind: 'npm',
      sourceUrl: 'https://www.npmjs.com/package/@modelcontextprotocol/server-filesystem',
      spec: 'npm:@modelcontextprotocol/server-filesystem@2025.8.21',
    });
  });

  it.each([
    ['npx:tavily-mcp', ['-y', 'tavily-mcp'], 'tavily-mcp'],
    ['npm:exa-mcp-server@latest', ['-y', 'exa-mcp-server@latest'], 'exa-mcp-server'],
    ['npm:@playwright/mcp@0.0.41-beta.1', ['-y', '@playwright/mcp@0.0.41-beta.1'], 'mcp'],
    ['NPX:chrome-devtools-mcp', ['-y', 'chrome-devtools-mcp'], 'chrome-devtools-mcp'],
  ])('%s', (spec, args, id) => {
    const manifest = parseSpec(spec);
    expect(manifest).toMatchObject({ transport: 'stdio', command: 'npx', args, id, sourceKind: 'npm' });
  });

  it.each([
    ['uvx:mcp-server-fetch', ['mcp-server-fetch'], 'uvx:mcp-server-fetch'],
    ['uv:mcp-server-time==2025.1.0', ['mcp-server-time@2025.1.0'], 'uv:mcp-server-time@2025.1.0'],
    ['uvx:mcp-server-git@1.0', ['mcp-server-git@1.0'], 'uvx:mcp-server-git@1.0'],
    [
      'uvx:awslabs.aws-documentation-mcp-server@latest',
      ['awslabs.aws-documentation-mcp-server@latest'],
      'uvx:awslabs.aws-documentation-mcp-server@latest',
    ],
  ])('%s → uvx', (spec, args, normalized) => {
    const manifest = parseSpec(spec);
    expect(manifest).toMatchObject({ transport: 'stdio', command: 'uvx', args, sourceKind: 'uvx', spec: normalized });
    expect(manifest.sourceUrl).toMatch(/^https:\/\/pypi\.org\/project\/[^/]+\/$/);
  });

  it.each([
    ['oci://ghcr.io/github/github-mcp-server:v0.9.0', 'ghcr.io/github/github-mcp-server', 'github-mcp-server'],
    ['oci://mcp/fetch', 'mcp/fetch', 'fetch'],
    [`oci://localhost:5000/team/my_img@${DIGEST}`, 'localhost:5000/team/my_img', 'my-img'],
    [`oci://docker.io/library/alpine:3.20@${DIGEST}`, 'docker.io/library/alpine', 'alpine'],
  ])('%s → docker run -i --rm', (spec, name, id) => {
    const reference = spec.slice('oci://'.length);
    expect(parseSpec(spec)).toMatchObject({
      transport: 'stdio',
      command: 'docker',
      args: ['run', '-i', '--rm', reference],
      name,
      id,
      sourceKind: 'oci',
      spec,
    });
  });

  it.each([
    [
      'git+https://github.com/acme/weather-mcp.git#v1.2.0',
      'github.com/acme/weather-mcp',
      'weather-mcp',
      'https://github.com/acme/weather-mcp',
    ],
    ['git+https://gitlab.com/group/sub/project', 'gitlab.com/group/sub/project', 'project', undefined],
    ['git+https://GitHub.com/acme/tool#feature/x', 'github.com/acme/tool', 'tool', undefined],
  ])('%s → npx -y git+https://…', (spec, name, id, sourceUrl) => {
    const manifest = parseSpec(spec);
    expect(manifest).toMatchObject({
      transport: 'stdio',
      command: 'npx',
      args: ['-y', spec],
      name,
      id,
      sourceKind: 'git',
    });
    if (sourceUrl) expect(manifest.sourceUrl).toBe(sourceUrl);
  });

  it('takes an explicit id over the derived one, and checks it', () => {
    expect(parseSpec('npm:gatehouse', { id: 'gh-proxy' }).id).toBe('gh-proxy');
    expect(thrown(() => parseSpec('npm:gatehouse')).code).toBe('validation_error');
    expect(thrown(() => parseSpec('npm:foo', { id: 'Bad_Id' })).code).toBe('validation_error');
  });
});

describe('parseSpec: hostile and malformed specs are refused', () => {
  it.each([
    // shell metacharacters, whitespace, control and format characters
    'npm:foo;rm -rf /',
    'npm:foo;rm',
    'npm:foo$(id)',
    'npm:foo`id`',
    'npm:foo|cat',
    'npm:foo&&x',
    'npm:foo>x',
    'npm:foo bar',
    'npm:foo\nbar',
    'npm:foo\tbar',
    'npm:foo\u0000',
    'npm:foo\u202ebar',
    ' npm:foo',
    'npm:foo ',
    'uvx:$(x)',
    'uvx:pkg;ls',
    'oci://img;ls',
    'oci://ghcr.io/a/b:tag with space',
    'git+https://github.com/a/b#$(x)',
    // option-looking names that would be read as flags
    'npx:-e',
    'npx:--yes',
    'npm:-',
    'npm:@scope/-pkg',
    'npm:@-scope/pkg',
    'uvx:-rf',
    'uvx:--with=evil',
    'oci://-e',
    'oci://ghcr.io/a/b:-tag',
    'git+https://github.com/-a/b',
    'git+https://github.com/a/b#-x',
    // outside each registry's grammar
    'npm:',
    'npm:Foo',
    'npm:.hidden',
    'npm:_private',
    'npm:../etc',
    'npm:@scope/',
    'npm:@scope',
    'npm:foo@',
    'npm:foo@^1.0',
    'npm:foo@>=1',
    'npm:foo@1.0||2',
    'npm:foo*',
    'npm:~foo',
    `npm:${'a'.repeat(215)}`,
    'uvx:',
    'uvx:pkg==',
    'uvx:pkg>=1',
    'uvx:pkg=1',
    'uvx:pkg[extra]',
    'uv:.hidden',
    'uvx:pkg-',
    'oci:img',
    'oci://',
    'oci://IMG',
    'oci://ghcr.io/a//b',
    'oci://ghcr.io/a/b@sha256:short',
    'git+https://github.com/a',
    'git+https://github.com/a/b/',
    'git+https://127.0.0.1/a/b',
    'git+https://localhost/a/b',
    'git+https://github.com:22/a/b',
    'git+https://user:pw@github.com/a/b',
    'git+https://github.com/../b',
    'git+https://github.com/a/b#a..b',
    'git+https://github.com/a/b#',
    'git+https://github.com/a/b?x=1',
    'git+https:github.com/a/b',
  ])('%j → mcp.spec_unsupported', (spec) => {
    const error = thrown(() => parseSpec(spec));
    expect(error.code).toBe('mcp.spec_unsupported');
    expect(error.details?.reason).toMatch(/^(invalid_spec|invalid_characters|unsupported_scheme|invalid_length)$/);
  });

  it.each([
    'git+ssh://github.com/a/b',
    'git+http://github.com/a/b',
    'file:///etc/passwd',
    'javascript:alert(1)',
    'docker:img',
    'pip:requests',
    'foo',
    '@scope/pkg',
  ])('%j → unsupported scheme', (spec) => {
    const error = thrown(() => parseSpec(spec));
    expect(error.code).toBe('mcp.spec_unsupported');
    expect(error.details?.reason).toBe('unsupported_scheme');
  });

  it('refuses empty and over-long specs', () => {
    expect(thrown(() => parseSpec('')).details?.reason).toBe('invalid_length');
    expect(thrown(() => parseSpec(`npm:${'a'.repeat(2100)}`)).details?.reason).toBe('invalid_length');
  });

  it('never lets a metacharacter or a leading "-" into an argument it derives', () => {
    const hostile = fc.constantFrom(...'-;&|$`()<>\'"\\ \t\n*?~!#%^{}[]=,:@/._aZ09'.split(''));
    const scheme = fc.constantFrom('npm:', 'npx:', 'uvx:', 'uv:', 'oci://', 'git+https://github.com/');
    fc.assert(
      fc.property(scheme, fc.array(hostile, { maxLength: 24 }), (prefix, chars) => {
        let args: string[] | undefined;
        try {
          args = parseSpec(prefix + chars.join('')).args;
        } catch (err) {
          expect((err as { code?: string }).code).toMatch(/^(mcp\.spec_unsupported|validation_error)$/);
          return;
        }
        const derived = args?.at(-1) ?? '';
        expect(derived).toMatch(/^[A-Za-z0-9@][A-Za-z0-9@._/:+#=-]*$/);
      }),
      { numRuns: 2000 },
    );
  });
});
