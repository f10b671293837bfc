/** The search index, the recent-tools memory and the tool-view values, on their own (issue 22). */
import { describe, expect, it } from 'vitest';
import { parseToolView, toolViewFor, toolViewValue } from '../../src/identity/tool-view.js';
import { SearchIndexes } from '../../src/surfaces/hub/search/indexes.js';
import { searchTools } from '../../src/surfaces/hub/search/meta-tools.js';
import { RecentTools } from '../../src/surfaces/hub/search/recent.js';
import { processTerm, ToolIndex, tokenize, yieldToLoop } from '../../src/surfaces/hub/search/tool-index.js';
import { type HubServer, type HubTool, Snapshot } from '../../src/surfaces/hub/view.js';

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
  const index = ToolIndex.of(tools);
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

describe('ToolIndex, distinct results', () => {
  it('makes one hit of identical definitions on several servers, the best-ranked copy naming the others', () => {
    const copies = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((server) =>
      tool(`${server}__write_file`, 'Create a new file or overwrite an existing file.', 'allow', { path: {} }),
    );
    const index = ToolIndex.of([
      ...copies,
      tool('x__replace_row', 'Overwrite an existing row of a table.'),
      // Same name, another description: not a copy.
      tool('y__write_file', 'Write bytes to a file, replacing an existing one.'),
    ]);
    // Without `distinct`, the seven copies fill the first five places.
    expect(index.query('overwrite existing file', () => true, 5).map((h) => h.tool.exposed)).toEqual([
      'a__write_file',
      'b__write_file',
      'c__write_file',
      'd__write_file',
      'e__write_file',
    ]);
    const hits = index.query('overwrite existing file', () => true, 5, true);
    expect(hits[0]?.tool.exposed).toBe('a__write_file');
    expect(hits.map((h) => h.tool.exposed).sort()).toEqual(['a__write_file', 'x__replace_row', 'y__write_file']);
    expect(hits[0]?.copies?.map((c) => c.exposed)).toEqual(copies.slice(1).map((c) => c.exposed));
    expect(hits.slice(1).map((h) => h.copies)).toEqual([undefined, undefined]);
    // The caller's filter applies before copies are grouped: a hidden copy is neither a hit nor a copy.
    const some = index.query('overwrite existing file', (t) => t.serverId !== 'a' && t.serverId !== 'c', 5, true);
    expect(some[0]?.tool.exposed).toBe('b__write_file');
    expect(some[0]?.copies?.map((c) => c.serverId)).toEqual(['d', 'e', 'f', 'g']);
  });
});

/** A catalog snapshot as the hub builds one: enabled servers exposed to `default`. */
function snapshotOf(servers: Record<string, Array<ReturnType<typeof tool>>>): Snapshot {
  const map = new Map<string, HubServer>();
  for (const [id, list] of Object.entries(servers)) {
    const tools = new Map<string, HubTool>();
    for (const t of list) {
      tools.set(t.exposed, { ...t, name: t.definition.name, autoName: t.exposed, pin: undefined } as HubTool);
    }
    map.set(id, {
      row: { id },
      detail: { enabled: true },
      exposure: new Set(['default']),
      tools,
      toolsByName: new Map([...tools.values()].map((t) => [t.name, t])),
      prompts: new Map(),
      resources: [],
      identity: {},
    } as unknown as HubServer);
  }
  return new Snapshot(map, () => ({}) as never);
}

describe('SearchIndexes: the index is rebuilt in the background', () => {
  const names = async (indexes: SearchIndexes, snapshot: Snapshot, query: string) => {
    const result = await searchTools(indexes, snapshot, ['default'], { query, limit: 50 });
    return (result.structuredContent as { tools: Array<{ name: string; verdict: string }> }).tools;
  };

  it('answers from the previous index while the new one builds (re-read in the new catalog), then the new one takes over', async () => {
    // The build pauses between slices; while `held`, a pause waits until the test lets it go.
    let held = false;
    let release = () => {};
    let pauses = 0;
    const pause = async () => {
      pauses += 1;
      if (held) await new Promise<void>((resolve) => (release = resolve));
      else await yieldToLoop();
    };
    const indexes = new SearchIndexes(pause, 0);
    const filler = Array.from({ length: 200 }, (_, i) => tool(`fs__tool_${i}`, `Filler number ${i}.`));
    const before = snapshotOf({
      fs: [
        tool('fs__read_text_file', 'Read the complete contents of a file as text.'),
        tool('fs__write_file', 'Create a new file or overwrite an existing file.'),
        ...filler,
      ],
    });
    expect(indexes.inUse).toBe(false);
    // The first search of the process waits for the first build (which pauses: it never holds the loop).
    expect((await names(indexes, before, 'overwrite')).map((t) => t.name)).toEqual(['fs__write_file']);
    expect(pauses).toBeGreaterThan(5);

    // The catalog changes: a new tool, and write_file quarantined.
    const after = snapshotOf({
      fs: [
        tool('fs__read_text_file', 'Read the complete contents of a file as text.', 'gated'),
        tool('fs__write_file', 'Create a new file or overwrite an existing file.', 'quarantined'),
        tool('fs__zip_archive', 'Pack files into a zip archive.'),
        ...filler,
      ],
    });
    held = true;
    const pausesBefore = pauses;
    indexes.refresh(after);
    // The new build is under way and held at a pause: searches answer at once, from the old index,
    // each hit as the new catalog has it (the quarantined tool gone, the verdict of today).
    await yieldToLoop();
    expect(pauses).toBe(pausesBefore + 1);
    expect(await names(indexes, after, 'zip archive')).toEqual([]);
    expect(await names(indexes, after, 'overwrite')).toEqual([]);
    expect(await names(indexes, after, 'complete contents')).toMatchObject([
      { name: 'fs__read_text_file', verdict: 'gated' },
    ]);
    // Let the build go: the new index takes over.
    held = false;
    release();
    await indexes.settled();
    expect(await names(indexes, after, 'zip archive')).toMatchObject([{ name: 'fs__zip_archive' }]);
    expect(await names(indexes, after, 'overwrite')).toEqual([]);
  });

  it('gives up a build that a newer catalog overtook, and never lets an older index replace a newer one', async () => {
    let held = false;
    let release = () => {};
    const pause = async () => {
      if (held) await new Promise<void>((resolve) => (release = resolve));
      else await yieldToLoop();
    };
    const indexes = new SearchIndexes(pause, 0);
    const filler = Array.from({ length: 100 }, (_, i) => tool(`fs__tool_${i}`, `Filler number ${i}.`));
    const first = snapshotOf({ fs: [tool('fs__alpha', 'Alpha tool.'), ...filler] });
    await names(indexes, first, 'alpha');
    const second = snapshotOf({ fs: [tool('fs__beta', 'Beta tool.'), ...filler] });
    const third = snapshotOf({ fs: [tool('fs__gamma', 'Gamma tool.'), ...filler] });
    held = true;
    indexes.refresh(second);
    await yieldToLoop();
    const holdSecond = release;
    held = false;
    indexes.refresh(third);
    await indexes.settled();
    expect((await names(indexes, third, 'gamma')).map((t) => t.name)).toEqual(['fs__gamma']);
    // The second build resumes, sees it was overtaken, and stops: the third index stays.
    holdSecond();
    await indexes.settled();
    await yieldToLoop();
    expect((await names(indexes, third, 'gamma')).map((t) => t.name)).toEqual(['fs__gamma']);
    // Without a search ever made, a catalog change builds nothing.
    const idle = new SearchIndexes();
    idle.refresh(first);
    expect(idle.inUse).toBe(false);
  });

  it('lists a tool carried identically by several servers once, naming the other servers', async () => {
    const same = (server: string) =>
      tool(`${server}__write_file`, 'Create a new file or overwrite an existing file.', 'allow', { path: {} });
    const snapshot = snapshotOf({ a: [same('a')], b: [same('b')], c: [same('c')] });
    const result = await searchTools(new SearchIndexes(), snapshot, ['default'], { query: 'overwrite' });
    expect((result.structuredContent as { tools: unknown[] }).tools).toEqual([
      expect.objectContaining({ name: 'a__write_file', server: 'a', copies: 2, copyServers: ['b', 'c'] }),
    ]);
    const onB = await searchTools(new SearchIndexes(), snapshot, ['default'], { query: 'overwrite', server: 'b' });
    expect((onB.structuredContent as { tools: unknown[] }).tools).toEqual([
      expect.not.objectContaining({ copies: expect.anything() }),
    ]);
  });
});

describe('RecentTools', () => {
  it('remembers the most recent distinct tools, listed by name, and says when one enters the window', async () => {
    const recent = new RecentTools();
    expect(recent.record('a', 'x__b', 2)).toBe(true);
    expect(recent.record('a', 'x__a', 2)).toBe(true);
    expect(recent.record('a', 'x__b', 2)).toBe(false);
    expect(await recent.recent('a', 2)).toEqual(['x__a', 'x__b']);
    expect(recent.record('a', 'x__c', 2)).toBe(true);
    expect(await recent.recent('a', 2)).toEqual(['x__b', 'x__c']);
    expect(await recent.recent('a', 0)).toEqual([]);
    expect(await recent.recent('other', 5)).toEqual([]);
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
