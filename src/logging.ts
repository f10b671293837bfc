/**
 * Structured JSON logs (pino). Credentials never reach a log line: the request
 * serializer keeps only method, path and id (no query string, no headers), and
 * the redaction list blanks every header-like field that might still slip in.
 */
import { type Bindings, type ChildLoggerOptions, type DestinationStream, type Logger, pino } from 'pino';
import type { Config } from './config.js';

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

export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      base: { service: 'gatehouse' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: {
        req: (req: { method?: string; url?: string; id?: string }) => ({
          id: req.id,
          method: req.method,
          path: typeof req.url === 'string' ? req.url.split('?')[0] : undefined,
        }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
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
