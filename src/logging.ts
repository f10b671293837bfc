/**
 * Structured JSON logs (pino). Credentials never reach a log line: the request
 * serializer keeps only method, path and id (no query string, no headers), and
 * the redaction list blanks every header-like field that might still slip in.
 */
import { type DestinationStream, type Logger, pino } from 'pino';
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
