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

/**
 * Names that carry a credential, though in a code-loading family (`YARN_NPM_AUTH_TOKEN`, `NPM_CONFIG__AUTHTOKEN`,
 * `npm_config__auth`, `UV_INDEX_<X>_PASSWORD`, `NPM_CONFIG_KEY`…): never shown in clear. Cards are stored as they
 * are shown, in the approvals table.
 */
const CREDENTIAL_ENV = /AUTH|TOKEN|PASSWORD|PASSWD|SECRET|USERNAME|CREDENTIAL|_KEY/i;

/**
 * Whether a variable decides what code a child loads (shown on approval cards, never masked); a credential-looking
 * name never does (it is masked as any other secret).
 */
export const loadsCode = (name: string): boolean => CODE_LOADING_ENV.test(name) && !CREDENTIAL_ENV.test(name);

/** The userinfo of every URL in a value (`https://user:token@host/…`, one or a list). */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi;

/** A value shown in clear with the `user:password@` of its URLs masked; host and path kept (where code comes from). */
export const maskUrlCredentials = (value: string): string => value.replace(URL_USERINFO, '$1[redacted]@');

/**
 * What an approval or import card shows of a declared env value: the value of a variable that decides what code
 * runs (`loadsCode`), its URLs' credentials masked; undefined for any other (the caller masks it).
 */
export function shownEnvValue(name: string, value: unknown): string | undefined {
  return loadsCode(name) && typeof value === 'string' ? maskUrlCredentials(value) : undefined;
}

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
