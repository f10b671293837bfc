/**
 * The search index of search mode: BM25 (minisearch) over every listed tool of the catalog — its
 * aggregated name, title, description and argument names (with their descriptions, weighted less).
 * One index per catalog snapshot, built on the first search after the catalog changed; what a caller
 * may see (its groups, a server filter) is applied at query time, so a search is no store round trip.
 * Only usable tools (`allow`, `gated`) are indexed: blocked, excluded and quarantined ones never appear.
 * Results come in a deterministic order (score, then name), so the same query answers the same bytes.
 */
import MiniSearch from 'minisearch';
import type { DiscoveredTool } from '../../../registry/records.js';

/** What the index needs of a tool (the hub's `HubTool` is one). */
export interface IndexedTool {
  exposed: string;
  serverId: string;
  definition: DiscoveredTool;
  verdict: string;
}

export interface ToolHit<T extends IndexedTool = IndexedTool> {
  tool: T;
  /** BM25 score (higher first). */
  score: number;
}

interface Doc {
  id: number;
  name: string;
  title: string;
  description: string;
  args: string;
  argText: string;
}

/** Splits `read_file`, `createIssue`, `HTTPRequest2` and prose into lower-case words. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter((word) => word.length > 0);
}

/** Words too common in tool documentation to tell tools apart. */
const STOP_WORDS = new Set([
  'a',
  'an',
  'and',
  'are',
  'as',
  'at',
  'be',
  'by',
  'for',
  'from',
  'in',
  'into',
  'is',
  'it',
  'its',
  'of',
  'on',
  'or',
  'that',
  'the',
  'this',
  'to',
  'with',
]);

/** Lower case, stop words out, and a light plural/verb-form fold (files → file, searching → search). */
export function processTerm(term: string): string | null {
  const word = term.toLowerCase();
  if (STOP_WORDS.has(word)) return null;
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ies')) return `${word.slice(0, -3)}y`;
  if (word.length > 4 && /(sses|xes|ches|shes)$/.test(word)) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss') && !word.endsWith('us')) {
    return word.slice(0, -1);
  }
  if (word.length > 4 && word.endsWith('ed')) return word.slice(0, -2);
  return word;
}

/** The names of a schema's top-level properties and their descriptions (bounded). */
function argumentsOf(schema: unknown): { names: string[]; text: string } {
  const properties = (schema as { properties?: unknown } | undefined)?.properties;
  if (!properties || typeof properties !== 'object' || Array.isArray(properties)) return { names: [], text: '' };
  const names: string[] = [];
  const text: string[] = [];
  for (const [name, property] of Object.entries(properties as Record<string, unknown>).slice(0, 100)) {
    names.push(name);
    const description = (property as { description?: unknown } | null)?.description;
    if (typeof description === 'string') text.push(description.slice(0, 500));
  }
  return { names, text: text.join(' ') };
}

/** Whether `a` ranks before `b`: higher score first, then the name (a stable total order). */
function compareHits(a: ToolHit, b: ToolHit): number {
  if (a.score !== b.score) return b.score - a.score;
  return a.tool.exposed < b.tool.exposed ? -1 : a.tool.exposed > b.tool.exposed ? 1 : 0;
}

/** The argument names of a tool's input schema (for results). */
export function argumentNames(tool: IndexedTool): string[] {
  return argumentsOf(tool.definition.inputSchema).names;
}

export class ToolIndex<T extends IndexedTool = IndexedTool> {
  private readonly search: MiniSearch<Doc>;
  private readonly tools: T[];

  constructor(tools: Iterable<T>) {
    this.tools = [...tools].filter((tool) => tool.verdict === 'allow' || tool.verdict === 'gated');
    this.search = new MiniSearch<Doc>({
      fields: ['name', 'title', 'description', 'args', 'argText'],
      tokenize,
      processTerm,
      searchOptions: {
        boost: { name: 3, title: 2, description: 1, args: 1.5, argText: 0.5 },
        // A word typed in part ("repo" for "repository") still finds, weighted below a whole one.
        prefix: (term) => term.length >= 3,
        fuzzy: false,
        combineWith: 'OR',
        tokenize,
        processTerm,
      },
    });
    this.search.addAll(
      this.tools.map((tool, id) => {
        const args = argumentsOf(tool.definition.inputSchema);
        return {
          id,
          name: tool.exposed,
          title: tool.definition.title ?? '',
          description: (tool.definition.description ?? '').slice(0, 4000),
          args: args.names.join(' '),
          argText: args.text,
        };
      }),
    );
  }

  get size(): number {
    return this.tools.length;
  }

  /**
   * Every tool matching `query` that `visible` lets through, best first (score, then name). At most
   * `max` hits: the ranking is a prefix, so a page never depends on how many more there are.
   */
  query(query: string, visible: (tool: T) => boolean, max: number): ToolHit<T>[] {
    const hits: ToolHit<T>[] = [];
    for (const result of this.search.search(query)) {
      const tool = this.tools[result.id as number] as T;
      // Rounded, so the rank order and the cursor's key order (meta-tools.ts) agree on ties.
      if (visible(tool)) hits.push({ tool, score: Math.round(result.score * 1e6) / 1e6 });
    }
    hits.sort(compareHits);
    return hits.slice(0, max);
  }
}
