/**
 * Assembles a Fastify app from its parts, without listening: the CLI listens,
 * tests use `inject()` or port 0. Every error leaves as the catalogue's
 * envelope `{"error": {"code", "message", ...}}`.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import { GRANT_HEADER, type SurfaceGrants } from './api/grants.js';
import { type RouteDeclaration, registerRoutes } from './api/route.js';
import type { Config } from './config.js';
import { GatehouseError, isGatehouseError } from './errors.js';
import type { Authenticator } from './identity/index.js';
import type { Logger } from './logging.js';

export interface AppParts {
  config: Pick<Config, 'maxBodySize'>;
  logger: Logger;
  authenticate: Authenticator;
  routes: readonly RouteDeclaration[];
  /** Surface grants the auth hook redeems (the admin surface's in-process calls). */
  grants?: SurfaceGrants;
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

/** Maps Fastify's own failures (body parsing, limits) onto the catalogue. */
function toGatehouseError(error: FastifyError): GatehouseError {
  if (isGatehouseError(error)) return error;
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

export async function buildApp(parts: AppParts): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: parts.logger as FastifyBaseLogger,
    bodyLimit: parts.config.maxBodySize,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    genReqId: () => randomUUID(),
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  });

  // JSON only: a text/plain body would otherwise reach the routes as a string.
  app.removeContentTypeParser('text/plain');

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

  // Callback style: a token found in the warm cache is settled without a promise (every request passes here).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    const nonce = request.headers[GRANT_HEADER];
    const grant = typeof nonce === 'string' ? parts.grants?.redeem(nonce) : undefined;
    if (grant) {
      request.principal = grant.principal;
      request.surfaceGrant = grant;
      return done();
    }
    const principal = parts.authenticate(request);
    if (!(principal instanceof Promise)) {
      request.principal = principal;
      return done();
    }
    principal.then((found) => {
      request.principal = found;
      done();
    }, done);
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const mapped = toGatehouseError(error);
    if (mapped.code === 'internal_error') request.log.error({ err: error }, 'unhandled error');
    else request.log.info({ code: mapped.code }, 'request refused');
    if (mapped.code === 'unauthorized') reply.header('www-authenticate', 'Bearer');
    return reply.code(mapped.status).send(mapped.toBody());
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new GatehouseError('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);
    return reply.code(error.status).send(error.toBody());
  });

  registerRoutes(app, parts.routes);
  return app;
}
