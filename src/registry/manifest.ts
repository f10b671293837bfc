/**
 * What an install source resolves to before anything is installed or run: a `ResolvedManifest`.
 *
 * Specs (`oci://`, `npm:`/`npx:`, `uvx:`/`uv:`, `git+https://`) are parsed locally, with no network. Their package
 * names become process arguments later, so each is held to its registry's own grammar and anything else (shell
 * metacharacters, whitespace, a leading `-` that would read as an option) is refused. `http(s)://…/*.json` is a
 * manifest fetched through the egress guard; any other `http(s)` URL is a Streamable HTTP server at that address.
 */
import { z } from 'zod';
import type { EgressGuard } from '../egress/index.js';
import { GatehouseError, isGatehouseError, validationError } from '../errors.js';
import { assertServerId, deriveServerId, serverIdSchema } from './ids.js';

export type Transport = 'streamable-http' | 'sse' | 'stdio';
export type SourceKind = 'oci' | 'npm' | 'uvx' | 'git' | 'manifest' | 'url';

export interface ManifestTool {
  name: string;
  description?: string;
}
export type ManifestPrompt = ManifestTool;
export interface ManifestResource {
  name: string;
  uri?: string;
  description?: string;
}

export interface ResolvedManifest {
  id: string;
  name: string;
  description: string;
  transport: Transport;
  command?: string;
  args?: string[];
  url?: string;
  /** What the source declares; the handshake discovers what the server really offers. */
  tools: ManifestTool[];
  resources: ManifestResource[];
  prompts: ManifestPrompt[];
  /** Names only: values are set (and sealed) at install. */
  envRequired: string[];
  /** Extra arguments needed after `args`, in words (catalog presets). */
  argsRequired?: string;
  sourceKind: SourceKind;
  /** Where the manifest came from: the package page, the repository, or the manifest URL. */
  sourceUrl?: string;
  /** The install spec it was parsed from, for spec kinds. */
  spec?: string;
}

export interface ResolveOptions {
  /** An explicit server id; wins over a manifest's own and a derived one. */
  id?: string;
}

export interface FetchManifestOptions extends ResolveOptions {
  timeoutMs?: number;
}

export const MANIFEST_MAX_BYTES = 256 * 1024;
export const MANIFEST_TIMEOUT_MS = 10_000;
export const SPEC_MAX_LENGTH = 2048;

// ---------------------------------------------------------------------------------------------------------------
// Shared validators (the catalog holds its command lines to the same rules)

/** Control and format characters (incl. bidi overrides) have no place in names or process arguments. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}]/u;
const printable = (value: string) => !UNPRINTABLE.test(value);

export const envNameSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*)');

/** A program name or path: no whitespace or shell metacharacters, and never option-looking. */
export const commandSchema = z
  .string()
  .max(256)
  .regex(/^[A-Za-z0-9_./+][A-Za-z0-9_./+-]*$/, 'expected a program name or path without spaces or metacharacters');

/** Arguments go to the process as they are (no shell); still no control characters, and bounded. */
export const argsSchema = z
  .array(z.string().max(4096).refine(printable, 'arguments may not contain control characters'))
  .max(64);

// ---------------------------------------------------------------------------------------------------------------
// Specs: parsed locally, no network

type SpecKind = 'oci' | 'npm' | 'uvx' | 'git';
const SPEC_SCHEMES = new Map<string, SpecKind>([
  ['oci', 'oci'],
  ['npm', 'npm'],
  ['npx', 'npm'],
  ['uvx', 'uvx'],
  ['uv', 'uvx'],
  ['git+https', 'git'],
]);
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;

// npm's grammar for new packages, minus `~` and `*`; the first character of scope and name is a letter or digit.
const NPM_NAME = /^(?:@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/;
// PEP 508 project names.
const PYPI_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$/;
// A semver version, a PEP 440 version without epoch, or a dist-tag (`latest`): no ranges, no operators.
const VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/;
// The OCI distribution reference grammar (github.com/distribution/reference), without IPv6 registries.
const OCI_REFERENCE = (() => {
  const alnum = '[a-z0-9]+';
  const component = `${alnum}(?:(?:[._]|__|-+)${alnum})*`;
  const label = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
  const domain = `${label}(?:\\.${label})*(?::[0-9]+)?`;
  const name = `(?:${domain}/)?${component}(?:/${component})*`;
  const tag = '[\\w][\\w.-]{0,127}';
  const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
  return new RegExp(`^(${name})(?::(${tag}))?(?:@(${digest}))?$`);
})();
// A DNS name with a dot and an alphabetic top label: no IP literals, no single-label (LAN) names, no port.
const PUBLIC_HOSTNAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;
const REPO_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$/;
const GIT_REF = /^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$/;

const SUPPORTED_SPECS = 'oci://, npm:, npx:, uvx:, uv:, git+https:// and http(s):// URLs';

function specError(message: string, reason = 'invalid_spec'): GatehouseError {
  return new GatehouseError('mcp.spec_unsupported', message, { reason });
}

function pickId(name: string, options: ResolveOptions | undefined): string {
  return options?.id !== undefined ? assertServerId(options.id) : deriveServerId(name);
}

interface StdioFields {
  name: string;
  description: string;
  command: string;
  args: string[];
  spec: string;
  sourceUrl?: string;
}

function stdioManifest(kind: SourceKind, fields: StdioFields, options?: ResolveOptions): ResolvedManifest {
  const { name, description, command, args, spec, sourceUrl } = fields;
  return {
    id: pickId(name, options),
    name,
    description,
    transport: 'stdio',
    command,
    args,
    tools: [],
    resources: [],
    prompts: [],
    envRequired: [],
    sourceKind: kind,
    ...(sourceUrl ? { sourceUrl } : {}),
    spec,
  };
}

/** `npm:@scope/pkg@1.2.3`, `npx:pkg` → `npx -y <pkg>`. */
function npmSpec(scheme: string, body: string, options?: ResolveOptions): ResolvedManifest {
  const at = body.indexOf('@', body.startsWith('@') ? 1 : 0);
  const name = at === -1 ? body : body.slice(0, at);
  const version = at === -1 ? undefined : body.slice(at + 1);
  if (name.length > 214 || !NPM_NAME.test(name)) {
    throw specError('Not a valid npm package name (lower-case letters, digits, ".", "_", "-", optional @scope/).');
  }
  if (version !== undefined && !VERSION.test(version)) {
    throw specError('Not a valid npm version or tag (an exact version or a tag such as "latest"; no ranges).');
  }
  const pkg = version === undefined ? name : `${name}@${version}`;
  return stdioManifest(
    'npm',
    {
      name,
      description: `npm package ${pkg}`,
      command: 'npx',
      args: ['-y', pkg],
      spec: `${scheme}:${pkg}`,
      sourceUrl: `https://www.npmjs.com/package/${name}`,
    },
    options,
  );
}

/** `uvx:pkg`, `uv:pkg==1.2`, `uvx:pkg@1.2` → `uvx <pkg>[@version]` (uvx's `@` pins an exact version). */
function uvxSpec(scheme: string, body: string, options?: ResolveOptions): ResolvedManifest {
  const match = /^([^@=]+)(?:(?:@|==)(.+))?$/.exec(body);
  const name = match?.[1] ?? '';
  const version = match?.[2];
  if (!PYPI_NAME.test(name)) {
    throw specError('Not a valid PyPI project name (letters, digits, ".", "_", "-", starting with a letter or digit).');
  }
  if (version !== undefined && !VERSION.test(version)) {
    throw specError('Not a valid PyPI version (an exact version such as 1.2.3; no ranges or extras).');
  }
  const pkg = version === undefined ? name : `${name}@${version}`;
  return stdioManifest(
    'uvx',
    {
      name,
      description: `PyPI package ${pkg}`,
      command: 'uvx',
      args: [pkg],
      spec: `${scheme}:${pkg}`,
      sourceUrl: `https://pypi.org/project/${name}/`,
    },
    options,
  );
}

/** `oci://ghcr.io/owner/img:tag` → `docker run -i --rm <image>`. */
function ociSpec(body: string, options?: ResolveOptions): ResolvedManifest {
  const reference = body.startsWith('//') ? body.slice(2) : '';
  const match = OCI_REFERENCE.exec(reference);
  const name = match?.[1];
  if (!name || name.length > 255) {
    throw specError('Not a valid OCI image reference (oci://registry/owner/image[:tag][@digest], lower-case path).');
  }
  return stdioManifest(
    'oci',
    {
      name,
      description: `OCI image ${reference}`,
      command: 'docker',
      args: ['run', '-i', '--rm', reference],
      spec: `oci://${reference}`,
    },
    options,
  );
}

/**
 * `git+https://host/owner/repo(.git)(#ref)` → `npx -y git+https://…`: npm installs a package straight from a git
 * repository and runs its bin, so a git spec is taken to be a Node package (a Python server in git is installed with
 * a `{manifest}` instead). The host must be a public DNS name: npm fetches it later, outside the egress guard.
 */
function gitSpec(body: string, options?: ResolveOptions): ResolvedManifest {
  const rest = body.startsWith('//') ? body.slice(2) : '';
  const hash = rest.indexOf('#');
  const location = hash === -1 ? rest : rest.slice(0, hash);
  const ref = hash === -1 ? undefined : rest.slice(hash + 1);
  const [host = '', ...segments] = location.split('/');
  if (!PUBLIC_HOSTNAME.test(host)) {
    throw specError('A git+https spec needs a public host name (no IP address, port or credentials).');
  }
  if (segments.length < 2 || segments.length > 8 || !segments.every((s) => REPO_SEGMENT.test(s))) {
    throw specError('A git+https spec needs a repository path like owner/repo (letters, digits, ".", "_", "-").');
  }
  if (ref !== undefined && (!GIT_REF.test(ref) || ref.includes('..') || ref.includes('//') || ref.endsWith('/'))) {
    throw specError('Not a valid git ref after "#" (a branch, tag or commit).');
  }
  const repoPath = segments.join('/').replace(/\.git$/, '');
  const target = `git+https://${host}/${segments.join('/')}${ref === undefined ? '' : `#${ref}`}`;
  return stdioManifest(
    'git',
    {
      name: `${host.toLowerCase()}/${repoPath}`,
      description: `Node package from git repository ${host.toLowerCase()}/${repoPath}`,
      command: 'npx',
      args: ['-y', target],
      spec: target,
      sourceUrl: `https://${host}/${repoPath}`,
    },
    options,
  );
}

/** Parses an install spec locally (no network). Throws `mcp.spec_unsupported` (with a `reason`) for anything else. */
export function parseSpec(spec: string, options?: ResolveOptions): ResolvedManifest {
  if (spec.length === 0 || spec.length > SPEC_MAX_LENGTH) {
    throw specError(`An install spec is 1-${SPEC_MAX_LENGTH} characters.`, 'invalid_length');
  }
  if (/\s/.test(spec) || UNPRINTABLE.test(spec)) {
    throw specError('An install spec may not contain whitespace or control characters.', 'invalid_characters');
  }
  const scheme = SCHEME.exec(spec)?.[1]?.toLowerCase();
  const kind = scheme === undefined ? undefined : SPEC_SCHEMES.get(scheme);
  if (scheme === undefined || kind === undefined) {
    throw specError(`Unsupported install spec; supported are ${SUPPORTED_SPECS}.`, 'unsupported_scheme');
  }
  const body = spec.slice(scheme.length + 1);
  switch (kind) {
    case 'npm':
      return npmSpec(scheme, body, options);
    case 'uvx':
      return uvxSpec(scheme, body, options);
    case 'oci':
      return ociSpec(body, options);
    case 'git':
      return gitSpec(body, options);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Manifests fetched from http(s)

const text = z.string().max(4000);
const namedItem = z.object({ name: z.string().trim().min(1).max(256), description: text.optional() });
const resourceItem = z
  .object({
    name: z.string().trim().min(1).max(256).optional(),
    uri: z.string().min(1).max(2048).optional(),
    description: text.optional(),
  })
  .refine((r) => r.name !== undefined || r.uri !== undefined, 'a resource needs a name or a uri');
const envList = z.array(envNameSchema).max(64);
// `env` as a list of names or declarations, or as an object keyed by name (its values are never read).
const envDeclaration = z.union([
  z
    .array(
      z.union([
        envNameSchema,
        z.object({ name: envNameSchema, required: z.boolean().optional(), isRequired: z.boolean().optional() }),
      ]),
    )
    .max(64),
  z.record(envNameSchema, z.unknown()),
]);
// The MCP registry's server.json: packages to run and remotes to reach.
const registryPackage = z.object({
  registryType: z.string().max(32),
  identifier: z.string().min(1).max(512),
  version: z.string().max(128).optional(),
  environmentVariables: z
    .array(z.object({ name: envNameSchema, isRequired: z.boolean().optional() }))
    .max(64)
    .optional(),
});
const registryRemote = z.object({ type: z.string().max(32), url: z.string().max(2048) });

const manifestInput = z.object({
  id: serverIdSchema.optional(),
  name: z.string().trim().min(1).max(200).refine(printable, 'the name may not contain control characters'),
  description: text.optional(),
  transport: z.enum(['streamable-http', 'sse', 'stdio', 'http']).optional(),
  command: commandSchema.optional(),
  args: argsSchema.optional(),
  url: z.string().max(2048).optional(),
  spec: z.string().max(SPEC_MAX_LENGTH).optional(),
  tools: z.array(namedItem).max(1000).optional(),
  resources: z.array(resourceItem).max(1000).optional(),
  prompts: z.array(namedItem).max(1000).optional(),
  envRequired: envList.optional(),
  env_required: envList.optional(),
  env: envDeclaration.optional(),
  packages: z.array(registryPackage).max(32).optional(),
  remotes: z.array(registryRemote).max(32).optional(),
});
type ManifestInput = z.output<typeof manifestInput>;

function invalid(reason: string, message: string, details?: Record<string, unknown>): GatehouseError {
  return new GatehouseError('mcp.manifest_invalid', message, { ...details, reason });
}

/** Whether a URL carries credentials (`https://user:secret@host/…`): a URL is stored and shown as it is, unsealed. */
export function hasUrlCredentials(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const { username, password } = new URL(url);
  return username !== '' || password !== '';
}

/** An `http(s)` URL a server can be reached at: parsed, and free of credentials (those belong in sealed headers). */
function serverUrl(value: string, path = 'url'): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw validationError([{ path, message: 'not a valid absolute URL' }], 'Not a valid absolute URL.', {
      reason: 'invalid_url',
    });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw specError(`Unsupported URL scheme; supported are ${SUPPORTED_SPECS}.`, 'unsupported_scheme');
  }
  if (hasUrlCredentials(value)) {
    const message = 'Credentials in the URL are refused; give them as a header instead.';
    throw validationError([{ path, message }], message, { reason: 'credentials_in_url' });
  }
  return url;
}

type Launch = Pick<ResolvedManifest, 'transport' | 'command' | 'args' | 'url' | 'spec'>;

/** The ways a manifest says how to run or reach its server, in order of preference; each built only if chosen. */
function launchOptions(input: ManifestInput): Array<{ transport: Transport; build: () => Launch }> {
  const options: Array<{ transport: Transport; build: () => Launch }> = [];
  const fromSpec = (spec: string): Launch => {
    const { transport, command, args } = parseSpec(spec);
    return { transport, command, args, spec };
  };
  const fromUrl = (url: string): Launch => ({ transport: 'streamable-http', url: serverUrl(url).href });
  const { command, url, spec } = input;
  if (command) {
    options.push({ transport: 'stdio', build: () => ({ transport: 'stdio', command, args: input.args ?? [] }) });
  }
  if (url) options.push({ transport: 'streamable-http', build: () => fromUrl(url) });
  // The legacy HTTP+SSE transport only when asked for by name (a manifest's `transport: "sse"`).
  if (url && input.transport === 'sse')
    options.push({ transport: 'sse', build: () => ({ ...fromUrl(url), transport: 'sse' }) });
  if (spec) options.push({ transport: 'stdio', build: () => fromSpec(spec) });
  for (const remote of input.remotes ?? []) {
    if (remote.type === 'streamable-http' || remote.type === 'http') {
      options.push({ transport: 'streamable-http', build: () => fromUrl(remote.url) });
    } else if (remote.type === 'sse') {
      options.push({ transport: 'sse', build: () => ({ ...fromUrl(remote.url), transport: 'sse' }) });
    }
  }
  for (const pkg of input.packages ?? []) {
    // Registry packages go through the same strict spec grammar as a spec typed by hand.
    const pinned = pkg.version ? `@${pkg.version}` : '';
    const tagged = /[:@][^/]*$/.test(pkg.identifier) || !pkg.version ? '' : `:${pkg.version}`;
    const specs = new Map([
      ['npm', `npm:${pkg.identifier}${pinned}`],
      ['pypi', `uvx:${pkg.identifier}${pinned}`],
      ['oci', `oci://${pkg.identifier}${tagged}`],
    ]);
    const packageSpec = specs.get(pkg.registryType);
    if (packageSpec) options.push({ transport: 'stdio', build: () => fromSpec(packageSpec) });
  }
  return options;
}

function chooseLaunch(input: ManifestInput): Launch {
  const wanted: Transport | undefined = input.transport === 'http' ? 'streamable-http' : input.transport;
  const options = launchOptions(input);
  // Unasked, the legacy HTTP+SSE transport is the last resort: any other way to reach the server wins.
  const chosen =
    wanted === undefined
      ? (options.find((o) => o.transport !== 'sse') ?? options[0])
      : options.find((o) => o.transport === wanted);
  if (!chosen) {
    const how = wanted ? `a way to run it over ${wanted}` : 'a url, a command, a spec, remotes or packages';
    throw invalid('no_launch', `The manifest does not say how to reach the server: it needs ${how}.`);
  }
  try {
    return chosen.build();
  } catch (err) {
    if (!isGatehouseError(err)) throw err;
    throw invalid(chosen.transport === 'stdio' ? 'invalid_spec' : 'invalid_url', `Invalid manifest: ${err.message}`);
  }
}

function envRequiredOf(input: ManifestInput): string[] {
  const names = new Set<string>([...(input.envRequired ?? []), ...(input.env_required ?? [])]);
  const env = input.env;
  if (Array.isArray(env)) {
    for (const entry of env) {
      if (typeof entry === 'string') names.add(entry);
      else if (entry.required !== false && entry.isRequired !== false) names.add(entry.name);
    }
  } else if (env) {
    for (const name of Object.keys(env)) names.add(name);
  }
  for (const pkg of input.packages ?? []) {
    for (const variable of pkg.environmentVariables ?? []) if (variable.isRequired) names.add(variable.name);
  }
  return [...names].slice(0, 64);
}

function toResolved(input: ManifestInput, sourceUrl: string, options?: ResolveOptions): ResolvedManifest {
  const launch = chooseLaunch(input);
  return {
    id: options?.id !== undefined ? assertServerId(options.id) : (input.id ?? deriveServerId(input.name)),
    name: input.name,
    description: input.description ?? '',
    ...launch,
    tools: input.tools ?? [],
    resources: (input.resources ?? []).map(({ name, uri, description }) => ({
      name: name ?? (uri as string),
      ...(uri !== undefined ? { uri } : {}),
      ...(description !== undefined ? { description } : {}),
    })),
    prompts: input.prompts ?? [],
    envRequired: envRequiredOf(input),
    sourceKind: 'manifest',
    sourceUrl,
  };
}

function tooLarge(): GatehouseError {
  return invalid('too_large', `The manifest is larger than ${MANIFEST_MAX_BYTES} bytes.`, {
    limit: MANIFEST_MAX_BYTES,
  });
}

/** Reads a body, refusing it as soon as it passes the cap (whatever the guard's own cap is). */
async function readCapped(response: Response): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > MANIFEST_MAX_BYTES) {
    await response.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!response.body) return new Uint8Array();
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MANIFEST_MAX_BYTES) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    // fatal: a manifest that is not UTF-8 is refused rather than read with replacement characters.
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    // The parser's message quotes the body; it stays out of the answer.
    throw invalid('invalid_json', 'The manifest is not valid JSON.');
  }
}

/**
 * Fetches and validates a manifest through the egress guard: a 256 KB cap enforced while the body streams, one
 * deadline over headers and body. The guard's own refusals pass through; a deadline is `upstream_timeout`.
 */
export async function fetchManifest(
  url: string,
  guard: Pick<EgressGuard, 'fetch'>,
  options: FetchManifestOptions = {},
): Promise<ResolvedManifest> {
  const timeoutMs = options.timeoutMs ?? MANIFEST_TIMEOUT_MS;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const host = URL.canParse(url) ? new URL(url).host : 'the upstream';
  let bytes: Uint8Array;
  try {
    const response = await guard.fetch(url, { headers: { accept: 'application/json' }, signal: controller.signal });
    if (response.status < 200 || response.status > 299) {
      await response.body?.cancel().catch(() => {});
      throw invalid('http_status', `The manifest URL answered with HTTP ${response.status}.`, {
        status: response.status,
      });
    }
    bytes = await readCapped(response);
  } catch (err) {
    if (controller.signal.aborted && !(isGatehouseError(err) && err.code === 'mcp.manifest_invalid')) {
      throw new GatehouseError('upstream_timeout', `The manifest at ${host} did not arrive within ${timeoutMs} ms.`, {
        timeoutMs,
      });
    }
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const parsed = manifestInput.safeParse(parseJson(bytes));
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 20).map((i) => ({ path: i.path.join('.'), message: i.message }));
    const summary = issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ');
    throw invalid('invalid_shape', `The manifest is not valid: ${summary}`, { issues });
  }
  return toResolved(parsed.data, url, options);
}

// ---------------------------------------------------------------------------------------------------------------
// POST /api/mcp/install {url} and GET /api/mcp/resolve?url=

/**
 * A URL server's name: its host, with the port when the URL gives one and the path unless it is just `/` or
 * `/mcp`, so two servers on one host (`127.0.0.1:3001`, `127.0.0.1:3002/tools`) get different names and ids.
 */
export function nameOfServerUrl(url: URL): { name: string; idSource: string } {
  // `host` keeps an explicit port (and an IPv6 address's brackets); a scheme's default port is not shown.
  const host = url.port ? url.host : url.hostname.replace(/^\[(.*)\]$/, '$1');
  const path = url.pathname.replace(/\/+$/, '').replace(/\/(mcp|sse)$/i, '');
  const name = `${host}${path}`;
  // The id is derived from the last `/` segment of what it is given: hand it the whole name as one segment.
  return { name, idSource: name.replace(/\//g, '-') };
}

/**
 * The `{url}` install rules: a spec is parsed; an `http(s)` URL whose path ends in `.json` is fetched as a manifest;
 * any other `http(s)` URL is a Streamable HTTP server at that address, named after its host — or a legacy HTTP+SSE
 * server when its last path segment is `sse` (the endpoint that transport's servers conventionally serve).
 */
export async function resolveInstallUrl(
  input: string,
  guard: Pick<EgressGuard, 'fetch'>,
  options: FetchManifestOptions = {},
): Promise<ResolvedManifest> {
  const scheme = SCHEME.exec(input)?.[1]?.toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') return parseSpec(input, options);
  if (input.length > SPEC_MAX_LENGTH || /\s/.test(input) || UNPRINTABLE.test(input)) {
    const message = `A URL is at most ${SPEC_MAX_LENGTH} characters, without whitespace or control characters.`;
    throw validationError([{ path: 'url', message }], message, { reason: 'invalid_url' });
  }
  const url = serverUrl(input);
  if (url.pathname.toLowerCase().endsWith('.json')) return fetchManifest(url.href, guard, options);
  const { name, idSource } = nameOfServerUrl(url);
  const sse = /\/sse\/?$/i.test(url.pathname);
  return {
    id: pickId(idSource, options),
    name,
    description: `${sse ? 'HTTP+SSE' : 'Streamable HTTP'} server at ${url.host}`,
    transport: sse ? 'sse' : 'streamable-http',
    url: url.href,
    tools: [],
    resources: [],
    prompts: [],
    envRequired: [],
    sourceKind: 'url',
  };
}
