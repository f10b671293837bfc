/**
 * Structured JSON logs (pino). Credentials never reach a log line: the request
 * serializer keeps only method, path and id (no query string, no headers), the
 * error serializer keeps no cause's words (an upstream's error body may echo
 * the credentials it was sent), and the redaction list blanks every
 * header-like field that might still slip in.
 */
import { type Bindings, type ChildLoggerOptions, type DestinationStream, type Logger, pino } from 'pino';
import { REDACTED, redact, scrubSecrets } from './audit/redact.js';
import type { Config } from './config.js';
import { GatehouseError } from './errors.js';

export type { Logger };

/** Paths blanked wherever they appear; `headers` covers caller-supplied upstream headers in any logged object. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["mcp-session-id"]',
  'headers',
  '*.headers',
  'authorization',
  '*.authorization',
  'token',
  '*.token',
  'env',
  '*.env',
];

/** Characters kept of a plain error's message (an upstream's words: bounded and scrubbed). */
const MAX_ERROR_MESSAGE = 200;
/** Characters kept of a GatehouseError's message (Gatehouse's own words, which may quote a caller's input). */
const MAX_GATEHOUSE_MESSAGE = 2000;
/** Links of a cause chain (and items of an AggregateError) summarised. */
const MAX_CAUSES = 8;
/** Stack frames kept. */
const MAX_FRAMES = 30;
/** A code worth logging: an identifier, never free text. */
const CODE_SHAPE = /^[A-Za-z0-9_.:-]{1,100}$/;

type ErrorLike = Error & { code?: unknown; status?: unknown; errno?: unknown; syscall?: unknown; errors?: unknown };

function isErrorLike(value: unknown): value is ErrorLike {
  if (value instanceof Error) return true;
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { message?: unknown; stack?: unknown };
  return typeof candidate.message === 'string' && typeof candidate.stack === 'string';
}

/** Reads a property that may be a throwing getter (`SdkHttpError.status`). */
function read(error: object, key: string): unknown {
  try {
    return (error as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

function bounded(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…[truncated ${text.length - max} chars]` : text;
}

/** Scrubbed before it is cut (with some text past the cut), so a credential across the bound is found whole. */
function scrubbedAndBounded(text: string, max: number): string {
  if (text.length <= max) return scrubSecrets(text);
  return `${scrubSecrets(text.slice(0, max + 1024)).slice(0, max)}…[truncated ${text.length - max} chars]`;
}

function typeOf(error: object): string {
  const name = read(error, 'name');
  const ctor = (read(error, 'constructor') as { name?: unknown } | undefined)?.name;
  const type = typeof name === 'string' && name !== 'Error' ? name : typeof ctor === 'string' ? ctor : 'Error';
  return bounded(type, 100);
}

function codeOf(error: object): string | number | undefined {
  const code = read(error, 'code');
  if (typeof code === 'number' && Number.isFinite(code)) return code;
  return typeof code === 'string' && CODE_SHAPE.test(code) ? code : undefined;
}

function statusOf(error: object): number | undefined {
  const status = read(error, 'status');
  return typeof status === 'number' && Number.isInteger(status) ? status : undefined;
}

/** What a log line keeps of an error that is not the one logged: its kind, never its words, stack or body. */
interface ErrorSummary {
  type: string;
  code?: string | number;
  status?: number;
}

function summary(value: unknown): ErrorSummary {
  if (typeof value !== 'object' || value === null) return { type: typeof value };
  const out: ErrorSummary = { type: typeOf(value) };
  const code = codeOf(value);
  if (code !== undefined) out.code = code;
  const status = statusOf(value);
  if (status !== undefined) out.status = status;
  return out;
}

/** The `cause` chain below an error, each link summarised (no message, stack or body: an upstream's may echo a credential). */
function causesOf(error: object): ErrorSummary[] | undefined {
  const out: ErrorSummary[] = [];
  const seen = new Set<unknown>([error]);
  let current = read(error, 'cause');
  while (current !== undefined && current !== null && out.length < MAX_CAUSES && !seen.has(current)) {
    seen.add(current);
    out.push(summary(current));
    current = typeof current === 'object' ? read(current, 'cause') : undefined;
  }
  return out.length > 0 ? out : undefined;
}

/** The message a log line shows for an error: a GatehouseError's own, a plain error's bounded and scrubbed. */
export function errorMessageForLog(error: ErrorLike): string {
  const message = typeof error.message === 'string' ? error.message : '';
  const max = error instanceof GatehouseError ? MAX_GATEHOUSE_MESSAGE : MAX_ERROR_MESSAGE;
  return scrubbedAndBounded(message, max);
}

/** The stack's frames under a first line of the safe message: V8 puts the raw message first, pino its causes' after. */
function stackOf(error: ErrorLike, type: string, message: string): string | undefined {
  const stack = read(error, 'stack');
  if (typeof stack !== 'string') return undefined;
  const frames: string[] = [];
  for (const line of stack.split('\n')) {
    if (/^\s+at /.test(line)) {
      frames.push(line);
      if (frames.length >= MAX_FRAMES) break;
    }
  }
  return scrubSecrets([`${type}: ${message}`, ...frames].join('\n'));
}

/**
 * pino's `err` serializer. pino's default one writes every cause's message and stack (`messageWithCauses`),
 * and an upstream's SDK error (kept as the cause of the GatehouseError it maps to) says
 * `Error POSTing to endpoint: <the whole body>`: a body that may echo the credentials Gatehouse sent it.
 * So: a GatehouseError logs its code, status, message and details (non-secret by contract: they are what a
 * caller is answered); any other error its type, code and a bounded, scrubbed message; both their own stack
 * frames; and of the cause chain (and an AggregateError's errors) only each link's type, code and status.
 */
export function serializeError(value: unknown): unknown {
  if (typeof value === 'string') return scrubbedAndBounded(value, MAX_ERROR_MESSAGE);
  if (!isErrorLike(value)) {
    return typeof value === 'object' && value !== null ? redact(value, { maxDepth: 4, maxTotal: 4096 }) : value;
  }
  const type = typeOf(value);
  const message = errorMessageForLog(value);
  const out: Record<string, unknown> = { type, message };
  if (value instanceof GatehouseError) {
    out.code = value.code;
    out.status = value.status;
    if (value.details !== undefined) out.details = value.details;
  } else {
    const code = codeOf(value);
    if (code !== undefined) out.code = code;
    const status = statusOf(value);
    if (status !== undefined) out.status = status;
    const errno = read(value, 'errno');
    if (typeof errno === 'number') out.errno = errno;
    const syscall = read(value, 'syscall');
    if (typeof syscall === 'string' && CODE_SHAPE.test(syscall)) out.syscall = syscall;
  }
  const stack = stackOf(value, type, message);
  if (stack !== undefined) out.stack = stack;
  const causes = causesOf(value);
  if (causes) out.causes = causes;
  const errors = read(value, 'errors');
  if (Array.isArray(errors) && errors.length > 0) {
    out.errors = errors.slice(0, MAX_CAUSES).map(summary);
    if (errors.length > MAX_CAUSES) (out.errors as unknown[]).push(`[${errors.length - MAX_CAUSES} more]`);
  }
  return out;
}

/** The error a log call names with no message of its own (`log.warn(err)`, `log.warn({ err })`): pino would use its raw message. */
function unnamedError(args: unknown[]): ErrorLike | undefined {
  if (args.length !== 1) return undefined;
  const only = args[0];
  if (isErrorLike(only)) return only;
  if (typeof only !== 'object' || only === null) return undefined;
  const { err, msg } = only as { err?: unknown; msg?: unknown };
  return msg === undefined && isErrorLike(err) ? err : undefined;
}

export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      base: { service: 'gatehouse' },
      redact: { paths: REDACTED_PATHS, censor: REDACTED },
      serializers: {
        err: serializeError,
        req: (req: { method?: string; url?: string; id?: string }) => ({
          id: req.id,
          method: req.method,
          path: typeof req.url === 'string' ? req.url.split('?')[0] : undefined,
        }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
      },
      hooks: {
        logMethod(args, method) {
          const error = unnamedError(args);
          if (error) return method.apply(this, [args[0], errorMessageForLog(error)] as Parameters<typeof method>);
          return method.apply(this, args);
        },
      },
    },
    destination,
  );
}

type LineLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogLine = Parameters<Logger['info']>;

/**
 * Fastify's per-request logger: the pino child carrying the request id, made only when the request writes
 * a line at an enabled level. Making a child runs the redaction over its bindings (a kilobyte and a few µs
 * on every request), and below `info` most requests write no line at all.
 */
class RequestLogger {
  #child: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
  ) {}

  #logger(): Logger {
    this.#child ??= this.parent.child(this.bindings);
    return this.#child;
  }

  get level(): string {
    return (this.#child ?? this.parent).level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  #line(level: LineLevel, line: LogLine): void {
    if ((this.#child ?? this.parent).isLevelEnabled(level)) this.#logger()[level](...line);
  }

  fatal(...line: LogLine): void {
    this.#line('fatal', line);
  }
  error(...line: LogLine): void {
    this.#line('error', line);
  }
  warn(...line: LogLine): void {
    this.#line('warn', line);
  }
  info(...line: LogLine): void {
    this.#line('info', line);
  }
  debug(...line: LogLine): void {
    this.#line('debug', line);
  }
  trace(...line: LogLine): void {
    this.#line('trace', line);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.#logger().child(bindings, options);
  }
}

/**
 * Fastify's `childLoggerFactory`: a lazy `RequestLogger`, or the child itself when the route asks for
 * options of its own (a route log level).
 */
export function requestLogger(parent: Logger, bindings: Bindings, options: ChildLoggerOptions): Logger {
  if (Object.keys(options).length > 0) return parent.child(bindings, options);
  return new RequestLogger(parent, bindings) as unknown as Logger;
}
