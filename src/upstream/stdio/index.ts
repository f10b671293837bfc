/**
 * stdio upstreams: the one spawner (own process group, minimal env, bounded pipes, group reaping),
 * the MCP transport over the child's pipes, and the connect that negotiates or reuses an era.
 */
export {
  type ConnectStdioOptions,
  connectStdio,
  isStdioEraMismatch,
  type StdioConnection,
  stdioError,
} from './connect.js';
export { childEnvironment, DEFAULT_INHERITED_ENV_VARS } from './env.js';
export {
  descendantsOf,
  listDescendants,
  listGroupPids,
  namespacePids,
  type ProcStat,
  parseProcStat,
  procAvailable,
  processAlive,
  processGroupAlive,
  procStartTime,
  readProcStat,
} from './proc.js';
export { type OrphanReapResult, type OrphanRecord, reapOrphanGroup } from './reap.js';
export {
  findBwrap,
  resolveOnPath,
  SANDBOX_HOME,
  type SandboxLimits,
  type SandboxNetwork,
  type SandboxOptions,
  sandboxUnavailable,
  uidDropAvailable,
} from './sandbox.js';
export {
  type ExitInfo,
  type ExitReason,
  killAllStdioChildrenSync,
  type LiveChildRecord,
  liveStdioChildren,
  STDIO_DEFAULTS,
  type StdioChild,
  type StdioSpec,
  spawnStdio,
} from './spawn.js';
export { StdioChildTransport } from './transport.js';
