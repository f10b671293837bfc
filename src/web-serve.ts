/**
 * Serves the dashboard (the Vite build in `dist/web`) at `/`: hashed assets from `/assets/…`, and
 * `index.html` for every other non-API path so the app's own routes load on refresh. Paths under the
 * API and protocol prefixes are never answered with the app: an unknown one stays a JSON 404.
 *
 * The files are read once into memory (the build is small) and only files found there are served,
 * so no request path ever reaches the file system. Every answer carries a Content-Security-Policy
 * that allows only this origin.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply } from 'fastify';
import { defineRoute, type RouteDeclaration } from './api/route.js';
import { GatehouseError, noRouteError } from './errors.js';

/** `dist/web` at the package root, from `src/` and from `dist/` alike. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../dist/web/', import.meta.url));

/** Prefixes that belong to the API and the protocol surfaces: never the app. */
export const RESERVED_PREFIXES = [
  '/api',
  '/mcp',
  '/ops',
  '/info',
  '/health',
  '/metrics',
  // OAuth (src/oauth): a client probing these must get JSON, never the app.
  '/.well-known',
  '/authorize',
  '/token',
  '/register',
  '/revoke',
  '/oauth',
] as const;

export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

interface StaticFile {
  body: Buffer;
  type: string;
  etag: string;
  immutable: boolean;
}

async function walk(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const files = await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return walk(path);
      return entry.isFile() ? [path] : [];
    }),
  );
  return files.flat();
}

/** Reads every file of the build into memory, keyed by its URL path (`/index.html`, `/assets/x.js`). */
export async function loadDashboard(dir: string): Promise<Map<string, StaticFile> | undefined> {
  try {
    if (!(await stat(join(dir, 'index.html'))).isFile()) return undefined;
  } catch {
    return undefined;
  }
  const files = new Map<string, StaticFile>();
  for (const path of await walk(dir)) {
    const type = TYPES[extname(path).toLowerCase()];
    if (!type) continue;
    const body = await readFile(path);
    const urlPath = `/${relative(dir, path).split(sep).join('/')}`;
    files.set(urlPath, {
      body,
      type,
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      immutable: urlPath.startsWith('/assets/'),
    });
  }
  return files;
}

function isReserved(path: string): boolean {
  // `/health` also covers `/healthz`; the others own their exact path and everything below it.
  return RESERVED_PREFIXES.some((prefix) =>
    prefix === '/health' ? path.startsWith(prefix) : path === prefix || path.startsWith(`${prefix}/`),
  );
}

export function securityHeaders(reply: FastifyReply): void {
  reply.header('content-security-policy', DASHBOARD_CSP);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('x-frame-options', 'DENY');
  reply.header('referrer-policy', 'no-referrer');
  reply.header('cross-origin-opener-policy', 'same-origin');
}

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Gatehouse</title></head>
<body><h1>Gatehouse</h1><p>The dashboard has not been built. Run <code>npm run build</code> (it builds the
dashboard into <code>dist/web</code>) and restart <code>gatehouse serve</code>. The REST API is available under
<code>/api</code>.</p></body></html>`;

export interface DashboardOptions {
  /** The folder holding the Vite build; default `dist/web`. */
  dir?: string;
}

/** `GET /` and `GET /*` (public, no admin-surface tool): the dashboard's files, or `index.html` for app routes. */
export function dashboardRoutes(options: DashboardOptions = {}): RouteDeclaration[] {
  const dir = options.dir ?? DASHBOARD_DIR;
  let files: Promise<Map<string, StaticFile> | undefined> | undefined;
  // A missing build is looked for again on the next request; a found one is kept.
  const current = async () => {
    files ??= loadDashboard(dir);
    const loaded = await files;
    if (!loaded) files = undefined;
    return loaded;
  };

  const serve = async (path: string, reply: FastifyReply, ifNoneMatch: string | undefined) => {
    if (isReserved(path)) throw noRouteError('GET', path);
    securityHeaders(reply);
    const loaded = await current();
    if (!loaded) {
      return reply
        .code(503)
        .header('content-type', 'text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(NOT_BUILT);
    }
    let file = loaded.get(path);
    if (!file && path.startsWith('/assets/')) throw new GatehouseError('not_found', `No file ${path}.`);
    // App routes (and `/`) load the app; it reads its own route from the location.
    file ??= loaded.get('/index.html');
    if (!file) throw new GatehouseError('not_found');
    reply.header('etag', file.etag);
    reply.header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    if (ifNoneMatch === file.etag) return reply.code(304).send();
    return reply.code(200).header('content-type', file.type).send(file.body);
  };

  const common = {
    method: 'GET' as const,
    scope: 'system' as const,
    access: 'public' as const,
    mcp: { exclude: 'static files of the browser dashboard, not an operation' },
  };
  return [
    defineRoute({
      ...common,
      url: '/',
      summary: 'The dashboard (single-page app).',
      handler: ({ request, reply }) => serve('/', reply, request.headers['if-none-match']),
    }),
    defineRoute({
      ...common,
      url: '/*',
      summary: "The dashboard's files; any other non-API path answers the app's index.html.",
      handler: ({ request, reply }) => serve(request.url.split('?')[0] ?? '/', reply, request.headers['if-none-match']),
    }),
  ];
}
