/**
 * An upstream's error body may echo the credentials Gatehouse sent it; the SDK puts the whole body in its
 * error's message (`Error POSTing to endpoint: <body>`), which the mapped GatehouseError keeps as its cause.
 * No log line may carry it: the `err` serializer keeps a cause's type, code and status, never its words.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, SdkHttpError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { createLogger, type Logger, requestLogger } from '../../src/logging.js';
import { toUpstreamError } from '../../src/upstream/map-error.js';

const SECRET = 'sk-live-SEALED-UPSTREAM-SECRET';
const API_KEY = 'SEALED-KEY-123';
/** Echoed under a name no scrubber knows: only keeping the cause's words out of the line keeps it out. */
const ECHOED = 'plain-echo-SEALED-VALUE';

let server: http.Server;
let url: URL;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: 'bad upstream',
          debug: { authorization: req.headers.authorization, 'x-api-key': req.headers['x-api-key'] },
          echo: req.headers['x-echo'],
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Connects with sealed headers to the echoing upstream; the SDK's error, as it threw it. */
async function upstreamFailure(): Promise<unknown> {
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { authorization: `Bearer ${SECRET}`, 'x-api-key': API_KEY, 'x-echo': ECHOED } },
  });
  const client = new Client({ name: 'log-secrets', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (error) {
    return error;
  } finally {
    await client.close().catch(() => {});
  }
  throw new Error('the upstream did not fail');
}

function capture(level: 'info' | 'debug' = 'info') {
  const lines: string[] = [];
  const logger = createLogger({ logLevel: level }, { write: (line: string) => void lines.push(line) });
  return { logger, lines, text: () => lines.join('') };
}

function expectNoSecret(text: string): void {
  expect(text).not.toContain(SECRET);
  expect(text).not.toContain('SEALED-UPSTREAM');
  expect(text).not.toContain(API_KEY);
  expect(text).not.toContain(ECHOED);
}

it('the SDK error carries the echoed credentials (the premise)', async () => {
  const raw = await upstreamFailure();
  expect(raw).toBeInstanceOf(SdkHttpError);
  expect((raw as Error).message).toContain(SECRET);
  expect((raw as Error).message).toContain(ECHOED);
});

it('a mapped upstream error logs its code, details and the cause kind, never the echoed body', async () => {
  const mapped = toUpstreamError(await upstreamFailure());
  expect(mapped).toBeInstanceOf(GatehouseError);
  const { logger, lines, text } = capture();
  logger.warn({ server: 'x', err: mapped }, 'list watch lost its upstream; reconnecting');
  logger.warn({ err: mapped }); // no message of its own: pino would take the error's
  logger.error(mapped as Error);
  logger.child({ server: 'y' }).warn({ err: mapped }, 'from a child');
  expect(lines).toHaveLength(4);
  expectNoSecret(text());
  const line = JSON.parse(lines[0] as string);
  expect(line.err).toMatchObject({
    type: 'GatehouseError',
    code: 'upstream_protocol_error',
    message: 'The upstream answered HTTP 500.',
    details: { reason: 'http_status', status: 500 },
    causes: [{ type: 'SdkHttpError', status: 500 }],
  });
  expect(line.err.stack).toMatch(/^GatehouseError: The upstream answered HTTP 500\.\n\s+at /);
  expect(line.err.stack).not.toContain('caused by');
  for (const other of lines.slice(1)) expect(JSON.parse(other).err.code).toBe('upstream_protocol_error');
  expect(JSON.parse(lines[1] as string).msg).toBe('The upstream answered HTTP 500.');
});

it('a plain error logs a bounded, scrubbed message and no cause words', async () => {
  const raw = (await upstreamFailure()) as Error;
  const { logger, lines, text } = capture();
  logger.warn({ err: raw }, 'upstream failed');
  logger.warn(raw);
  const wrapped = new Error(`wrapped: ${raw.message}`, { cause: raw });
  logger.warn({ err: wrapped }, 'wrapped');
  logger.warn({ err: new AggregateError([raw, new Error(`x ${SECRET}`)], 'all failed') }, 'aggregate');
  expect(text()).not.toContain(SECRET);
  expect(text()).not.toContain(API_KEY);
  const line = JSON.parse(lines[0] as string);
  expect(line.err.type).toBe('SdkHttpError');
  expect(line.err.status).toBe(500);
  expect(line.err.message.length).toBeLessThanOrEqual(260);
  expect(line.err.message).toContain('Error POSTing to endpoint');
  expect(JSON.parse(lines[2] as string).err.causes).toEqual([expect.objectContaining({ type: 'SdkHttpError' })]);
  const aggregate = JSON.parse(lines[3] as string).err;
  expect(aggregate.errors).toHaveLength(2);
  expect(aggregate.errors[1]).toEqual({ type: 'Error' });
});

it("Fastify's request logger serializes errors the same way", async () => {
  const mapped = toUpstreamError(await upstreamFailure());
  const { logger, lines, text } = capture();
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    childLoggerFactory: (parent, bindings, options) =>
      requestLogger(parent as Logger, bindings, options) as FastifyBaseLogger,
  });
  app.get('/fail', async (request) => {
    request.log.error({ err: mapped }, 'unhandled error');
    throw mapped;
  });
  try {
    const answer = await app.inject({ method: 'GET', url: '/fail' });
    expect(answer.statusCode).toBe(502);
  } finally {
    await app.close();
  }
  expectNoSecret(text());
  expect(text()).not.toContain('sk-live');
  const errorLines = lines.map((line) => JSON.parse(line)).filter((line) => line.err);
  expect(errorLines.length).toBeGreaterThan(0);
  for (const line of errorLines) expect(line.err.code).toBe('upstream_protocol_error');
});
