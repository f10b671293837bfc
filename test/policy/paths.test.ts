/**
 * The argument path sandbox on a real file system: relative paths and `~` are refused unless Gatehouse
 * sets the server's working directory (stdio: its first root), path arguments are found at any depth,
 * and `file:` URIs anywhere are checked as paths.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { assertPathsInside } from '../../src/policy/paths.js';

const root = mkdtempSync(join(tmpdir(), 'gatehouse-paths-'));
const outside = mkdtempSync(join(tmpdir(), 'gatehouse-outside-'));
mkdirSync(join(root, 'in'));
symlinkSync(outside, join(root, 'escape'));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

const http = { workspaceRoots: [root], transport: 'streamable-http' };
const stdio = { workspaceRoots: [root], transport: 'stdio' };
const codeOf = (policy: object, args: Record<string, unknown>): string | undefined => {
  try {
    assertPathsInside(policy, args);
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
};

describe('path sandbox', () => {
  it('refuses relative paths and ~ for a server whose working directory Gatehouse does not set', () => {
    for (const path of ['etc/passwd', 'in/a.txt', './in', '~/.bashrc', '~root/.ssh/id_rsa', '~']) {
      expect({ path, code: codeOf(http, { path }) }).toEqual({ path, code: 'policy.relative_path' });
    }
    expect(codeOf(http, { path: `${root}/in/a.txt` })).toBeUndefined();
    expect(codeOf({ workspaceRoots: [root] }, { path: 'in/a.txt' })).toBe('policy.relative_path');
  });

  it('resolves a stdio server’s relative paths against its first root (its working directory); ~ stays refused', () => {
    expect(codeOf(stdio, { path: 'in/a.txt' })).toBeUndefined();
    expect(codeOf(stdio, { path: '../etc/passwd' })).toBe('policy.path_escape');
    expect(codeOf(stdio, { path: 'escape/secret' })).toBe('policy.path_escape');
    expect(codeOf(stdio, { path: '~/.bashrc' })).toBe('policy.relative_path');
  });

  it('checks path arguments at any depth and in arrays', () => {
    expect(codeOf(http, { options: { path: '/etc/passwd' } })).toBe('policy.path_escape');
    expect(codeOf(http, { items: [{ file: `${root}/in/a` }, { file: '/etc/shadow' }] })).toBe('policy.path_escape');
    expect(codeOf(http, { a: { b: { c: [[{ dir: 'etc' }]] } } })).toBe('policy.relative_path');
    expect(codeOf(http, { options: { path: `${root}/in/a`, other: '/etc/passwd' } })).toBeUndefined();
    // Deep nesting cannot overflow the stack.
    let deep: Record<string, unknown> = { path: '/etc/passwd' };
    for (let i = 0; i < 100_000; i++) deep = { x: deep };
    expect(codeOf(http, deep)).toBe('policy.path_escape');
  });

  it('checks file: URIs wherever they appear', () => {
    expect(codeOf(http, { uri: 'file:///etc/passwd' })).toBe('policy.path_escape');
    expect(codeOf(http, { nested: ['FILE:///etc/passwd'] })).toBe('policy.path_escape');
    expect(codeOf(http, { uri: pathToFileURL(join(root, 'in', 'a.txt')).href })).toBeUndefined();
    expect(codeOf(http, { uri: pathToFileURL(join(root, 'escape', 'x')).href })).toBe('policy.path_escape');
    expect(codeOf(http, { uri: 'file://remote-host/share/x' })).toBe('policy.path_escape');
  });

  it('leaves arguments alone when the server has no workspace roots', () => {
    expect(codeOf({ transport: 'streamable-http' }, { path: '~/.bashrc', uri: 'file:///etc/passwd' })).toBeUndefined();
  });
});
