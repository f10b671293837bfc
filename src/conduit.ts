/**
 * `gatehouse conduit`: the stateless operations plane alone — no database, no
 * secrets at rest. A drop-in for hadrontool-mcp: same routes, same environment.
 */
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { opsRoutes } from './api/ops.js';
import { systemRoutes } from './api/system.js';
import { buildApp } from './app.js';
import { type Config, isLoopbackHost } from './config.js';
import { createEgressFromConfig } from './egress/from-config.js';
import type { EgressGuard, Resolver } from './egress/index.js';
import { GatehouseError } from './errors.js';
import { conduitAuthenticator } from './identity/index.js';
import { createLogger, type Logger } from './logging.js';
import { checkTransport, type TransportRule } from './surfaces/endpoint.js';
import { UpstreamPool } from './upstream/index.js';

export interface ConduitDeps {
  logger?: Logger;
  /** Test seam: the egress guard's DNS resolver. */
  resolver?: Resolver;
}

export interface Conduit {
  app: FastifyInstance;
  guard: EgressGuard;
  pool: UpstreamPool;
}

/** Refuses configurations that would expose the operations plane to anyone who can reach the port. */
export function assertConduitExposure(config: Config): void {
  if (config.toolToken !== undefined) return;
  if (config.nodeEnv === 'production') {
    throw new GatehouseError(
      'validation_error',
      'MCP_TOOL_TOKEN (or GATEHOUSE_TOOL_TOKEN) is required when NODE_ENV=production.',
    );
  }
  if (!isLoopbackHost(config.host)) {
    throw new GatehouseError(
      'validation_error',
      `Refusing to bind ${config.host} without a token: anyone on the network could use the conduit. ` +
        'Set MCP_TOOL_TOKEN, or bind 127.0.0.1.',
    );
  }
}

/**
 * The DNS-rebinding defence of the operations plane, wherever it is mounted (`gatehouse conduit`, and
 * `gatehouse serve` with GATEHOUSE_OPS_ENABLED): the MCP endpoints' own rule on every `/ops/*` request,
 * token or not — a foreign `Origin` is 403; on a loopback bind, a `Host` neither loopback nor in
 * GATEHOUSE_ALLOWED_HOSTS is 403. Without it a page whose name was rebound to 127.0.0.1 drives the conduit
 * and reads its answers. Runs before the body is read.
 */
export function opsTransportCheck(rule: TransportRule): onRequestHookHandler {
  return (request, _reply, done) => {
    if (request.routeOptions.config?.gatehouse?.scope !== 'ops') return done();
    try {
      checkTransport(request, rule, 'the operations plane');
      done();
    } catch (error) {
      done(error as Error);
    }
  };
}

export async function createConduit(config: Config, deps: ConduitDeps = {}): Promise<Conduit> {
  assertConduitExposure(config);
  const logger = deps.logger ?? createLogger(config);
  const guard = createEgressFromConfig(config, deps.resolver);
  const pool = new UpstreamPool({
    fetch: guard.fetch,
    sessionMode: config.sessionMode,
    poolMaxSize: config.poolMaxSize,
    poolIdleMs: config.poolIdleMs,
    listTimeoutMs: config.listTimeoutMs,
    callTimeoutMs: config.callTimeoutMs,
    // Plain calls go out without the SDK client, as the hub's do (same answers).
    ...(config.hubFastPath ? { exchange: guard.exchange } : {}),
    logger,
  });
  const app = await buildApp({
    config,
    logger,
    authenticate: conduitAuthenticator(config.toolToken),
    routes: [
      ...systemRoutes({
        operations: ['list-tools', 'call-tool'],
        transports: ['streamable-http'],
        capabilities: () => ['ops'],
        infoRoles: ['ops'],
      }),
      ...opsRoutes(pool),
    ],
  });
  app.addHook('onRequest', opsTransportCheck(config));
  app.addHook('onClose', async () => {
    await pool.close();
    await guard.close();
  });
  return { app, guard, pool };
}
