/**
 * `gatehouse stdio --url <hub>`: a stdio MCP server that is nothing but a relay to the hub's Streamable HTTP
 * endpoint, for clients that only launch stdio servers (Claude Desktop).
 *
 * Every JSON-RPC message read from stdin is sent to the hub as it is, and every message the hub sends (responses,
 * notifications, progress, server-to-client requests) is written to stdout as it is: no tool is re-implemented, so
 * whatever the hub lists and answers is what the client sees. The client's era decides the hub's: a 2025-era client
 * (`initialize`, what Claude Desktop speaks) gets a 2025 session on the hub, whose `MCP-Protocol-Version` the bridge
 * learns from the `initialize` answer; a 2026-07-28 client's requests carry their version and go through statelessly.
 *
 * What the relay adds, because the two transports differ:
 * - a request the hub could not be asked (unreachable, 401, 404…) or whose response stream ended without an answer
 *   is answered on stdout with a JSON-RPC error, so the client never waits forever;
 * - a 2025 session the hub forgot (idle expiry, restart) is re-opened with the client's own `initialize` and the
 *   failed message sent again, once, so a long-lived client keeps working;
 * - `notifications/cancelled` for a 2026-era request aborts its HTTP stream (how that era cancels) instead of being
 *   posted.
 *
 * stdout carries protocol only; diagnostics go to stderr. The token comes from `GATEHOUSE_TOKEN` (never a flag: flags
 * show in `ps`). When stdin closes, the hub session is ended (DELETE) and the bridge exits.
 */
import type { Readable, Writable } from 'node:stream';
import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type JSONRPCRequest,
  PROTOCOL_VERSION_META_KEY,
  SdkHttpError,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import type { Command } from 'commander';
import { isLoopbackHost } from '../config.js';
import { GatehouseError } from '../errors.js';

type RequestId = JSONRPCRequest['id'];

/** JSON-RPC error codes the bridge answers with (the implementation-defined server-error range). */
export const BRIDGE_ERRORS = {
  /** The hub could not be reached at all. */
  unreachable: -32000,
  /** The hub answered the HTTP request with an error status (401, 403, 404, 5xx…). */
  refused: -32001,
  /** The hub's response stream ended without an answer to the request. */
  noAnswer: -32002,
} as const;

export interface BridgeOptions {
  /** The hub endpoint, e.g. `http://127.0.0.1:8080/mcp`. */
  url: URL;
  /** Agent bearer token; without one the hub must run with `GATEHOUSE_HUB_AUTH=none`. */
  token?: string | undefined;
  stdin?: Readable;
  stdout?: Writable;
  /** One diagnostic line (stderr by default). */
  log?: (line: string) => void;
  /** How long the closing DELETE of a 2025 session may take. */
  closeTimeoutMs?: number;
}

export interface Bridge {
  /** Resolves once stdin has closed (or `close()` was called) and the hub session is released. */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

interface Pending {
  controller: AbortController;
  /** Sent with a 2026-era protocol-version claim: cancelled by aborting its stream. */
  modern: boolean;
  cancelled: boolean;
}

const REINIT_PREFIX = 'gatehouse-bridge-reinit-';

/**
 * How long a response waits after a progress notification for the same request. The SDK's clients dispatch
 * notifications a tick later than responses, and a response drops the request's progress handler: when both arrive
 * in one read from the pipe, the progress is lost. A pause lets the client read them apart.
 */
const PROGRESS_SETTLE_MS = 15;

/** The hub URL from `--url` or `GATEHOUSE_URL`: a bare gateway origin gets `/mcp`. */
export function hubUrlFrom(value: string | undefined): URL {
  if (!value) {
    throw new GatehouseError(
      'validation_error',
      'No hub URL: pass --url http://127.0.0.1:8080/mcp (or set GATEHOUSE_URL).',
    );
  }
  if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol)) {
    throw new GatehouseError('validation_error', `--url must be an http(s) URL of the hub, not "${value}".`);
  }
  const url = new URL(value);
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/mcp';
  return url;
}

function hubMessage(text: string | undefined): string | undefined {
  if (!text) return undefined;
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown; code?: unknown } };
    const { error } = body;
    if (typeof error?.message === 'string') {
      return typeof error.code === 'string' ? `${error.code}: ${error.message}` : error.message;
    }
  } catch {
    // not JSON: fall through
  }
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/**
 * The JSON-RPC error response an HTTP error carries as its body (a 2026-07-28 hub pairs some protocol errors
 * with a status, e.g. `-32601` with 404): that answer is relayed as itself, not as a refusal of the hub.
 */
function rpcErrorIn(error: unknown, id: RequestId): { code: number; message: string; data?: unknown } | undefined {
  if (!(error instanceof SdkHttpError)) return undefined;
  const text = (error.data as { text?: unknown } | undefined)?.text;
  if (typeof text !== 'string') return undefined;
  try {
    const body = JSON.parse(text) as { jsonrpc?: unknown; id?: unknown; error?: Record<string, unknown> } | null;
    const rpc = body?.error;
    if (body?.jsonrpc !== '2.0' || (body.id !== id && body.id !== null) || !rpc) return undefined;
    if (!Number.isSafeInteger(rpc.code) || typeof rpc.message !== 'string') return undefined;
    return { code: rpc.code as number, message: rpc.message, ...(rpc.data !== undefined ? { data: rpc.data } : {}) };
  } catch {
    return undefined;
  }
}

/** What to tell the client (and stderr) about a failed send. */
function describeFailure(error: unknown, url: URL): { code: number; message: string; status?: number } {
  if (error instanceof SdkHttpError) {
    const status = error.status;
    const said = hubMessage((error.data as { text?: string } | undefined)?.text);
    const hint =
      status === 401
        ? ' Set GATEHOUSE_TOKEN to a live agent token (gatehouse token create --role agent --name …).'
        : status === 403
          ? ' The hub serves agent tokens only.'
          : status === 404
            ? ' The hub may be switched off (setting mcp.hubEnabled), or the URL is not the hub.'
            : '';
    return {
      code: BRIDGE_ERRORS.refused,
      message: `Gatehouse hub answered HTTP ${status}${said ? ` (${said})` : ''}.${hint}`,
      status,
    };
  }
  const cause = (error as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  const reason = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  return { code: BRIDGE_ERRORS.unreachable, message: `Cannot reach the Gatehouse hub at ${url.origin} (${reason}).` };
}

function isModernRequest(message: JSONRPCRequest): boolean {
  const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  return typeof meta?.[PROTOCOL_VERSION_META_KEY] === 'string';
}

/** Starts relaying at once; see the module comment. */
export function startStdioBridge(options: BridgeOptions): Bridge {
  const log = options.log ?? ((line: string) => void process.stderr.write(`gatehouse stdio: ${line}\n`));
  const headers: Record<string, string> = options.token ? { authorization: `Bearer ${options.token}` } : {};
  const up = new StreamableHTTPClientTransport(options.url, { requestInit: { headers } });
  const down = new StdioServerTransport(options.stdin, options.stdout);

  const pending = new Map<RequestId, Pending>();
  /** The client's `initialize`, kept to re-open a session the hub forgot. */
  let initialize: JSONRPCRequest | undefined;
  let initializeId: RequestId | undefined;
  let reinitCount = 0;
  const internal = new Map<RequestId, (message: JSONRPCMessage) => void>();
  let reopening: Promise<boolean> | undefined;
  let closing = false;
  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });

  let lastLogged = '';
  const note = (line: string) => {
    if (line === lastLogged) return; // a reconnecting stream repeats itself
    lastLogged = line;
    log(line);
  };

  /** Messages for stdout, in order; a message may wait until `notBefore`. */
  let outbox: Promise<void> = Promise.resolve();
  const toClient = (message: JSONRPCMessage, notBefore = 0) => {
    outbox = outbox.then(async () => {
      const wait = notBefore - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (closing) return;
      await down.send(message).catch((error: unknown) => note(`cannot write to stdout: ${(error as Error).message}`));
    });
  };
  /** Progress tokens of the client's requests, and when progress for a request was last relayed. */
  const progressOf = new Map<string | number, RequestId>();
  const progressAt = new Map<RequestId, number>();

  const forget = (id: RequestId) => {
    progressAt.delete(id);
    for (const [token, request] of progressOf) if (request === id) progressOf.delete(token);
  };

  const answerError = (id: RequestId, code: number, message: string, data?: unknown) => {
    const entry = pending.get(id);
    pending.delete(id);
    forget(id);
    if (entry?.cancelled) return; // the client gave up on it: no answer is expected
    toClient({ jsonrpc: '2.0', id, error: { code, message, ...(data !== undefined ? { data } : {}) } });
  };

  up.onmessage = (message) => {
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
      const waiter = internal.get(message.id);
      if (waiter) {
        internal.delete(message.id);
        waiter(message);
        return;
      }
      if (message.id === initializeId && isJSONRPCResultResponse(message)) {
        const version = (message.result as { protocolVersion?: unknown }).protocolVersion;
        if (typeof version === 'string') up.setProtocolVersion(version);
        initializeId = undefined;
      }
      const entry = pending.get(message.id);
      pending.delete(message.id);
      const lastProgress = progressAt.get(message.id);
      forget(message.id);
      if (entry?.cancelled) return;
      toClient(message, lastProgress === undefined ? 0 : lastProgress + PROGRESS_SETTLE_MS);
      return;
    }
    if (isJSONRPCNotification(message) && message.method === 'notifications/progress') {
      const token = (message.params as { progressToken?: string | number } | undefined)?.progressToken;
      const request = token === undefined ? undefined : progressOf.get(token);
      if (request !== undefined) progressAt.set(request, Date.now());
    }
    toClient(message);
  };
  up.onerror = (error) => {
    if (!closing) note(`hub: ${error.message}`);
  };

  /** Re-opens a 2025 session with the client's own `initialize`; true when the hub accepted it. */
  const reopen = (): Promise<boolean> => {
    if (reopening) return reopening;
    const original = initialize;
    if (!original) return Promise.resolve(false);
    reopening = (async () => {
      note('the hub no longer knows this session (expired or restarted): opening a new one');
      const id = `${REINIT_PREFIX}${++reinitCount}`;
      const answered = new Promise<JSONRPCMessage>((resolve) => internal.set(id, resolve));
      try {
        await up.send({ ...original, id });
        const answer = await answered;
        if (!isJSONRPCResultResponse(answer)) return false;
        const version = (answer.result as { protocolVersion?: unknown }).protocolVersion;
        if (typeof version === 'string') up.setProtocolVersion(version);
        await up.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        return true;
      } catch (error) {
        internal.delete(id);
        note(`could not open a new session: ${describeFailure(error, options.url).message}`);
        return false;
      }
    })().finally(() => {
      reopening = undefined;
    });
    return reopening;
  };

  const sessionLost = (error: unknown, message: JSONRPCMessage): boolean =>
    error instanceof SdkHttpError &&
    error.status === 404 &&
    initialize !== undefined &&
    !(isJSONRPCRequest(message) && message.method === 'initialize');

  /** After a lost session: true when the message should be sent again (the session is new, or was renewed meanwhile). */
  const renewed = async (sentWith: string | undefined): Promise<boolean> =>
    (up.sessionId !== undefined && up.sessionId !== sentWith) || (await reopen());

  const sendRequest = async (message: JSONRPCRequest, retried = false): Promise<void> => {
    const entry = pending.get(message.id);
    if (!entry) return;
    const session = up.sessionId;
    try {
      await up.send(message, {
        requestSignal: entry.controller.signal,
        onRequestStreamEnd: () => {
          if (pending.get(message.id) === entry && !entry.controller.signal.aborted) {
            answerError(message.id, BRIDGE_ERRORS.noAnswer, 'The Gatehouse hub ended the response without an answer.');
          }
        },
      });
    } catch (error) {
      if (entry.controller.signal.aborted || pending.get(message.id) !== entry) return;
      if (!retried && sessionLost(error, message) && (await renewed(session))) return sendRequest(message, true);
      const answered = rpcErrorIn(error, message.id);
      if (answered) return answerError(message.id, answered.code, answered.message, answered.data);
      const failure = describeFailure(error, options.url);
      note(`${message.method}: ${failure.message}`);
      answerError(message.id, failure.code, failure.message);
    }
  };

  const sendOther = async (message: JSONRPCMessage, retried = false): Promise<void> => {
    const session = up.sessionId;
    try {
      await up.send(message);
    } catch (error) {
      if (!retried && sessionLost(error, message) && (await renewed(session))) return sendOther(message, true);
      const what = isJSONRPCNotification(message) ? message.method : 'a response';
      note(`could not relay ${what}: ${describeFailure(error, options.url).message}`);
    }
  };

  down.onmessage = (message) => {
    if (closing) return;
    if (isJSONRPCRequest(message)) {
      if (message.method === 'initialize') {
        initialize = message;
        initializeId = message.id;
      }
      pending.set(message.id, {
        controller: new AbortController(),
        modern: isModernRequest(message),
        cancelled: false,
      });
      void sendRequest(message);
      return;
    }
    if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') {
      const id = (message.params as { requestId?: RequestId } | undefined)?.requestId;
      const entry = id === undefined ? undefined : pending.get(id);
      if (entry) {
        entry.cancelled = true;
        if (entry.modern) {
          // 2026-07-28: closing the request's stream is the cancellation.
          pending.delete(id as RequestId);
          forget(id as RequestId);
          entry.controller.abort();
          return;
        }
      }
    }
    void sendOther(message);
  };
  down.onerror = (error) => note(`stdio: ${error.message}`);

  const close = async (): Promise<void> => {
    if (closing) return closed;
    closing = true;
    for (const entry of pending.values()) entry.controller.abort();
    pending.clear();
    if (up.sessionId) {
      // Free the hub's session now rather than at its idle expiry; never wait long for it.
      const timeout = options.closeTimeoutMs ?? 2_000;
      await Promise.race([
        up.terminateSession().catch(() => {}),
        new Promise((resolve) => setTimeout(resolve, timeout).unref()),
      ]);
    }
    await up.close().catch(() => {});
    await outbox;
    await down.close().catch(() => {});
    resolveClosed();
    return closed;
  };
  down.onclose = () => void close();

  void up.start();
  void down.start();
  return { closed, close };
}

export function addStdioBridgeCommand(program: Command): void {
  program
    .command('stdio')
    .description(
      'Serve the hub to a stdio-only MCP client (Claude Desktop): relay stdin/stdout to the hub over Streamable ' +
        'HTTP. The agent token comes from GATEHOUSE_TOKEN.',
    )
    .option('--url <url>', 'the hub, e.g. http://127.0.0.1:8080/mcp (a bare gateway URL gets /mcp; env GATEHOUSE_URL)')
    .action(async (flags: { url?: string }) => {
      const url = hubUrlFrom(flags.url ?? process.env.GATEHOUSE_URL);
      const token = process.env.GATEHOUSE_TOKEN || undefined;
      const say = (line: string) => void process.stderr.write(`gatehouse stdio: ${line}\n`);
      if (!token)
        say('GATEHOUSE_TOKEN is not set: calling the hub without a token (only a hub with hub auth off accepts that).');
      else if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
        say(`warning: sending the agent token over plain http to ${url.hostname}`);
      }
      say(`relaying stdio to ${url.href}`);
      const bridge = startStdioBridge({ url, token });
      const stop = () => void bridge.close();
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      await bridge.closed;
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      // Nothing should keep the process alive now; if a socket does, do not hang the client that launched us.
      setTimeout(() => process.exit(process.exitCode ?? 0), 1_000).unref();
    });
}
