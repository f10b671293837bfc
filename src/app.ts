/**
 * Assembles a Fastify app from its parts, without listening: the CLI listens,
 * tests use `inject()` or port 0. Every error leaves as the catalogue's
 * envelope `{"error": {"code", "message", ...}}`.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type onRequestHookHandler,
} from 'fastify';
import { GRANT_HEADER, type SurfaceGrants } from './api/grants.js';
import { type RouteDeclaration, registerRoutes } from './api/route.js';
import type { Config } from './config.js';
import { GatehouseError, isGatehouseError, noRouteError } from './errors.js';
import type { Authenticator } from './identity/index.js';
import { mcpBodyRefusal, parseJsonBody } from './json-body.js';
import { type Logger, requestLogger } from './logging.js';

export interface AppParts {
  config: Pick<Config, 'maxBodySize'> & Partial<Pick<Config, 'requestTimeoutMs' | 'headersTimeoutMs' | 'trustProxy'>>;
  logger: Logger;
  authenticate: Authenticator;
  routes: readonly RouteDeclaration[];
  /** Surface grants the auth hook redeems (the admin surface's in-process calls). */
  grants?: SurfaceGrants;
  /** Told of every request whose client took longer than the request timeout to send it (counted on /metrics). */
  onRequestTimeout?: () => void;
  /** The `WWW-Authenticate` of a 401 to this request (an MCP surface names its OAuth metadata); default `Bearer`. */
  challenge?: (request: FastifyRequest) => string | undefined;
  /** Runs before authentication: CORS headers (on refusals too) and preflight answers. */
  cors?: onRequestHookHandler;
  /** While it answers true (a replica draining), every answer closes its connection (`Connection: close`). */
  closingConnections?: () => boolean;
}

/**
 * The server's responses, each sent with `Connection: close` while `closing()` answers true: a keep-alive
 * client then opens its next connection elsewhere. At the head of every answer, Fastify's own and those
 * written on the raw response (2025-era sessions, the MCP SDK's transport, event streams) alike — over a
 * `Connection: keep-alive` the writer names itself (the SDK's event streams do).
 */
function closingResponse(closing: () => boolean): typeof http.ServerResponse {
  class ClosingResponse extends http.ServerResponse {
    override writeHead(statusCode: number, ...rest: unknown[]): this {
      if (closing() && !this.headersSent) {
        this.setHeader('connection', 'close');
        const last = rest.length - 1;
        const headers = rest[last];
        // Headers given here are set over those set before: theirs is replaced.
        if (headers && typeof headers === 'object' && !Array.isArray(headers)) {
          rest[last] = Object.fromEntries(
            Object.entries(headers).map(([name, value]) => [
              name,
              name.toLowerCase() === 'connection' ? 'close' : value,
            ]),
          );
        }
      }
      return (super.writeHead as (statusCode: number, ...rest: unknown[]) => this)(statusCode, ...rest);
    }
  }
  return ClosingResponse as typeof http.ServerResponse;
}

/** Whether a request announces a body (a length above zero, or chunked). */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Every route the app serves, as registered: the admin surface walks this table. */
export interface RouteTableEntry {
  method: string | string[];
  url: string;
  declaration: RouteDeclaration | undefined;
  mcpEndpoint: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    routeTable: RouteTableEntry[];
  }
}

/** SQLSTATEs of text PostgreSQL cannot store (`invalid byte sequence for encoding "UTF8": 0x00`, …). */
const PG_CHARACTER_NOT_IN_REPERTOIRE = '22021';
const PG_UNTRANSLATABLE_CHARACTER = '22P05';

/** Maps Fastify's own failures (body parsing, limits) and the store's refusals of text onto the catalogue. */
function toGatehouseError(error: FastifyError): GatehouseError {
  if (isGatehouseError(error)) return error;
  // PostgreSQL refuses a NUL (or a character it cannot encode) in any text value: the request's fault, typed.
  if (error.code === PG_CHARACTER_NOT_IN_REPERTOIRE || error.code === PG_UNTRANSLATABLE_CHARACTER) {
    const message = 'A text value of the request holds a character the store cannot keep (such as NUL).';
    return new GatehouseError('validation_error', message, { issues: [{ path: 'request', message }] });
  }
  const status = error.statusCode ?? 500;
  if (status === 413) return new GatehouseError('payload_too_large');
  if (status === 415) return new GatehouseError('unsupported_media_type');
  if (status === 429) return new GatehouseError('rate_limited');
  if (status >= 400 && status < 500) {
    // Fastify's own messages here describe the body's shape, never its content.
    return new GatehouseError('validation_error', error.message, {
      issues: [{ path: 'body', message: error.message }],
    });
  }
  return new GatehouseError('internal_error');
}

/** Why the router refused a URL (`frameworkErrors`), in words that do not repeat it. */
function frameworkErrorMessage(code: string): string {
  if (code === 'FST_ERR_BAD_URL') return 'The URL path is not valid percent-encoding.';
  if (code === 'FST_ERR_MAX_PARAM_LENGTH') return 'A path parameter of the URL is longer than any id.';
  return 'The URL could not be routed.';
}

function isMcpEndpoint(request: FastifyRequest): boolean {
  return (request.routeOptions.config as { mcpEndpoint?: boolean } | undefined)?.mcpEndpoint === true;
}

/**
 * A body nobody may send is refused before it is read: a request without a principal that carries one,
 * to a route that needs a token (or to an MCP endpoint with a token that failed — only a request without
 * any Authorization can be the local client of `GATEHOUSE_HUB_AUTH=none`).
 */
function refuseEarly(request: FastifyRequest): GatehouseError | undefined {
  if (request.principal !== undefined || !hasBody(request)) return undefined;
  const config = request.routeOptions.config as { gatehouse?: RouteDeclaration; mcpEndpoint?: boolean } | undefined;
  if (config?.mcpEndpoint)
    return request.headers.authorization === undefined ? undefined : new GatehouseError('unauthorized');
  const access = config?.gatehouse?.access;
  return access === undefined || access === 'public' ? undefined : new GatehouseError('unauthorized');
}

export async function buildApp(parts: AppParts): Promise<FastifyInstance> {
  const requestTimeoutMs = parts.config.requestTimeoutMs ?? 30_000;
  const headersTimeoutMs = Math.min(parts.config.headersTimeoutMs ?? 10_000, requestTimeoutMs);
  const trustedProxies = parts.config.trustProxy ?? [];
  const app = Fastify({
    // Only the named balancers' X-Forwarded-For counts (never `true` or a hop count: any client could then name
    // its own address); `request.ip` is then the right-most address in it that is not one of them. It also makes
    // `request.host`/`hostname`/`protocol` follow their X-Forwarded-Host/-Proto: Gatehouse reads none of those
    // (the DNS-rebinding check reads the Host header itself; URLs derive from GATEHOUSE_PUBLIC_URL).
    // An empty list is `false` (no proxy): an empty array would still swap in Fastify's proxy-aware getters.
    trustProxy: trustedProxies.length > 0 ? [...trustedProxies] : false,
    loggerInstance: parts.logger as FastifyBaseLogger,
    // Each request's child logger is made only when it writes a line (logging.ts).
    childLoggerFactory: (logger, bindings, options) =>
      requestLogger(logger as Logger, bindings, options) as FastifyBaseLogger,
    bodyLimit: parts.config.maxBodySize,
    // A client trickling its headers or body holds a socket and a parser: both are bounded. Node checks
    // them every `connectionsCheckingInterval` (30 s by default: far too coarse for these bounds).
    requestTimeout: requestTimeoutMs,
    http: {
      ...(parts.closingConnections && { ServerResponse: closingResponse(parts.closingConnections) }),
      headersTimeout: headersTimeoutMs,
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(headersTimeoutMs / 2))),
    },
    clientErrorHandler(error: NodeJS.ErrnoException, socket: Duplex) {
      if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
        parts.onRequestTimeout?.();
        parts.logger.info({ code: 'request_timeout' }, 'request refused');
        if (socket.writable) {
          const body = JSON.stringify(new GatehouseError('request_timeout').toBody());
          socket.write(
            `HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          );
        }
        socket.destroy();
        return;
      }
      if (error.code !== 'ECONNRESET' && !socket.destroyed && socket.writable) {
        socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      }
      socket.destroy();
    },
    // A URL the router cannot take apart (bad percent-encoding, a path parameter over `maxParamLength`) is
    // refused from the catalogue like any other bad request; no hook has run, and the URL is not echoed.
    frameworkErrors(error, request, reply) {
      reply.raw.setHeader('x-request-id', request.id);
      const refused = new GatehouseError('validation_error', frameworkErrorMessage(error.code), {
        issues: [{ path: 'url', message: frameworkErrorMessage(error.code) }],
      });
      request.log.info({ code: refused.code, reason: error.code }, 'request refused');
      return (reply as FastifyReply).code(refused.status).send(refused.toBody());
    },
    genReqId: () => randomUUID(),
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  });

  // JSON only: a text/plain body would otherwise reach the routes as a string.
  app.removeContentTypeParser('text/plain');
  // Fastify's JSON parser refuses prototype-poisoning keys as "not valid JSON"; this one says which it is.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);

  const routeTable: RouteTableEntry[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (route) => {
    routeTable.push({
      method: route.method,
      url: route.url,
      declaration: route.config?.gatehouse,
      mcpEndpoint: route.config?.mcpEndpoint === true,
    });
  });

  // A connection a client opened and never used (undici opens one ahead of need) counts as busy to Node's
  // `server.close()`, which then waits until the client drops it (seconds) or the headers timeout ends it. It
  // carries nothing: it goes at once. Connections that have sent a byte are left to finish their request.
  const connections = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  app.addHook('preClose', (done) => {
    for (const socket of connections) if (socket.bytesRead === 0) socket.destroy();
    done();
  });

  if (parts.cors) app.addHook('onRequest', parts.cors);

  // Callback style: a token found in the warm cache is settled without a promise (every request passes here).
  app.addHook('onRequest', (request, reply, done) => {
    // On the raw response: answers written there (2025-era sessions, the SDK's transport, streams) carry it too.
    reply.raw.setHeader('x-request-id', request.id);
    // No answer is content-sniffed; REST and sign-in answers (tokens, audit, sessions) are never cached. On the
    // raw response too, so refusals and 404s carry them; a route's own Cache-Control wins.
    reply.raw.setHeader('x-content-type-options', 'nosniff');
    if (request.url.startsWith('/api/') || request.url.startsWith('/auth/')) {
      reply.raw.setHeader('cache-control', 'no-store');
    }
    const nonce = request.headers[GRANT_HEADER];
    const grant = typeof nonce === 'string' ? parts.grants?.redeem(nonce) : undefined;
    if (grant) {
      request.principal = grant.principal;
      request.surfaceGrant = grant;
      return done();
    }
    const principal = parts.authenticate(request);
    const settle = () => {
      const refusal = refuseEarly(request);
      // The body is never read: the connection closes after the answer instead of draining it.
      if (refusal) reply.header('connection', 'close');
      done(refusal);
    };
    if (!(principal instanceof Promise)) {
      request.principal = principal;
      return settle();
    }
    principal.then((found) => {
      request.principal = found;
      settle();
    }, done);
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const mapped = toGatehouseError(error);
    if (mapped.code === 'internal_error') request.log.error({ err: error }, 'unhandled error');
    else request.log.info({ code: mapped.code }, 'request refused');
    // An MCP endpoint's client reads JSON-RPC: a body refused before the endpoint saw it is answered so too.
    const mcpRefusal = isMcpEndpoint(request) ? mcpBodyRefusal(mapped) : undefined;
    if (mcpRefusal) return reply.code(mapped.status).send(mcpRefusal);
    if (mapped.code === 'unauthorized') reply.header('www-authenticate', parts.challenge?.(request) ?? 'Bearer');
    const retryAfterS = (mapped.details as { retryAfterS?: unknown } | undefined)?.retryAfterS;
    if (mapped.status === 429 && typeof retryAfterS === 'number') reply.header('retry-after', String(retryAfterS));
    return reply.code(mapped.status).send(mapped.toBody());
  });

  app.setNotFoundHandler((request, reply) => {
    const error = noRouteError(request.method, request.url.split('?')[0] ?? '');
    return reply.code(error.status).send(error.toBody());
  });

  registerRoutes(app, parts.routes);
  return app;
}
