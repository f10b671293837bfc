/** The egress guard: every outbound HTTP request and TCP probe Gatehouse makes to an upstream goes through one. */
import { connect as netConnect } from 'node:net';
import type { ReadableStream } from 'node:stream/web';
import { Agent, Response as UndiciResponse, fetch as undiciFetch } from 'undici';
import type { Cancellation } from '../cancellation.js';
import { findGatehouseError, GatehouseError } from '../errors.js';
import { capBody, capNodeBody, discard, isEventStream, responseTooLarge } from './body.js';
import type { NetworkPolicy } from './classify.js';
import { guardedConnector } from './connector.js';
import { type DispatchedResponse, dispatch, headerOf, type LeanRequest, leanRequest, webHeaders } from './dispatch.js';
import { type Exchanged, exchangeOn } from './exchange.js';
import { toEgressError } from './network-errors.js';
import {
  type AddressRules,
  assertLiteralAllowed,
  guardedLookup,
  type Resolver,
  resolveAllowed,
  systemResolver,
} from './rules.js';
import { bareHost, defaultPort, isIpLiteral, parseTarget, schemeError } from './target.js';

export interface EgressOptions {
  /** Default `public`. */
  policy?: NetworkPolicy;
  /** Plain http to a public address; default false. `private` and `any` always allow http. */
  allowHttp?: boolean;
  /** Default: `dns.promises.lookup(host, { all: true, verbatim: true })`. */
  resolver?: Resolver;
  /** Test seam: loopback addresses treated as public. Honoured only when `NODE_ENV=test`. */
  testPublicAddresses?: readonly string[];
  /** Cap on one response body; default 16 MiB. */
  maxResponseBytes?: number;
  /** Default 10 s. */
  connectTimeoutMs?: number;
}

/** A request whose body is in memory, for `exchange`. */
export interface ExchangeRequest {
  method: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal | Cancellation;
}

export interface EgressGuard {
  readonly policy: NetworkPolicy;
  /** Validates a URL: address class first, then scheme. Resolves to the parsed URL or throws GatehouseError. */
  check(url: string | URL): Promise<URL>;
  /** fetch-compatible (usable as the MCP SDK's `fetch` option): check, pinned connect, no redirects, capped body. */
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /**
   * `fetch`'s checks and answers for a request whose body is in memory, without the WHATWG `Request`
   * and `Response` around it: for Gatehouse's own protocol code (direct upstream calls), where those
   * objects cost more CPU than the exchange.
   */
  exchange(url: string, request: ExchangeRequest): Promise<Exchanged>;
  /** TCP connect probe obeying the same address rules (the registry's reachability probe). */
  probeTcp(url: string | URL, timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Admitted exchange URLs kept (`exchange`): far more than the upstreams of any gateway. */
const MAX_EXCHANGE_TARGETS = 1024;

export function createEgressGuard(options: EgressOptions = {}): EgressGuard {
  const policy = options.policy ?? 'public';
  const rules: AddressRules = {
    policy,
    testPublic: process.env.NODE_ENV === 'test' ? [...(options.testPublicAddresses ?? [])] : [],
    resolver: options.resolver ?? systemResolver,
  };
  const allowHttp = policy !== 'public' || options.allowHttp === true;
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  // One agent per guard so connections are kept alive and reused. Deadlines belong to the caller's AbortSignal
  // (list/call timeouts reach an hour), so undici's own 300 s header/body timers are off.
  const agent = new Agent({ connect: guardedConnector(rules, connectTimeoutMs), headersTimeout: 0, bodyTimeout: 0 });
  const lookup = policy === 'any' ? undefined : guardedLookup(rules);
  let closed: Promise<void> | undefined;

  /**
   * Address class first, then scheme. Literals are judged here; names are resolved here only when `resolveNames`
   * (check) or when the scheme is refused anyway (a blocked target must say so whatever the scheme). Otherwise the
   * name is judged at connect time, on the answer the socket actually uses.
   */
  async function admit(url: URL, resolveNames: boolean): Promise<void> {
    const host = bareHost(url);
    const refusedScheme = schemeError(url, allowHttp);
    if (policy !== 'any' && host !== '') {
      if (isIpLiteral(host)) assertLiteralAllowed(rules, host);
      else if (resolveNames || refusedScheme) {
        try {
          await resolveAllowed(rules, host);
        } catch (err) {
          if (!refusedScheme || findGatehouseError(err)?.code === 'private_network_blocked') throw err;
        }
      }
    }
    if (refusedScheme) throw refusedScheme;
  }

  async function check(input: string | URL): Promise<URL> {
    const url = parseTarget(input);
    await admit(url, true);
    return url;
  }

  async function guardedFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const { url, requestInit } = splitRequest(input, init);
    await admit(url, false);
    const host = bareHost(url);
    const lean = leanRequest(url, requestInit);
    if (lean) {
      const answer = await sendLean(lean, host);
      const head = { status: answer.status, headers: webHeaders(answer.headers) };
      const perEvent = isEventStream(lean.options.method, head.headers.get('content-type'));
      return respond(answer.source && capNodeBody(answer.source, maxBytes, host, perEvent), head, url.href);
    }
    let response: UndiciResponse;
    try {
      response = await undiciFetch(url, {
        ...(requestInit as object),
        redirect: 'manual',
        dispatcher: agent,
      });
    } catch (err) {
      throw toEgressError(err, host);
    }
    const headers = response.headers as unknown as Headers;
    const refused =
      response.type === 'opaqueredirect'
        ? redirectRefused(response.status)
        : refusal(response.status, headers.get('content-length') ?? undefined);
    if (refused) {
      await response.body?.cancel().catch(() => {});
      throw refused;
    }
    const body = response.body as ReadableStream<Uint8Array> | null;
    const perEvent = isEventStream(requestInit?.method, headers.get('content-type'));
    return respond(body && capBody(body, maxBytes, host, perEvent), { status: response.status, headers }, response.url);
  }

  /**
   * Exchanges go to a few upstream URLs over and over (a direct call per tool call): each is parsed and admitted
   * once. Admission without resolving names depends on the URL and this guard's rules only (a name is judged at
   * every connect); a refused URL is not kept, so it is refused again. The URLs stay private to `exchange`,
   * which only reads them. Bounded; a full cache starts over.
   */
  const exchangeTargets = new Map<string, { url: URL; host: string }>();

  async function exchange(input: string, request: ExchangeRequest): Promise<Exchanged> {
    let target = exchangeTargets.get(input);
    if (target === undefined) {
      const url = parseTarget(input);
      await admit(url, false);
      target = { url, host: bareHost(url) };
      if (exchangeTargets.size >= MAX_EXCHANGE_TARGETS) exchangeTargets.clear();
      exchangeTargets.set(input, target);
    }
    const { url, host } = target;
    // The caller's signal is the exchange's own to follow (undici's dispatch takes none).
    const { signal, ...init } = request;
    const lean = leanRequest(url, init);
    if (!lean) throw new GatehouseError('internal_error', 'This request cannot be sent as an exchange.');
    return exchangeOn(agent, lean.options, { maxBytes, host, refusal }, signal);
  }

  /** Sends an admitted lean request; network failures mapped, a refused answer (see `refusal`) dropped unread. */
  async function sendLean(lean: LeanRequest, host: string): Promise<DispatchedResponse> {
    let answer: DispatchedResponse;
    try {
      answer = await dispatch(agent, lean);
    } catch (err) {
      throw toEgressError(err, host);
    }
    const refused = refusal(answer.status, headerOf(answer.headers, 'content-length'));
    if (refused) {
      if (answer.source) discard(answer.source);
      throw refused;
    }
    return answer;
  }

  /** Redirects are not followed, and a declared length over the cap is refused before reading. */
  function refusal(status: number, contentLength: string | undefined): GatehouseError | undefined {
    if (status >= 300 && status < 400) return redirectRefused(status);
    const declared = Number(contentLength);
    return Number.isFinite(declared) && declared > maxBytes ? responseTooLarge(maxBytes) : undefined;
  }

  /** The web Response the SDK reads, its body already wrapped in the streaming cap. */
  function respond(
    body: ReadableStream<Uint8Array> | null,
    head: { status: number; headers: Headers },
    url: string,
  ): Response {
    const response = new UndiciResponse(body, {
      status: head.status,
      headers: head.headers as unknown as import('undici').HeadersInit,
    });
    Object.defineProperty(response, 'url', { value: url });
    return response as unknown as Response;
  }

  async function probeTcp(input: string | URL, timeoutMs: number): Promise<boolean> {
    const url = parseTarget(input);
    await admit(url, false);
    return new Promise<boolean>((resolve, reject) => {
      const socket = netConnect({ host: bareHost(url), port: defaultPort(url), lookup });
      const finish = (result: boolean | GatehouseError) => {
        clearTimeout(timer);
        socket.destroy();
        if (result instanceof GatehouseError) reject(result);
        else resolve(result);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      socket.once('connect', () => finish(true));
      // A policy refusal from the lookup is an error; an unreachable target is just `false`.
      socket.on('error', (err) => {
        const refused = findGatehouseError(err);
        finish(refused?.code === 'private_network_blocked' ? refused : false);
      });
    });
  }

  return {
    policy,
    check,
    fetch: guardedFetch,
    exchange,
    probeTcp,
    close() {
      // destroy, not close: a caller's open event stream would otherwise keep shutdown waiting forever.
      closed ??= agent.destroy();
      return closed;
    },
  };
}

function redirectRefused(status: number): GatehouseError {
  return new GatehouseError(
    'upstream_protocol_error',
    `The upstream answered with a redirect (${status}); redirects are not followed.`,
    { reason: 'redirect_refused', status },
  );
}

/** Accepts a Request from any fetch implementation: undici's fetch would not recognise the global one's class. */
function splitRequest(input: string | URL | Request, init?: RequestInit): { url: URL; requestInit?: RequestInit } {
  if (typeof input === 'string' || input instanceof URL) return { url: parseTarget(input), requestInit: init };
  const fromRequest: RequestInit & { duplex?: 'half' } = {
    method: input.method,
    headers: input.headers,
    signal: input.signal,
  };
  if (input.body) {
    fromRequest.body = input.body;
    fromRequest.duplex = 'half';
  }
  return { url: parseTarget(input.url), requestInit: { ...fromRequest, ...init } };
}
