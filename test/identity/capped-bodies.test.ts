/**
 * The OIDC client (discovery, JWKS, token exchange) and the language-model client cap an answer's body
 * while reading it: a body over the cap is refused with each client's own error as soon as the cap is
 * passed, and the rest is never read (the connection is dropped, so the server stops writing) — rather
 * than buffered whole (up to the egress guard's 16 MiB) and measured afterwards.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import { OidcClient } from '../../src/identity/oidc.js';
import { LlmClient } from '../../src/memory/llm.js';
import { sealKeyFrom } from '../../src/secrets/seal.js';

const CHUNK = 64 * 1024;
/** Far more than any cap here: a client that reads it all has read 4 MiB. */
const TOTAL_CHUNKS = 64;
const CHUNK_EVERY_MS = 10;

interface SlowServer {
  url: string;
  /** Bytes written before the client hung up (or all of them). */
  written: number;
  /** Whether the whole body went out. */
  finished: boolean;
  /** Whether the client hung up before the end. */
  dropped: Promise<void>;
  close(): Promise<void>;
}

/** Answers every request 200 JSON, streamed in 64 KiB chunks every 10 ms (a 4 MiB body in all). */
async function startSlowServer(): Promise<SlowServer> {
  let hungUp: () => void = () => {};
  const state: SlowServer = {
    url: '',
    written: 0,
    finished: false,
    dropped: new Promise<void>((resolve) => {
      hungUp = resolve;
    }),
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    // A JSON string that never closes before the end: only the whole body would parse.
    res.write('{"padding":"');
    state.written += 12;
    let sent = 0;
    const timer = setInterval(() => {
      if (res.destroyed) return;
      if (sent === TOTAL_CHUNKS) {
        clearInterval(timer);
        res.end('"}');
        state.finished = true;
        return;
      }
      res.write('x'.repeat(CHUNK));
      state.written += CHUNK;
      sent += 1;
    }, CHUNK_EVERY_MS);
    res.on('close', () => {
      clearInterval(timer);
      if (!state.finished) hungUp();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

async function failureOf(promise: Promise<unknown>): Promise<GatehouseError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(GatehouseError);
  return error as GatehouseError;
}

describe('answers over a client’s size cap', () => {
  let server: SlowServer;
  beforeEach(async () => {
    server = await startSlowServer();
  });
  afterEach(async () => {
    await server.close();
  });

  it('OIDC discovery: refused at 256 KiB, the rest never read', async () => {
    const oidc = new OidcClient(
      { issuer: server.url, clientId: 'gatehouse', roleMap: {}, groupsClaim: 'groups' },
      (input, init) => fetch(input, init),
    );
    const error = await failureOf(oidc.discover());
    expect(error.code).toBe('oidc.provider_unreachable');
    expect(error.details).toMatchObject({ reason: 'response' });
    // Refused while the server was still sending: the client hung up, far short of the whole body.
    expect(server.finished).toBe(false);
    await server.dropped;
    expect(server.written).toBeLessThan((TOTAL_CHUNKS * CHUNK) / 2);
  });

  it('the language-model client: refused at its cap with memory.llm_failed, the rest never read', async () => {
    const llm = new LlmClient({
      url: server.url,
      model: 'chat',
      sealKey: sealKeyFrom(Buffer.alloc(32, 7)),
      timeoutMs: 10_000,
      fetch: (input, init) => fetch(input, init),
      maxResponseBytes: 256 * 1024,
    });
    const error = await failureOf(llm.chat([{ role: 'user', content: 'hello' }]));
    expect(error.code).toBe('memory.llm_failed');
    expect(error.details).toMatchObject({ reason: 'response' });
    expect(server.finished).toBe(false);
    await server.dropped;
    expect(server.written).toBeLessThan((TOTAL_CHUNKS * CHUNK) / 2);
  });

  it('the embeddings request too (search.embeddings_failed)', async () => {
    const llm = new LlmClient({
      url: server.url,
      model: 'chat',
      sealKey: sealKeyFrom(Buffer.alloc(32, 7)),
      timeoutMs: 10_000,
      fetch: (input, init) => fetch(input, init),
      maxEmbeddingBytes: 256 * 1024,
    });
    const error = await failureOf(llm.embed(['x']));
    expect(error.code).toBe('search.embeddings_failed');
    expect(error.details).toMatchObject({ reason: 'response' });
    expect(server.finished).toBe(false);
  });
});
