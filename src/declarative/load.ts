/**
 * Reads `gatehouse.yaml` into a validated `DeclarativeConfig`, before anything is opened or changed. Every error
 * names the file, the YAML path and the line. Env references are held to the secret prefix here, and env token
 * references are read and hashed here, so a token's value goes no further than this module.
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import type { z } from 'zod';
import { GatehouseError, isGatehouseError } from '../errors.js';
import { hashToken } from '../identity/index.js';
import { assertEnvRef, type SecretInput } from '../registry/secret-values.js';
import { formatPath, locate, type PathSegment } from './paths.js';
import { declarativeSchema, type ServerEntry, type TokenEntry } from './schema.js';
import type { DeclaredToolset } from './toolsets.js';

/** A token as the store keeps it: its SHA-256 hex, never the token. */
export type DeclaredToken = Omit<TokenEntry, 'hash' | 'env'> & { hash: string };

export interface DeclarativeConfig {
  /** The file as given, for messages and the audit actor. */
  file: string;
  servers?: ServerEntry[] | undefined;
  settings?: Record<string, unknown> | undefined;
  tokens?: DeclaredToken[] | undefined;
  toolsets?: DeclaredToolset[] | undefined;
  /** About the file itself (literal secrets); the apply report repeats them under servers. */
  warnings: string[];
}

export interface LoadOptions {
  /** Where env token references are read. */
  env: NodeJS.ProcessEnv;
  /** The only variables a header, env or auth reference may name (`GATEHOUSE_SECRET_ENV_PREFIX`). */
  secretEnvPrefix: string;
}

/** Same bar as GATEHOUSE_ADMIN_TOKEN: a short token could be guessed. */
const MIN_TOKEN_LENGTH = 24;
const MAX_ISSUES = 50;

interface FileIssue {
  path: PathSegment[];
  message: string;
}

export async function loadDeclarativeConfig(file: string, options: LoadOptions): Promise<DeclarativeConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new GatehouseError('validation_error', `Cannot read the config file ${file} (${reason}).`, { file });
  }
  return parseDeclarativeConfig(text, file, options);
}

export function parseDeclarativeConfig(text: string, file: string, options: LoadOptions): DeclarativeConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw invalidFile(
      file,
      doc.errors.map((e) => {
        const { line, col } = lines.linePos(e.pos[0]);
        return { path: '', message: e.message.split('\n')[0] ?? e.message, at: `${line}:${col}` };
      }),
    );
  }
  const located = (issues: FileIssue[]) =>
    issues.slice(0, MAX_ISSUES).map((issue) => {
      const at = locate(doc, lines, issue.path);
      return { path: formatPath(issue.path) || '(top level)', message: issue.message, ...(at ? { at } : {}) };
    });

  const parsed = declarativeSchema.safeParse(doc.toJS({ maxAliasCount: 100 }) ?? {});
  if (!parsed.success) throw invalidFile(file, located(zodIssues(parsed.error)));
  const { servers, settings, tokens, toolsets } = parsed.data;

  const issues: FileIssue[] = [];
  const warnings: string[] = [];
  servers?.forEach((server, index) => {
    for (const [path, value] of secretValues(server)) {
      const at: PathSegment[] = ['servers', index, ...path];
      if (typeof value === 'string') {
        warnings.push(
          `${formatPath(at)} is a literal secret in ${basename(file)}: it is sealed in the store, but the file ` +
            `should hold an env reference ({env: ${options.secretEnvPrefix}…}) instead.`,
        );
      } else {
        const refused = envRefRefusal(value.env, options.secretEnvPrefix);
        if (refused) issues.push({ path: [...at, 'env'], message: refused });
      }
    }
  });
  const declaredTokens = tokens?.map(({ hash, env, ...token }, index): DeclaredToken => {
    if (hash !== undefined) return { ...token, hash: hash.slice('sha256:'.length).toLowerCase() };
    const value = options.env[env as string];
    if (!value) issues.push({ path: ['tokens', index, 'env'], message: `${env} is not set` });
    else if (value.length < MIN_TOKEN_LENGTH) {
      issues.push({
        path: ['tokens', index, 'env'],
        message: `the token in ${env} is shorter than ${MIN_TOKEN_LENGTH}`,
      });
    }
    return { ...token, hash: value ? hashToken(value) : '' };
  });
  if (issues.length > 0) throw invalidFile(file, located(issues));
  return { file, servers, settings, tokens: declaredTokens, ...(toolsets ? { toolsets } : {}), warnings };
}

/** Every header, env and auth secret of a server entry, with its path inside the entry. */
function secretValues(server: ServerEntry): Array<[PathSegment[], SecretInput]> {
  const values: Array<[PathSegment[], SecretInput]> = [];
  for (const field of ['headers', 'env'] as const) {
    for (const [name, value] of Object.entries(server[field] ?? {})) values.push([[field, name], value]);
  }
  if (server.auth?.type === 'bearer') values.push([['auth', 'token'], server.auth.token]);
  // Sealed like the others, so held to the prefix here too: the store would refuse it mid-apply.
  if (server.auth?.type === 'oauth' && server.auth.clientSecret !== undefined) {
    values.push([['auth', 'clientSecret'], server.auth.clientSecret]);
  }
  return values;
}

/** Why the server store would refuse this env reference (its own check, so the two cannot drift), if it would. */
function envRefRefusal(name: string, prefix: string): string | undefined {
  try {
    assertEnvRef(name, prefix, 'env');
    return undefined;
  } catch (error) {
    if (!isGatehouseError(error)) throw error;
    const issues = error.details?.issues as Array<{ message: string }> | undefined;
    return issues?.[0]?.message ?? error.message;
  }
}

/** zod's issues with one per unknown key, so each names the key itself. */
function zodIssues(error: z.ZodError): FileIssue[] {
  const issues: FileIssue[] = [];
  const seen = new Set<string>();
  const add = (path: PathSegment[], message: string) => {
    const key = `${formatPath(path)}\n${message}`;
    if (seen.has(key)) return;
    seen.add(key);
    issues.push({ path, message });
  };
  for (const issue of error.issues) {
    const path = issue.path.filter((p): p is PathSegment => typeof p !== 'symbol');
    if (issue.code === 'unrecognized_keys') for (const key of issue.keys) add([...path, key], 'unknown key');
    else add(path, issue.message);
  }
  return issues;
}

function invalidFile(file: string, issues: Array<{ path: string; message: string; at?: string }>): GatehouseError {
  const lines = issues.map((i) => `${file}${i.at ? `:${i.at}` : ''}: ${i.path ? `${i.path}: ` : ''}${i.message}`);
  return new GatehouseError(
    'validation_error',
    `${file} is not a valid Gatehouse config:\n  - ${lines.join('\n  - ')}`,
    {
      file,
      issues,
    },
  );
}
