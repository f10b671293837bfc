/**
 * The CLI's flags for an upstream's OAuth (`servers add --oauth <mode>`, `servers auth <id> oauth`): one
 * place builds the `auth: {type: "oauth", …}` both send. A client secret never goes on the command line
 * (it would show in `ps` and shell history): it is an env reference the gateway resolves, or read from stdin.
 */
import type { Command } from 'commander';
import { GatehouseError } from '../errors.js';

export interface OAuthFlags {
  mode?: string;
  grant?: string;
  clientId?: string;
  clientSecretEnv?: string;
  clientSecretStdin?: boolean;
  scope?: string[];
  issuer?: string;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** Adds the OAuth settings' flags (all but the mode, which each command takes its own way). */
export function withOAuthFlags(command: Command): Command {
  return command
    .option('--grant <grant>', 'oauth: authorization_code (default) | client_credentials (shared, with --client-id)')
    .option('--client-id <id>', 'oauth: a client registered at the authorization server (else CIMD, else DCR)')
    .option('--client-secret-env <NAME>', 'oauth: its secret as an env reference the gateway resolves (MCP_SECRET_…)')
    .option('--client-secret-stdin', 'oauth: read its secret from stdin (sealed on arrival; never on the command line)')
    .option('--scope <scope>', 'oauth: a scope to ask for (repeatable; default: what the upstream names)', collect)
    .option(
      '--issuer <url>',
      "oauth: the only authorization server its grants and secret go to (its metadata's issuer)",
    );
}

/** The `auth` value the flags describe; the gateway's schema checks the rest (modes, grant pairing). */
export async function oauthAuthOf(
  flags: OAuthFlags,
  readSecret: () => Promise<string>,
): Promise<Record<string, unknown>> {
  if (flags.mode === undefined) throw new GatehouseError('validation_error', 'oauth needs a mode: shared or per-user.');
  if (flags.clientSecretEnv !== undefined && flags.clientSecretStdin) {
    throw new GatehouseError('validation_error', 'Give one of --client-secret-env and --client-secret-stdin.');
  }
  let clientSecret: unknown;
  if (flags.clientSecretEnv !== undefined) clientSecret = { env: flags.clientSecretEnv };
  if (flags.clientSecretStdin) {
    clientSecret = await readSecret();
    if (!clientSecret) throw new GatehouseError('validation_error', 'No client secret on stdin.');
  }
  return {
    type: 'oauth',
    mode: flags.mode,
    ...(flags.grant !== undefined && { grant: flags.grant }),
    ...(flags.clientId !== undefined && { clientId: flags.clientId }),
    ...(clientSecret !== undefined && { clientSecret }),
    ...(flags.scope !== undefined && { scopes: flags.scope }),
    // Checked by the gateway's own rule for `auth.issuer` (an http(s) URL without query, fragment or credentials).
    ...(flags.issuer !== undefined && { issuer: flags.issuer }),
  };
}

/** Whether any OAuth flag besides the mode was given (they need `--oauth` / type `oauth`). */
export function anyOAuthFlag(flags: OAuthFlags): boolean {
  return [flags.grant, flags.clientId, flags.clientSecretEnv, flags.clientSecretStdin, flags.scope, flags.issuer].some(
    (v) => v !== undefined,
  );
}
