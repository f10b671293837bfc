/**
 * The catalog of well-known MCP servers that can be installed as presets: a JSON file (the bundled
 * `catalog/catalog.json`, or the one `GATEHOUSE_CATALOG` names), validated once at start so a bad file stops the
 * gateway with a message that says where, rather than failing an install later.
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { GatehouseError } from '../errors.js';
import { deriveServerId, serverIdSchema } from './ids.js';
import { argsSchema, commandSchema, envNameSchema, type ResolvedManifest, type SourceKind } from './manifest.js';

/** `catalog/catalog.json` at the package root, from `src/registry/` and from `dist/registry/` alike. */
export const BUNDLED_CATALOG_PATH = fileURLToPath(new URL('../../catalog/catalog.json', import.meta.url));

/** Registry-style names: `/`-separated segments (`io.github.owner/server`). */
export const CATALOG_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/;
export const catalogNameSchema = z
  .string()
  .max(200)
  .regex(CATALOG_NAME_PATTERN, 'a catalog name is /-separated segments of letters, digits, ".", "_" and "-"');
export const categorySchema = z
  .string()
  .regex(/^[a-z][a-z0-9-]{0,31}$/, 'a category is 1-32 lower-case letters, digits and -');

const httpsUrl = z.url({ protocol: /^https$/, error: 'expected an https:// URL' }).max(2048);

const entrySchema = z
  .strictObject({
    name: catalogNameSchema,
    /** Set where the derived id would be clumsy (`github-mcp-server` → `github`). */
    id: serverIdSchema.optional(),
    title: z.string().trim().min(1).max(100),
    description: z.string().trim().min(1).max(1000),
    category: categorySchema,
    transport: z.enum(['streamable-http', 'stdio']),
    command: commandSchema.optional(),
    args: argsSchema.optional(),
    url: httpsUrl.optional(),
    envRequired: z.array(envNameSchema).max(64).default([]),
    /** Extra arguments the server needs after `args`, in words (e.g. the folders a filesystem server may use). */
    argsRequired: z.string().trim().min(1).max(300).optional(),
    homepage: httpsUrl.optional(),
  })
  .superRefine((entry, ctx) => {
    if (entry.transport === 'stdio' && (!entry.command || entry.url)) {
      ctx.addIssue({ code: 'custom', message: 'a stdio entry has a command and no url' });
    }
    if (entry.transport === 'streamable-http' && (!entry.url || entry.command || entry.args)) {
      ctx.addIssue({ code: 'custom', message: 'a streamable-http entry has a url and no command or args' });
    }
    if (entry.id === undefined) {
      try {
        deriveServerId(entry.name);
      } catch {
        ctx.addIssue({ code: 'custom', path: ['name'], message: 'no server id derives from this name; set "id"' });
      }
    }
  });

const catalogFileSchema = z
  .strictObject({ version: z.literal(1), servers: z.array(entrySchema).max(2000) })
  .superRefine((file, ctx) => {
    const names = new Set<string>();
    const ids = new Set<string>();
    file.servers.forEach((entry, index) => {
      const name = entry.name.toLowerCase();
      if (names.has(name))
        ctx.addIssue({ code: 'custom', path: ['servers', index, 'name'], message: 'duplicate name' });
      names.add(name);
      const id = entry.id ?? safeDerive(entry.name);
      if (id && ids.has(id)) ctx.addIssue({ code: 'custom', path: ['servers', index, 'id'], message: 'duplicate id' });
      if (id) ids.add(id);
    });
  });

function safeDerive(name: string): string | undefined {
  try {
    return deriveServerId(name);
  } catch {
    return undefined;
  }
}

export type CatalogEntry = Readonly<z.output<typeof entrySchema>>;

export interface CatalogQuery {
  /** Case-insensitive substring of name, title or description. */
  q?: string;
  category?: string;
  /** Default 100. */
  limit?: number;
  offset?: number;
}

export interface Catalog {
  readonly size: number;
  /** A page of matching entries, in file order, and how many matched in all. */
  list(query?: CatalogQuery): { items: CatalogEntry[]; total: number };
  /** Every category, sorted. */
  categories(): string[];
  /** By name, case-insensitively. */
  get(name: string): CatalogEntry | undefined;
  /** By name, or `mcp.preset_not_found`: for `{preset}` installs. */
  preset(name: string): CatalogEntry;
  /** The ResolvedManifest a preset install starts from. */
  toManifest(entry: CatalogEntry): ResolvedManifest;
}

function sourceKindOf(entry: CatalogEntry): SourceKind {
  if (entry.url) return 'url';
  const program = basename(entry.command ?? '');
  if (program === 'npx') return 'npm';
  if (program === 'uvx') return 'uvx';
  if (program === 'docker' || program === 'podman') return 'oci';
  return 'manifest';
}

function freeze(entry: z.output<typeof entrySchema>): CatalogEntry {
  if (entry.args) Object.freeze(entry.args);
  Object.freeze(entry.envRequired);
  return Object.freeze(entry);
}

/** Builds a catalog from already-parsed file content; `source` names it in error messages. */
export function createCatalog(content: unknown, source = 'catalog'): Catalog {
  const parsed = catalogFileSchema.safeParse(content);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
    const lines = issues.slice(0, 20).map((i) => `${i.path || '(root)'}: ${i.message}`);
    throw new GatehouseError('validation_error', `Invalid catalog file ${source}:\n  - ${lines.join('\n  - ')}`, {
      issues,
    });
  }
  const entries = parsed.data.servers.map(freeze);
  const byName = new Map(entries.map((e) => [e.name.toLowerCase(), e]));
  const categories = [...new Set(entries.map((e) => e.category))].sort();

  const get = (name: string) => byName.get(name.toLowerCase());
  return {
    size: entries.length,
    list({ q, category, limit = 100, offset = 0 } = {}) {
      const needle = q?.toLowerCase();
      const matching = entries.filter(
        (e) =>
          (category === undefined || e.category === category) &&
          (needle === undefined ||
            [e.name, e.title, e.description].some((field) => field.toLowerCase().includes(needle))),
      );
      return { items: matching.slice(offset, offset + limit), total: matching.length };
    },
    categories: () => [...categories],
    get,
    preset(name) {
      const entry = get(name);
      if (!entry) throw new GatehouseError('mcp.preset_not_found', `No catalog entry is named "${name}".`);
      return entry;
    },
    toManifest(entry) {
      return {
        id: entry.id ?? deriveServerId(entry.name),
        name: entry.name,
        description: entry.description,
        transport: entry.transport,
        ...(entry.command ? { command: entry.command, args: [...(entry.args ?? [])] } : {}),
        ...(entry.url ? { url: entry.url } : {}),
        tools: [],
        resources: [],
        prompts: [],
        envRequired: [...entry.envRequired],
        ...(entry.argsRequired ? { argsRequired: entry.argsRequired } : {}),
        sourceKind: sourceKindOf(entry),
        ...(entry.homepage ? { sourceUrl: entry.homepage } : {}),
      };
    },
  };
}

/** Reads and validates a catalog file (default: the bundled one). Any problem is a `validation_error` naming the file. */
export async function loadCatalog(path: string = BUNDLED_CATALOG_PATH): Promise<Catalog> {
  let raw: string;
  try {
    raw = await readFile(path, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new GatehouseError(
      'validation_error',
      `Cannot read the catalog file ${path} (${reason}).`,
      {},
      { cause: err },
    );
  }
  let content: unknown;
  try {
    content = JSON.parse(raw);
  } catch (err) {
    // The operator's own file: the parser's message (with its position) helps them fix it.
    throw new GatehouseError(
      'validation_error',
      `The catalog file ${path} is not valid JSON: ${(err as Error).message}`,
    );
  }
  return createCatalog(content, path);
}
