/**
 * A tiny client of a running gateway's REST API for the CLI: bearer token, one deadline per request, no redirects
 * (a token must not follow one), and the gateway's typed errors surfaced as `code: message`.
 */
import { isLoopbackHost } from '../config.js';
import { GatehouseError, isGatehouseError } from '../errors.js';

export const DEFAULT_GATEWAY_URL = 'http://127.0.0.1:8080';
export const DEFAULT_TIMEOUT_MS = 60_000;

/** An error answered by the gateway (or about reaching it). `code` may be one this CLI's catalogue does not know. */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number | undefined,
    readonly issues: ReadonlyArray<{ path: string; message: string }> = [],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface ClientFlags {
  url?: string | undefined;
  token?: string | undefined;
  timeoutMs?: string | undefined;
}

export interface RestClientOptions {
  baseUrl: URL;
  token: string;
  timeoutMs: number;
}

/**
 * Flags win over `GATEHOUSE_URL`/`GATEHOUSE_CLI_TOKEN`; a missing token or a bad URL is a usage error.
 * `GATEHOUSE_TOKEN` is the agent's token in client configs (and the stdio bridge's); the CLI still accepts it
 * for its own, with a warning, when `GATEHOUSE_CLI_TOKEN` is not set.
 */
export function clientOptions(flags: ClientFlags, env: NodeJS.ProcessEnv): RestClientOptions {
  const url = flags.url ?? env.GATEHOUSE_URL ?? DEFAULT_GATEWAY_URL;
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    throw new GatehouseError('validation_error', `--url must be an http(s) URL of the gateway, not "${url}".`);
  }
  const token = flags.token ?? env.GATEHOUSE_CLI_TOKEN ?? legacyToken(env);
  if (!token) throw new GatehouseError('unauthorized', 'No token: set GATEHOUSE_CLI_TOKEN (or pass --token).');
  const timeoutMs = flags.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : Number(flags.timeoutMs);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new GatehouseError('validation_error', '--timeout-ms must be a positive whole number of milliseconds.');
  }
  return { baseUrl: new URL(url), token, timeoutMs };
}

function legacyToken(env: NodeJS.ProcessEnv): string | undefined {
  if (!env.GATEHOUSE_TOKEN) return undefined;
  process.stderr.write(
    'gatehouse: warning: reading the CLI token from GATEHOUSE_TOKEN; set GATEHOUSE_CLI_TOKEN instead ' +
      '(GATEHOUSE_TOKEN is the agent token of client configs).\n',
  );
  return env.GATEHOUSE_TOKEN;
}

export class RestClient {
  constructor(private readonly options: RestClientOptions) {
    const { protocol, hostname } = options.baseUrl;
    if (protocol === 'http:' && !isLoopbackHost(hostname)) {
      process.stderr.write(`gatehouse: warning: sending a bearer token over plain http to ${hostname}\n`);
    }
  }

  async request<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
    const { baseUrl, token, timeoutMs } = this.options;
    const url = new URL(path, baseUrl);
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        // Never followed: the token must go to the gateway named and nowhere else.
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
        headers: {
          authorization: `Bearer ${token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      text = await response.text();
    } catch (error) {
      if ((error as Error).name === 'TimeoutError') {
        throw new ApiError(
          'upstream_timeout',
          `The gateway at ${baseUrl.origin} did not answer within ${timeoutMs} ms.`,
          undefined,
        );
      }
      const { cause } = error as { cause?: { code?: string; message?: string } };
      const reason = cause?.code ?? cause?.message ?? (error as Error).message;
      throw new ApiError(
        'upstream_unreachable',
        `Cannot reach the gateway at ${baseUrl.origin} (${reason}).`,
        undefined,
      );
    }
    if (response.status >= 300 && response.status < 400) {
      throw new ApiError(
        'upstream_protocol_error',
        `The gateway at ${baseUrl.origin} answered with a redirect (HTTP ${response.status}); give its own URL.`,
        response.status,
      );
    }
    const json = parse(text);
    if (response.ok && (json !== undefined || text === '')) return json as T;
    const envelope = (json as { error?: { code?: unknown; message?: unknown; issues?: unknown } } | undefined)?.error;
    if (typeof envelope?.code === 'string') {
      const message = typeof envelope.message === 'string' ? envelope.message : `HTTP ${response.status}`;
      const issues = Array.isArray(envelope.issues) ? (envelope.issues as ApiError['issues']) : [];
      throw new ApiError(envelope.code, message, response.status, issues);
    }
    const what = response.ok ? 'a body that is not JSON' : 'no error body';
    throw new ApiError(
      'upstream_protocol_error',
      `The gateway answered HTTP ${response.status} with ${what}.`,
      response.status,
    );
  }
}

function parse(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** `code: message`, then one line per validation issue. */
export function formatApiError(error: ApiError): string {
  const issues = error.issues.map((i) => `\n  - ${i.path ? `${i.path}: ` : ''}${i.message}`).join('');
  return `${error.code}: ${error.message}${issues}`;
}

/**
 * Wraps a command's action: an error the gateway answered (or a Gatehouse error raised here) becomes one line,
 * `code: message`, on stderr and exit code 1 — never a stack trace. `clean` makes the message safe for a terminal.
 */
export function reportErrors(
  io: { stderr(text: string): void; setExitCode(code: number): void },
  clean: (text: string) => string,
) {
  return <A extends unknown[]>(body: (...args: A) => Promise<void>) =>
    async (...args: A): Promise<void> => {
      try {
        await body(...args);
      } catch (error) {
        if (error instanceof ApiError || isGatehouseError(error)) {
          io.stderr(`${error.code}: ${clean(error.message)}\n`);
          io.setExitCode(1);
          return;
        }
        throw error;
      }
    };
}
