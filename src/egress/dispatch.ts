/**
 * The lean path of the guarded fetch: a request whose body is already in memory (every MCP message
 * the SDK sends) goes straight to undici's dispatcher instead of through its WHATWG `fetch`, which
 * re-wraps the body as a stream (a chunked upload) and runs the full fetch algorithm per call. On
 * loopback that is about half the CPU and a third of the latency of an upstream request. The answer
 * is still a web `Response`, so the MCP SDK's transport cannot tell the difference.
 */
import type { Readable } from 'node:stream';
import type { Agent, Dispatcher } from 'undici';

/** The part of a request the lean path needs; `undefined` means "take the fetch path". */
export interface LeanRequest {
  options: Dispatcher.RequestOptions;
}

const LEAN_METHODS = new Set(['GET', 'POST', 'DELETE', 'HEAD']);

function plainHeaders(headers: RequestInit['headers']): Record<string, string> | undefined {
  if (headers === undefined || headers === null) return {};
  if (Array.isArray(headers)) {
    const out: Record<string, string> = {};
    for (const pair of headers) {
      if (pair.length !== 2) return undefined;
      const [name, value] = pair as [string, string];
      const key = name.toLowerCase();
      out[key] = key in out ? `${out[key]}, ${value}` : value;
    }
    return out;
  }
  // Any Headers class (the global one, undici's own): read through its API, never its own properties.
  if (typeof (headers as Headers).forEach === 'function') {
    const out: Record<string, string> = {};
    (headers as Headers).forEach((value, name) => {
      out[name] = value;
    });
    return out;
  }
  if (typeof headers === 'object') {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== 'string') return undefined;
      out[name.toLowerCase()] = value;
    }
    return out;
  }
  return undefined;
}

/**
 * A request the dispatcher can send as is: a plain method, an in-memory body (string or bytes),
 * plain headers, no credentials in the URL. Anything else keeps fetch's own checks and behaviour.
 */
export function leanRequest(url: URL, init: RequestInit | undefined): LeanRequest | undefined {
  if (url.username || url.password) return undefined;
  const method = (init?.method ?? 'GET').toUpperCase();
  if (!LEAN_METHODS.has(method)) return undefined;
  const body = init?.body;
  if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
    return undefined;
  }
  const headers = plainHeaders(init?.headers);
  if (!headers) return undefined;
  if (typeof body === 'string' && !('content-type' in headers)) headers['content-type'] = 'text/plain;charset=UTF-8';
  return {
    options: {
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: method as Dispatcher.HttpMethod,
      headers,
      ...(body !== undefined && body !== null ? { body } : {}),
      ...(init?.signal ? { signal: init.signal } : {}),
    },
  };
}

export type RawHeaders = Record<string, string | string[] | undefined>;

export interface DispatchedResponse {
  status: number;
  /** As undici gives them: lower-case names, repeated headers as arrays. */
  headers: RawHeaders;
  /** Null for statuses that have no body (the body was drained). */
  source: Readable | null;
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** Sends a lean request on `agent`; the body streams as it arrives. */
export async function dispatch(agent: Agent, request: LeanRequest): Promise<DispatchedResponse> {
  const answer = await agent.request(request.options);
  if (NULL_BODY_STATUSES.has(answer.statusCode) || request.options.method === 'HEAD') {
    await answer.body.dump().catch(() => {});
    return { status: answer.statusCode, headers: answer.headers, source: null };
  }
  return { status: answer.statusCode, headers: answer.headers, source: answer.body };
}

/** One header of a dispatched response; repeated ones joined as `Headers` joins them. */
export function headerOf(headers: RawHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The headers as a web `Headers`, for a `Response`. */
export function webHeaders(raw: RawHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.append(name, value);
  }
  return headers;
}
