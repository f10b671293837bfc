/**
 * Whether a server has the configuration its source says it needs: every variable of `envRequired` set, and the
 * extra arguments of `argsRequired` given. A server without them cannot work, so it is never shown as connected:
 * its `status` is `unknown` and its `lastError` says `needs_configuration` and what is missing.
 */
import type { ServerView } from './records.js';

/** Extra arguments a preset needs after its own (e.g. the folders of a filesystem server). */
export interface ArgsRequired {
  /** What to give, in words (shown by the dashboard and the CLI). */
  what: string;
  /** How many arguments the record has before the required ones. */
  after: number;
}

type Configured = Pick<ServerView, 'env' | 'args'> & { envRequired?: string[]; argsRequired?: ArgsRequired };

/** What is missing, in words; undefined when nothing is. */
export function missingConfiguration(server: Configured): string | undefined {
  const missing: string[] = [];
  const env = (server.envRequired ?? []).filter((name) => !(name in server.env));
  if (env.length > 0) missing.push(`env ${env.join(', ')}`);
  if (server.argsRequired && server.args.length <= server.argsRequired.after) {
    missing.push(`arguments: ${server.argsRequired.what}`);
  }
  return missing.length > 0 ? `Needs configuration: ${missing.join('; ')}.` : undefined;
}

/**
 * The status as the API shows it: a server missing configuration is `unknown` with `needs_configuration`; a
 * disabled one is `unknown` too (its last handshake says nothing about a server no one may use).
 */
export function withConfigurationStatus<T extends Configured & Pick<ServerView, 'status' | 'lastError' | 'enabled'>>(
  view: T,
): T {
  const missing = missingConfiguration(view);
  if (missing) return { ...view, status: 'unknown', lastError: `needs_configuration: ${missing}` };
  return view.enabled ? view : { ...view, status: 'unknown' };
}
