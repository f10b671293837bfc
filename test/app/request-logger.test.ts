/**
 * Fastify's per-request logger (`requestLogger` in src/logging.ts) makes the pino child only when a line is
 * written: every line still carries its request id and goes through the redaction, at every level.
 */
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { createLogger, type Logger, requestLogger } from '../../src/logging.js';

type Line = Record<string, unknown>;

function appAt(level: 'info' | 'warn') {
  const lines: Line[] = [];
  const logger = createLogger({ logLevel: level }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    genReqId: () => 'req-1',
    childLoggerFactory: (parent, bindings, options) =>
      requestLogger(parent as Logger, bindings, options) as FastifyBaseLogger,
  });
  app.get('/lines', async (request) => {
    request.log.info('an info line');
    request.log.warn({ authorization: 'Bearer secret-token' }, 'a warning');
    request.log.child({ part: 'inner' }).warn('from a child');
    return { level: request.log.level };
  });
  app.get('/quiet', { logLevel: 'error' }, async (request) => {
    request.log.warn('below the route level');
    request.log.error('at the route level');
    return {};
  });
  return { app, lines };
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

it('writes only the enabled lines, each with its request id and redacted', async () => {
  const { app, lines } = appAt('warn');
  close = () => app.close();
  const answer = await app.inject({ method: 'GET', url: '/lines' });
  expect(answer.json()).toEqual({ level: 'warn' });
  expect(lines.map((line) => line.msg)).toEqual(['a warning', 'from a child']);
  expect(lines[0]).toMatchObject({ reqId: 'req-1', authorization: '[redacted]', level: 40 });
  expect(JSON.stringify(lines)).not.toContain('secret-token');
  expect(lines[1]).toMatchObject({ reqId: 'req-1', part: 'inner' });
});

it("keeps Fastify's own request lines at info, with the request id", async () => {
  const { app, lines } = appAt('info');
  close = () => app.close();
  await app.inject({ method: 'GET', url: '/lines' });
  const messages = lines.map((line) => line.msg);
  expect(messages).toEqual(['incoming request', 'an info line', 'a warning', 'from a child', 'request completed']);
  for (const line of lines) expect(line.reqId).toBe('req-1');
});

it("honours a route's own log level", async () => {
  const { app, lines } = appAt('info');
  close = () => app.close();
  await app.inject({ method: 'GET', url: '/quiet' });
  expect(lines.map((line) => line.msg)).toEqual(['at the route level']);
  expect(lines[0]?.reqId).toBe('req-1');
});
