/** Shared by the declarative tests: parse a file the way `serve --config` does, and count what an apply wrote. */
import { stringify } from 'yaml';
import { applyDeclarativeConfig } from '../../src/declarative/apply.js';
import { type DeclarativeConfig, parseDeclarativeConfig } from '../../src/declarative/load.js';
import { hashToken } from '../../src/identity/index.js';
import type { Store } from '../../src/store/db.js';
import type { TestGateway } from '../helpers/gateway.js';

export const SENTINEL = 'SENTINEL-declarative-5e1d-do-not-leak';

export function parse(file: string | object, env: NodeJS.ProcessEnv = {}): DeclarativeConfig {
  const text = typeof file === 'string' ? file : stringify(file);
  return parseDeclarativeConfig(text, 'gatehouse.yaml', { env, secretEnvPrefix: 'MCP_SECRET_' });
}

export function apply(
  gw: TestGateway,
  file: string | object,
  options: { prune?: boolean; env?: NodeJS.ProcessEnv } = {},
) {
  return applyDeclarativeConfig(gw.gateway, parse(file, options.env), { prune: options.prune ?? false });
}

/** Rows an apply may write: audit events, stream events, server events. */
export async function writes(store: Store): Promise<{ audit: number; stream: number; serverEvents: number }> {
  const count = async (table: 'audit_events' | 'stream_events' | 'server_events') =>
    Number(
      (
        await store.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    audit: await count('audit_events'),
    stream: await count('stream_events'),
    serverEvents: await count('server_events'),
  };
}

export const sha256 = (token: string) => `sha256:${hashToken(token)}`;
