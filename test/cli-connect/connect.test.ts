/**
 * `gatehouse connect` as a real process on real files in temporary folders: printing each client's entry, and
 * `--write` into existing files of every client format — merged with every other entry (and JSONC comments) kept,
 * idempotent to the byte, invalid and opted-out files refused untouched, a clear-text token refused inside a git work
 * tree unless `--allow-workspace`, tokens created through the store only once the file passed.
 */
import { execFileSync } from 'node:child_process';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseJsonc } from 'jsonc-parser';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { selfLaunch } from '../../src/cli/launch.js';
import { hashToken } from '../../src/identity/index.js';
import { openStore } from '../../src/store/db.js';
import { TokenStore } from '../../src/store/tokens.js';
import { VERSION } from '../../src/version.js';
import { gatehouse } from './run.js';

/** The CLI's entry (and, from sources without a build, tsx's loader), as `connect` writes them. */
const launchArgs = selfLaunch().args;

const HUB = 'http://127.0.0.1:8080/mcp';

let dir: string;
let dataDir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'gatehouse-connect-'));
  dataDir = join(dir, 'data');
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A client config as the tests read it back. */
interface Config {
  mcpServers: Record<string, unknown>;
  [key: string]: unknown;
}
interface Entry {
  url?: string;
  headers?: Record<string, string>;
}
/** The `gatehouse` entry of a written config. */
const entryOf = (file: string) => json(file).mcpServers.gatehouse as Entry;

const read = (file: string) => readFileSync(file, 'utf8');
const json = (file: string) => JSON.parse(read(file)) as Config;

function put(name: string, text: string): string {
  const file = join(dir, name);
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, text);
  return file;
}

async function liveAgentTokens(): Promise<{ name: string; hash: string }[]> {
  const store = await openStore({ dataDir });
  try {
    const active = await new TokenStore(store).activeByHash();
    return [...active.entries()].filter(([, r]) => r.role === 'agent').map(([hash, r]) => ({ name: r.name, hash }));
  } finally {
    await store.close();
  }
}

// Each case runs the CLI as real processes (a few seconds each on a busy machine).
describe('gatehouse connect (printing)', { timeout: 90_000 }, () => {
  it('prints each client’s entry for the hub, with the token never in clear where the client can avoid it', async () => {
    const expected: Record<string, unknown> = {
      'claude-code': {
        mcpServers: { gatehouse: { type: 'http', url: HUB, headers: { Authorization: `Bearer \${GATEHOUSE_TOKEN}` } } },
      },
      cursor: { mcpServers: { gatehouse: { url: HUB, headers: { Authorization: `Bearer \${env:GATEHOUSE_TOKEN}` } } } },
      vscode: {
        inputs: [{ type: 'promptString', id: 'gatehouse-token', description: 'Gatehouse agent token', password: true }],
        servers: {
          gatehouse: { type: 'http', url: HUB, headers: { Authorization: `Bearer \${input:gatehouse-token}` } },
        },
      },
      lmstudio: {
        mcpServers: { gatehouse: { url: HUB, headers: { Authorization: 'Bearer <gatehouse agent token>' } } },
      },
      'claude-desktop': {
        mcpServers: {
          gatehouse: {
            // Node's own path and the CLI's entry by absolute path: no PATH lookup (see the Claude Desktop test).
            command: process.execPath,
            args: [...launchArgs, 'stdio', '--url', HUB],
            env: { GATEHOUSE_TOKEN: '<gatehouse agent token>' },
          },
        },
      },
    };
    const runs = await Promise.all(
      Object.keys(expected).map((client) =>
        gatehouse(['connect', '--client', client, '--url', 'http://127.0.0.1:8080']),
      ),
    );
    Object.values(expected).forEach((entry, i) => {
      const run = runs[i] as Awaited<ReturnType<typeof gatehouse>>;
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual(entry);
    });
  });

  it('takes the gateway from GATEHOUSE_URL or the serve settings, and names the entry and variable as asked', async () => {
    const [fromEnv, fromPort, perServer] = await Promise.all([
      gatehouse(['connect', '--client', 'cursor', '--name', 'gh', '--token-env', 'GH_AGENT'], {
        GATEHOUSE_URL: 'https://gate.example.net/',
      }),
      gatehouse(['connect', '--client', 'claude-code'], { GATEHOUSE_PORT: '9123' }),
      gatehouse(['connect', '--client', 'claude-code', '--url', 'http://127.0.0.1:8080/mcp/s/github']),
    ]);
    expect(JSON.parse(fromEnv.stdout).mcpServers.gh).toEqual({
      url: 'https://gate.example.net/mcp',
      headers: { Authorization: `Bearer \${env:GH_AGENT}` },
    });
    expect(JSON.parse(fromPort.stdout).mcpServers.gatehouse.url).toBe('http://127.0.0.1:9123/mcp');
    expect(JSON.parse(perServer.stdout).mcpServers.gatehouse.url).toBe('http://127.0.0.1:8080/mcp/s/github');
  });

  it('refuses an unknown client and a GATEHOUSE_* variable serve would reject', async () => {
    const [unknown, env] = await Promise.all([
      gatehouse(['connect', '--client', 'emacs']),
      gatehouse(['connect', '--client', 'cursor', '--token-env', 'GATEHOUSE_AGENT']),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--client must be one of claude-code, cursor, vscode, lmstudio, claude-desktop/);
    expect(env.code).toBe(2);
    expect(env.stderr).toMatch(/refuses unknown GATEHOUSE_\* variables/);
  });

  it('creates an agent token with --token-name and shows it once, on stderr', async () => {
    const run = await gatehouse([
      'connect',
      '--client',
      'claude-code',
      '--token-name',
      'laptop',
      '--data-dir',
      dataDir,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const token = /export GATEHOUSE_TOKEN=(\S+)/.exec(run.stderr)?.[1] as string;
    expect(token).toBeTruthy();
    expect(run.stdout).not.toContain(token);
    expect(await liveAgentTokens()).toEqual([{ name: 'laptop', hash: hashToken(token) }]);
  });
});

describe('gatehouse connect --write', { timeout: 90_000 }, () => {
  it('Claude Code: merges into an existing .mcp.json, other servers and layout kept, then changes nothing', async () => {
    const original = `{
  "mcpServers": {
    "files": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]
    }
  }
}
`;
    const file = put('project/.mcp.json', original);
    const first = await gatehouse([
      'connect',
      '--client',
      'claude-code',
      '--url',
      'http://127.0.0.1:8080',
      '--write',
      file,
    ]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('added mcpServers.gatehouse');
    const written = read(file);
    expect(written).toBe(`{
  "mcpServers": {
    "files": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]
    },
    "gatehouse": {
      "type": "http",
      "url": "${HUB}",
      "headers": {
        "Authorization": "Bearer \${GATEHOUSE_TOKEN}"
      }
    }
  }
}
`);
    const second = await gatehouse([
      'connect',
      '--client',
      'claude-code',
      '--url',
      'http://127.0.0.1:8080',
      '--write',
      file,
    ]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('unchanged');
    expect(read(file)).toBe(written);
  });

  it('Cursor: keeps 4-space indentation and a one-line neighbour, updates only what differs', async () => {
    const original = [
      '{',
      '    "mcpServers": {',
      `        "hf": { "url": "https://huggingface.co/mcp", "headers": { "Authorization": "Bearer \${env:HF}" } },`,
      '        "gatehouse": {',
      '            "url": "http://old-host:8080/mcp",',
      `            "headers": { "Authorization": "Bearer \${env:GATEHOUSE_TOKEN}", "X-Team": "core" },`,
      '            "timeout": 30000',
      '        }',
      '    }',
      '}',
      '',
    ].join('\n');
    const file = put('cursor/mcp.json', original);
    const run = await gatehouse(['connect', '--client', 'cursor', '--url', 'http://127.0.0.1:8080', '--write', file]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('set mcpServers.gatehouse.url');
    // Exactly the URL changed: the neighbour, the extra header and the timeout stay as they were.
    expect(read(file)).toBe(original.replace('http://old-host:8080/mcp', HUB));
    const again = await gatehouse(['connect', '--client', 'cursor', '--url', 'http://127.0.0.1:8080', '--write', file]);
    expect(again.stdout).toContain('unchanged');
    expect(read(file)).toBe(original.replace('http://old-host:8080/mcp', HUB));
  });

  it('VS Code: JSONC with comments and trailing commas, servers and inputs merged, comments kept', async () => {
    const original = `// Workspace MCP servers
{
\t"inputs": [
\t\t// the GitHub token
\t\t{ "type": "promptString", "id": "gh-pat", "description": "GitHub PAT", "password": true },
\t],
\t"servers": {
\t\t"github": {
\t\t\t"type": "http",
\t\t\t"url": "https://api.githubcopilot.com/mcp/", // hosted
\t\t\t"headers": { "Authorization": "Bearer \${input:gh-pat}" },
\t\t},
\t},
}
`;
    const file = put('ws/.vscode/mcp.json', original);
    const first = await gatehouse(['connect', '--client', 'vscode', '--url', 'http://127.0.0.1:8080', '--write', file]);
    expect(first.code, first.stderr).toBe(0);
    const written = read(file);
    for (const kept of ['// Workspace MCP servers', '// the GitHub token', '// hosted', '"id": "gh-pat"']) {
      expect(written).toContain(kept);
    }
    expect(written).toContain('\t\t"gatehouse": {\n\t\t\t"type": "http",');
    const errors: unknown[] = [];
    const doc = parseJsonc(written, errors as never, { allowTrailingComma: true });
    expect(errors).toEqual([]);
    expect(doc.servers.github.url).toBe('https://api.githubcopilot.com/mcp/');
    expect(doc.servers.gatehouse).toEqual({
      type: 'http',
      url: HUB,
      headers: { Authorization: `Bearer \${input:gatehouse-token}` },
    });
    expect(doc.inputs).toEqual([
      { type: 'promptString', id: 'gh-pat', description: 'GitHub PAT', password: true },
      { type: 'promptString', id: 'gatehouse-token', description: 'Gatehouse agent token', password: true },
    ]);
    expect(written).not.toMatch(/gh_[A-Za-z0-9_-]{20,}/);

    const second = await gatehouse([
      'connect',
      '--client',
      'vscode',
      '--url',
      'http://127.0.0.1:8080',
      '--write',
      file,
    ]);
    expect(second.stdout).toContain('unchanged');
    expect(read(file)).toBe(written);
  });

  it('VS Code: creates .vscode/mcp.json in a fresh workspace', async () => {
    const file = join(dir, 'fresh', '.vscode', 'mcp.json');
    mkdirSync(join(dir, 'fresh'));
    const run = await gatehouse(['connect', '--client', 'vscode', '--write', file]);
    expect(run.code, run.stderr).toBe(0);
    expect(parseJsonc(read(file))).toMatchObject({
      servers: { gatehouse: { type: 'http' } },
      inputs: [{ id: 'gatehouse-token' }],
    });
  });

  it('LM Studio: the HEAT-style entry, a placeholder until a token is created, then the token kept', async () => {
    const original = `{
  "mcpServers": {
    "hf-mcp-server": {
      "url": "https://huggingface.co/mcp",
      "headers": {
        "Authorization": "Bearer <YOUR_HF_TOKEN>"
      }
    }
  }
}
`;
    const file = put('lmstudio/mcp.json', original);
    const placeholder = await gatehouse(['connect', '--client', 'lmstudio', '--write', file, '--data-dir', dataDir]);
    expect(placeholder.code, placeholder.stderr).toBe(0);
    expect(entryOf(file).headers?.Authorization).toBe('Bearer <gatehouse agent token>');
    expect(placeholder.stderr).toContain('Replace <gatehouse agent token>');

    const withToken = await gatehouse([
      'connect',
      '--client',
      'lmstudio',
      '--write',
      file,
      '--token-name',
      'lmstudio',
      '--data-dir',
      dataDir,
    ]);
    expect(withToken.code, withToken.stderr).toBe(0);
    expect(withToken.stdout).toContain('set mcpServers.gatehouse.headers.Authorization');
    const authorization = entryOf(file).headers?.Authorization as string;
    const token = authorization.replace(/^Bearer /, '');
    expect(await liveAgentTokens()).toEqual([{ name: 'lmstudio', hash: hashToken(token) }]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(json(file).mcpServers['hf-mcp-server']).toEqual(JSON.parse(original).mcpServers['hf-mcp-server']);
    expect(withToken.stderr).not.toContain(token); // it is in the file, nowhere else

    const after = read(file);
    const again = await gatehouse(['connect', '--client', 'lmstudio', '--write', file]);
    expect(again.stdout).toContain('unchanged');
    expect(read(file)).toBe(after);
  });

  it('Claude Desktop: the stdio bridge with the token in env; CRLF kept; a second token of that name refused', async () => {
    const original =
      '{\r\n  "globalShortcut": "Ctrl+Space",\r\n  "mcpServers": {\r\n    "memory": {\r\n      "command": "npx",\r\n' +
      '      "args": ["-y", "@modelcontextprotocol/server-memory"]\r\n    }\r\n  }\r\n}\r\n';
    const file = put('Claude/claude_desktop_config.json', original);
    writeFileSync(file, original, { mode: 0o644 });
    const args = ['connect', '--client', 'claude-desktop', '--url', 'http://127.0.0.1:8080', '--write', file];
    const run = await gatehouse([...args, '--token-name', 'desktop', '--data-dir', dataDir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('permissions now 0600');
    const written = read(file);
    expect(written.replace(/\r\n/g, '')).not.toContain('\n');
    const doc = JSON.parse(written);
    expect(doc.globalShortcut).toBe('Ctrl+Space');
    expect(doc.mcpServers.memory).toEqual({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] });
    expect(doc.mcpServers.gatehouse).toMatchObject({
      command: process.execPath,
      args: [...launchArgs, 'stdio', '--url', HUB],
    });
    // What the entry runs starts Gatehouse with no PATH at all, from any folder.
    const { command, args: entryArgs } = doc.mcpServers.gatehouse as { command: string; args: string[] };
    const launched = execFileSync(command, [...entryArgs.slice(0, -3), '--version'], {
      env: { PATH: '' },
      cwd: tmpdir(),
      encoding: 'utf8',
    });
    expect(launched.trim()).toBe(VERSION);
    const token = doc.mcpServers.gatehouse.env.GATEHOUSE_TOKEN as string;
    expect(await liveAgentTokens()).toEqual([{ name: 'desktop', hash: hashToken(token) }]);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const duplicate = await gatehouse([...args, '--token-name', 'desktop', '--data-dir', dataDir]);
    expect(duplicate.code).toBe(2);
    expect(duplicate.stderr).toMatch(/live agent token named "desktop" exists \(tok_/);
    expect(read(file)).toBe(written);

    const plain = await gatehouse(args);
    expect(plain.stdout).toContain('unchanged');
    expect(read(file)).toBe(written);

    const moved = await gatehouse([...args.slice(0, 3), '--url', 'http://127.0.0.1:9999', '--write', file]);
    expect(moved.code).toBe(0);
    expect(JSON.parse(read(file)).mcpServers.gatehouse).toEqual({
      command: process.execPath,
      args: [...launchArgs, 'stdio', '--url', 'http://127.0.0.1:9999/mcp'],
      env: { GATEHOUSE_TOKEN: token },
    });
  });

  it('writes through a symlinked config and keeps the link', async () => {
    const real = put('dotfiles/cursor-mcp.json', '{\n  "mcpServers": {}\n}\n');
    const link = join(dir, 'home', '.cursor', 'mcp.json');
    mkdirSync(join(link, '..'), { recursive: true });
    symlinkSync(real, link);
    const run = await gatehouse(['connect', '--client', 'cursor', '--write', link]);
    expect(run.code, run.stderr).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(real);
    expect(entryOf(real).url).toBe(HUB);
  });

  describe('refusals', () => {
    const cases: [string, string, string, RegExp][] = [
      [
        'claude-code',
        '.mcp.json',
        '{\n  "mcpServers": {\n    "a": {"command": "x"},\n',
        /not valid JSON \(.* at line 4/,
      ],
      [
        'cursor',
        'mcp.json',
        '{\n  // my servers\n  "mcpServers": {}\n}\n',
        /reads this file as strict JSON: no comments/,
      ],
      ['vscode', 'mcp.json', '{ "servers": { "a": { "type": "http", } } ', /not valid JSON with comments/],
      ['lmstudio', 'mcp.json', '[]\n', /top level is a JSON array/],
      ['claude-desktop', 'claude_desktop_config.json', '{ "mcpServers": [] }\n', /"mcpServers" is not an object/],
      ['vscode', 'mcp.json', '{ "inputs": {}, "servers": {} }\n', /"inputs" is not an array/],
      [
        'claude-desktop',
        'claude_desktop_config.json',
        '{\n  "gatehouse": { "wire": false },\n  "mcpServers": {}\n}\n',
        /opts out of wiring \("gatehouse": \{"wire": false\}\)/,
      ],
      ['claude-code', '.mcp.json', '{ "gatehouse": {"wire": false} }', /opts out of wiring/],
    ];
    for (const [client, name, text, message] of cases) {
      it(`${client}: refuses ${JSON.stringify(text.slice(0, 40))} untouched, creating no token`, async () => {
        const file = put(`${client}/${name}`, text);
        const run = await gatehouse([
          'connect',
          '--client',
          client,
          '--write',
          file,
          '--token-name',
          'refused',
          '--data-dir',
          dataDir,
        ]);
        expect(run.code).toBe(2);
        expect(run.stderr).toMatch(/Refusing to write/);
        expect(run.stderr).toMatch(message);
        expect(run.stdout).toBe('');
        expect(read(file)).toBe(text);
        expect(() => statSync(dataDir)).toThrow(); // the store was never even opened
      });
    }
  });

  describe('inside a git work tree', () => {
    let repo: string;
    beforeEach(() => {
      repo = join(dir, 'repo');
      mkdirSync(join(repo, 'sub'), { recursive: true });
      execFileSync('git', ['init', '-q', repo]);
    });

    for (const client of ['claude-desktop', 'lmstudio'] as const) {
      it(`${client}: refuses a clear-text token unless --allow-workspace`, async () => {
        const file = join(repo, 'sub', 'config.json');
        const refused = await gatehouse([
          'connect',
          '--client',
          client,
          '--write',
          file,
          '--token-name',
          'ws',
          '--data-dir',
          dataDir,
        ]);
        expect(refused.code).toBe(2);
        expect(refused.stderr).toMatch(/inside the git work tree .*repo.*--allow-workspace/s);
        expect(() => statSync(file)).toThrow();
        expect(() => statSync(dataDir)).toThrow();

        const allowed = await gatehouse([
          'connect',
          '--client',
          client,
          '--write',
          file,
          '--token-name',
          'ws',
          '--data-dir',
          dataDir,
          '--allow-workspace',
        ]);
        expect(allowed.code, allowed.stderr).toBe(0);
        expect(allowed.stderr).toMatch(/git does not ignore .*\.gitignore/);
        expect((await liveAgentTokens()).map((t) => t.name)).toEqual(['ws']);
        expect(statSync(file).mode & 0o777).toBe(0o600);
      });
    }

    it('does not warn about a file git ignores', async () => {
      writeFileSync(join(repo, '.gitignore'), 'secret-config.json\n');
      const file = join(repo, 'secret-config.json');
      const run = await gatehouse(['connect', '--client', 'claude-desktop', '--write', file, '--allow-workspace']);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).not.toMatch(/does not ignore/);
    });

    for (const client of ['claude-code', 'cursor', 'vscode'] as const) {
      it(`${client}: writes a project file, which holds no token`, async () => {
        const file = join(repo, 'sub', 'mcp.json');
        const run = await gatehouse([
          'connect',
          '--client',
          client,
          '--write',
          file,
          '--token-name',
          'proj',
          '--data-dir',
          dataDir,
        ]);
        expect(run.code, run.stderr).toBe(0);
        const [created] = await liveAgentTokens();
        const token = /(gh_\S+)/.exec(run.stderr)?.[1] as string;
        expect(hashToken(token)).toBe(created?.hash);
        expect(read(file)).not.toContain(token);
      });
    }
  });
});
