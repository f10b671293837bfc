/**
 * CORS for the parts of Gatehouse a browser-based MCP client talks to: the OAuth discovery documents,
 * JWKS, `/register`, `/token`, `/revoke` (any origin: they take no cookie, a public client's PKCE and
 * tokens are its own) and the MCP endpoints (only the origins the endpoint itself admits, so a page
 * the endpoint would refuse is not told it may call). Never on `/api/*` or the dashboard: those take
 * the session cookie, and answering a foreign origin there would open them to cross-site reads.
 */
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { isLoopbackHost } from '../config.js';

export const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether a browser `Origin` may use the MCP endpoints: listed exactly, or a loopback page while bound to loopback. */
export function originAllowed(origin: string, host: string, allowedOrigins: readonly string[]): boolean {
  if (allowedOrigins.includes(origin)) return true;
  if (!isLoopbackHost(host)) return false;
  try {
    const parsed = new URL(origin);
    return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && LOOPBACK_HOSTNAMES.has(parsed.hostname);
  } catch {
    return false;
  }
}

const OAUTH_PATHS = new Set(['/oauth/jwks', '/token', '/register', '/revoke']);
const isOAuthPath = (path: string) => OAUTH_PATHS.has(path) || path.startsWith('/.well-known/');
const isMcpPath = (path: string) => path === '/mcp' || path.startsWith('/mcp/');

// What the MCP authorization spec and the streamable HTTP transport need a browser to send and read.
const ALLOW_HEADERS = 'Authorization, Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, traceparent';
const EXPOSE_HEADERS = 'Mcp-Session-Id, WWW-Authenticate, MCP-Protocol-Version';
const PREFLIGHT_MAX_AGE_S = '600';

/**
 * The hook: sets the CORS headers on the raw response (so they reach answers the MCP transport writes
 * itself, and the 401 of a refused token), and answers a preflight with 204 before anything else runs.
 */
export function corsHook(options: { host: string; allowedOrigins: readonly string[] }): onRequestHookHandler {
  return (request: FastifyRequest, reply: FastifyReply, done) => {
    const origin = request.headers.origin;
    if (origin === undefined) return done();
    const path = (request.url.split('?')[0] ?? '').replace(/\/$/, '') || '/';
    let allow: string | undefined;
    let methods: string;
    if (isMcpPath(path)) {
      allow = originAllowed(origin, options.host, options.allowedOrigins) ? origin : undefined;
      methods = 'GET, POST, DELETE';
    } else if (isOAuthPath(path)) {
      allow = '*';
      methods = path.startsWith('/.well-known/') || path === '/oauth/jwks' ? 'GET' : 'POST';
    } else {
      return done();
    }
    const res = reply.raw;
    if (allow !== '*') res.appendHeader('vary', 'Origin');
    if (allow === undefined) {
      // A refused origin's preflight gets no grant (the browser stops); its real request meets the endpoint's 403.
      if (request.method === 'OPTIONS') return void reply.code(204).send();
      return done();
    }
    res.setHeader('access-control-allow-origin', allow);
    res.setHeader('access-control-expose-headers', EXPOSE_HEADERS);
    if (request.method === 'OPTIONS') {
      res.setHeader('access-control-allow-methods', methods);
      res.setHeader('access-control-allow-headers', ALLOW_HEADERS);
      res.setHeader('access-control-max-age', PREFLIGHT_MAX_AGE_S);
      return void reply.code(204).send();
    }
    done();
  };
}
