/**
 * The environment a stdio child gets: the SDK's inherited allowlist (on POSIX `HOME`, `LOGNAME`,
 * `PATH`, `SHELL`, `TERM`, `USER`; values that look like exported shell functions are skipped) plus
 * the record's declared env, already unsealed by the caller. Nothing else of Gatehouse's own
 * environment (`GATEHOUSE_*`, `MCP_TOOL_TOKEN`, `MCP_SECRET_*`, `DATABASE_URL`, `NODE_OPTIONS`, …)
 * reaches a child: the child env is built from scratch, never by copying `process.env` and deleting.
 */
import { DEFAULT_INHERITED_ENV_VARS, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import { GatehouseError } from '../../errors.js';

export { DEFAULT_INHERITED_ENV_VARS };

/**
 * Variables that decide what code a process loads or runs, or where a launcher (`npx`, `uvx`, `pip`) fetches it
 * from: an approver must see their values (a `NODE_OPTIONS=--import=data:…` runs whatever it names; an
 * `npm_config_registry` serves whatever package it likes), so approval cards show them; they are not credentials.
 * Names are matched in any case: npm reads `npm_config_*` and `NPM_CONFIG_*` alike.
 */
const CODE_LOADING_ENV =
  /^(NODE_OPTIONS|NODE_PATH|NODE_EXTRA_CA_CERTS|PATH|LD_PRELOAD|LD_LIBRARY_PATH|LD_AUDIT|DYLD_\w+|PYTHON(PATH|STARTUP|HOME|INSPECT|EXECUTABLE|USERBASE)|PERL5(OPT|LIB)|PERLLIB|RUBY(OPT|LIB)|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|BASH_ENV|ENV|GIT_SSH_COMMAND|GIT_EXEC_PATH|NPM_CONFIG_\w+|YARN_\w+|UV_\w*INDEX\w*|UV_PYTHON\w*|PIP_\w*INDEX\w*|PIP_FIND_LINKS|PIP_CONFIG_FILE|PIP_TRUSTED_HOST)$/i;

/** Whether a variable decides what code a child loads (shown on approval cards, never masked). */
export const loadsCode = (name: string): boolean => CODE_LOADING_ENV.test(name);

/** What `spawn` can carry without surprises: a name with `=` or NUL would be split or refused. */
const ENV_NAME = /^[^=\0]+$/;

/** Builds a child's environment; a declared name that cannot be an environment variable is refused. */
export function childEnvironment(declared: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = getDefaultEnvironment();
  for (const [name, value] of Object.entries(declared)) {
    if (!ENV_NAME.test(name)) {
      throw new GatehouseError('validation_error', `"${name}" is not a valid environment variable name.`, {
        reason: 'invalid_env_name',
      });
    }
    if (typeof value !== 'string' || value.includes('\0')) {
      // Never echo the value: it may be a secret.
      throw new GatehouseError('validation_error', `The value of ${name} cannot be passed to a process.`, {
        reason: 'invalid_env_value',
      });
    }
    env[name] = value;
  }
  return env;
}
