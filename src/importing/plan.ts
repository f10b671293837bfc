/**
 * What an import of a client's server list would do, entry by entry: register (stdio or HTTP; the names
 * of env and header values that will be sealed — values are never shown), skip a duplicate of an
 * installed server, or refuse with the reason (a command `stdio.allowedCommands` does not list, an entry
 * that is Gatehouse itself, one that cannot be read, one REST install would refuse: a header or env name, a
 * header value, a URL scheme). Pure: the route gives it what is installed and the allowed commands.
 */

import type { z } from 'zod';
import { upstreamHeaders } from '../api/ops.js';
import { manifestSchema } from '../api/servers.js';
import { commandAllowed } from '../policy/commands.js';
import { deriveServerId, serverIdSchema } from '../registry/ids.js';
import { hasUrlCredentials } from '../registry/manifest.js';
import type { NewServer } from '../registry/records.js';
import { type ClientEntry, clientEntrySchema } from './clients.js';

export type ImportAction = 'register' | 'duplicate' | 'refused';

export interface ImportItem {
  /** The entry's name in the client's file. */
  name: string;
  /** The server id it gets (or has, for a duplicate). */
  id: string | null;
  transport: 'stdio' | 'streamable-http' | 'sse' | null;
  /** The URL, or the command line. */
  target: string | null;
  action: ImportAction;
  reason?: string;
  /** Env variables and headers whose literal values are sealed on registration (names only). */
  sealed: { env: string[]; headers: string[] };
  warnings: string[];
  /** What `registry.install` gets; never sent back. */
  server?: NewServer;
}

export interface Installed {
  id: string;
  url: string | null;
  command: string | null;
  args: string[];
}

/** `${VAR}`, `${env:VAR}`, `${input:x}`: a value the client fills in, which Gatehouse cannot know. */
const PLACEHOLDER = /\$\{[^}]*\}/;

function sameCommand(a: Installed, command: string, args: readonly string[]): boolean {
  return a.command === command && a.args.length === args.length && a.args.every((v, i) => v === args[i]);
}

function literals(values: Record<string, string> | undefined, what: string, warnings: string[]) {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(values ?? {})) {
    if (PLACEHOLDER.test(value)) {
      warnings.push(
        `${what} ${name} is filled in by the client (${value.match(PLACEHOLDER)?.[0]}); set it afterwards with gatehouse servers config.`,
      );
    } else kept[name] = value;
  }
  return kept;
}

/** An issue in words: a refused record key says why the key is refused, not just that it is. */
function describeIssue(issue: z.core.$ZodIssue, prefix: string[] = []): string {
  const path = [...prefix, ...issue.path.map(String)].join('.');
  const nested = 'issues' in issue ? issue.issues?.[0]?.message : undefined;
  return `${path || '(entry)'}: ${nested ?? issue.message}`;
}

/**
 * What REST install and the config file would refuse in the record an entry becomes, so that every
 * imported record can be exported and applied again: the install manifest's own schema (header and env
 * names, an http(s) URL, sizes), then header values an HTTP request can carry (no CR, LF or NUL). Names
 * of values the client fills in are checked too: they are to be set later under the same name.
 */
function installIssues(manifest: Record<string, unknown>): string[] {
  const checked = manifestSchema.safeParse(manifest);
  if (!checked.success) return checked.error.issues.slice(0, 3).map((issue) => describeIssue(issue));
  const headers = upstreamHeaders.safeParse(manifest.headers ?? {});
  return headers.success ? [] : headers.error.issues.slice(0, 3).map((issue) => describeIssue(issue, ['headers']));
}

/** The install manifest of an entry: the fields its registration keeps, values as the client wrote them. */
function manifestOf(name: string, entry: ClientEntry, transport: NonNullable<ImportItem['transport']>) {
  return transport === 'stdio'
    ? { name, transport, command: entry.command, args: entry.args ?? [], env: entry.env ?? {} }
    : { name, transport, url: entry.url ?? entry.serverUrl, headers: entry.headers ?? {} };
}

export function planImport(
  entries: Record<string, unknown>,
  installed: readonly Installed[],
  allowedCommands: readonly string[],
  /** Whether a URL reaches this gateway itself (`self.ts`). */
  isSelf: (url: string) => boolean = () => false,
): ImportItem[] {
  const items: ImportItem[] = [];
  const taken = new Set(installed.map((s) => s.id));
  for (const [name, raw] of Object.entries(entries)) {
    const refuse = (reason: string, partial: Partial<ImportItem> = {}): void => {
      items.push({
        name,
        id: null,
        transport: null,
        target: null,
        sealed: { env: [], headers: [] },
        warnings: [],
        ...partial,
        action: 'refused',
        reason,
      });
    };
    const parsed = clientEntrySchema.safeParse(raw);
    if (!parsed.success) {
      refuse(`unreadable entry: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
      continue;
    }
    const entry: ClientEntry = parsed.data;
    const url = entry.url ?? entry.serverUrl;
    // `type: "sse"`: the old HTTP+SSE transport, registered as such.
    const transport: ImportItem['transport'] = entry.command
      ? 'stdio'
      : url
        ? entry.type === 'sse'
          ? 'sse'
          : 'streamable-http'
        : null;
    const target = entry.command ? [entry.command, ...(entry.args ?? [])].join(' ') : (url ?? null);
    const shown = { transport, target };
    if (!transport) {
      refuse('neither a command nor a url', shown);
      continue;
    }
    const bridge = entry.args?.includes('stdio') && entry.args.includes('--url');
    if (name.toLowerCase() === 'gatehouse' || bridge || (url !== undefined && isSelf(url))) {
      refuse('this entry is Gatehouse itself', shown);
      continue;
    }
    let id: string;
    try {
      id = serverIdSchema.parse(deriveServerId(name));
    } catch {
      refuse('no server id can be derived from its name', shown);
      continue;
    }
    const duplicate = installed.find((s) =>
      transport === 'stdio' ? sameCommand(s, entry.command as string, entry.args ?? []) : s.url === url,
    );
    if (duplicate || taken.has(id)) {
      items.push({
        name,
        id: duplicate?.id ?? id,
        ...shown,
        action: 'duplicate',
        reason: duplicate ? `already installed as ${duplicate.id}` : `the id ${id} is taken`,
        sealed: { env: [], headers: [] },
        warnings: [],
      });
      continue;
    }
    if (transport === 'stdio' && !commandAllowed(entry.command as string, allowedCommands)) {
      refuse(
        `the command "${entry.command}" is not in stdio.allowedCommands (${allowedCommands.join(', ') || 'nothing'}); an admin may add it`,
        shown,
      );
      continue;
    }
    if (transport !== 'stdio' && !URL.canParse(url as string)) {
      refuse('its url is not an absolute URL', shown);
      continue;
    }
    if (transport !== 'stdio' && hasUrlCredentials(url as string)) {
      // A URL is stored and shown as it is: its credentials would not be sealed.
      refuse('its url carries credentials; give them as a header instead', { ...shown, target: null });
      continue;
    }
    const issues = installIssues(manifestOf(name, entry, transport));
    if (issues.length > 0) {
      refuse(`not installable as it is: ${issues.join('; ')}`, shown);
      continue;
    }
    const warnings: string[] = [];
    const env = literals(entry.env, 'env', warnings);
    const headers = literals(entry.headers, 'header', warnings);
    if (entry.disabled) warnings.push('disabled in the client: registered disabled');
    if (transport !== 'stdio') {
      const host = new URL(url as string).hostname;
      if (/^(localhost|127\.|\[::1\]|::1)/.test(host)) {
        warnings.push(
          `a loopback address: an admin allows it with gatehouse servers config ${id} --private-network true`,
        );
      }
    }
    taken.add(id);
    items.push({
      name,
      id,
      ...shown,
      action: 'register',
      sealed: { env: Object.keys(env), headers: Object.keys(headers) },
      warnings,
      server: {
        id,
        name,
        transport,
        ...(transport === 'stdio'
          ? { command: entry.command as string, args: entry.args ?? [], env }
          : { url: url as string, headers }),
        ...(entry.disabled ? { enabled: false } : {}),
        sourceKind: 'import',
      } as NewServer,
    });
  }
  return items;
}
