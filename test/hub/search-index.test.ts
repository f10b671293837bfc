/** The search index, the recent-tools memory and the tool-view values, on their own (issue 22). */
import { describe, expect, it } from 'vitest';
import { parseToolView, toolViewFor, toolViewValue } from '../../src/identity/tool-view.js';
import { RecentTools } from '../../src/surfaces/hub/search/recent.js';
import { processTerm, ToolIndex, tokenize } from '../../src/surfaces/hub/search/tool-index.js';

const tool = (exposed: string, description: string, verdict = 'allow', args: Record<string, unknown> = {}) => ({
  exposed,
  serverId: exposed.split('__')[0] as string,
  verdict,
  definition: {
    name: exposed.split('__')[1] as string,
    description,
    inputSchema: { type: 'object', properties: args },
  },
});

describe('ToolIndex', () => {
  const tools = [
    tool('fs__read_text_file', 'Read the complete contents of a file as text.', 'allow', {
      path: { description: 'where the file is' },
    }),
    tool('fs__write_file', 'Create a new file or overwrite an existing file.', 'gated', { path: {}, content: {} }),
    tool('fs__delete_tree', 'Delete a directory and everything in it.', 'blocked'),
    tool('fs__watch', 'Watch files for changes.', 'quarantined'),
    tool('git__createPullRequest', 'Open a pull request on a repository.', 'allow', { repositoryName: {} }),
    tool('b__write_file', 'Create a new file or overwrite an existing file.', 'allow', { path: {}, content: {} }),
  ];
  const index = new ToolIndex(tools);
  const names = (query: string, visible: (t: (typeof tools)[number]) => boolean = () => true) =>
    index.query(query, visible, 10).map((h) => h.tool.exposed);

  it('splits names and folds word forms', () => {
    expect(tokenize('createPullRequest read_file HTTPServer2')).toEqual([
      'create',
      'Pull',
      'Request',
      'read',
      'file',
      'HTTP',
      'Server2',
    ]);
    expect(['files', 'searching', 'directories', 'the'].map(processTerm)).toEqual([
      'file',
      'search',
      'directory',
      null,
    ]);
  });

  it('indexes only usable tools, and finds them by description, name parts, argument names and prefixes', () => {
    expect(index.size).toBe(4);
    expect(names('complete contents')[0]).toBe('fs__read_text_file');
    expect(names('pull request')).toEqual(['git__createPullRequest']);
    expect(names('repositoryName')).toEqual(['git__createPullRequest']);
    expect(names('repo')).toEqual(['git__createPullRequest']);
    expect(names('delete directory everything')).toEqual([]);
    expect(names('watch changes')).toEqual([]);
  });

  it('ranks in a stable order (score, then name) and applies the caller filter', () => {
    // Two identical definitions tie: the name decides, every time.
    expect(names('overwrite existing')).toEqual(['b__write_file', 'fs__write_file']);
    expect(names('overwrite existing', () => true)).toEqual(names('overwrite existing'));
    expect(names('overwrite existing', (t) => t.serverId === 'fs')).toEqual(['fs__write_file']);
    const hits = index.query('file', () => true, 10);
    for (let i = 1; i < hits.length; i++) {
      expect((hits[i - 1] as { score: number }).score).toBeGreaterThanOrEqual((hits[i] as { score: number }).score);
    }
    expect(index.query('file', () => true, 1)).toHaveLength(1);
  });
});

describe('RecentTools', () => {
  it('remembers the most recent distinct tools, listed by name, and says when one enters the window', () => {
    const recent = new RecentTools();
    expect(recent.record('a', 'x__b', 2)).toBe(true);
    expect(recent.record('a', 'x__a', 2)).toBe(true);
    expect(recent.record('a', 'x__b', 2)).toBe(false);
    expect(recent.recent('a', 2)).toEqual(['x__a', 'x__b']);
    expect(recent.record('a', 'x__c', 2)).toBe(true);
    expect(recent.recent('a', 2)).toEqual(['x__b', 'x__c']);
    expect(recent.recent('a', 0)).toEqual([]);
    expect(recent.recent('other', 5)).toEqual([]);
    expect(recent.record('a', 'x__d', 0)).toBe(false);
  });
});

describe('tool views', () => {
  it('accepts all, search and toolset:<name>; the token wins over the platform default', () => {
    for (const ok of ['all', 'search', 'toolset:finance', 'toolset:a_b-1'])
      expect(toolViewValue.safeParse(ok).success).toBe(true);
    for (const bad of ['', 'ALL', 'toolset:', 'toolset:Finance', 'toolset:a b', `toolset:${'a'.repeat(65)}`]) {
      expect(toolViewValue.safeParse(bad).success).toBe(false);
    }
    expect(parseToolView('toolset:finance')).toEqual({ kind: 'toolset', name: 'finance' });
    expect(toolViewFor({ toolView: null }, { 'hub.toolView': 'search' })).toEqual({ kind: 'search' });
    expect(toolViewFor({ toolView: 'all' }, { 'hub.toolView': 'search' })).toEqual({ kind: 'all' });
    expect(toolViewFor({}, { 'hub.toolView': 'all' })).toEqual({ kind: 'all' });
  });
});
