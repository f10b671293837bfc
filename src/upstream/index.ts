/**
 * The MCP client side for Streamable HTTP upstreams: connections, the session pool, and bounded
 * list/call. See `pool.ts` for the behaviour and `map-error.ts` for how failures are reported.
 */
export {
  type BoundedCallResult,
  type BoundLimits,
  boundCallResult,
  boundStrings,
  boundTool,
  type CallToolResultLike,
  DEFAULT_BOUNDS,
} from './bounds.js';
export { type ListKind, watchListChanges } from './list-watch.js';
export { LIST_LIMITS } from './operations.js';
export { UpstreamPool } from './pool.js';
export type {
  CallOptions,
  Continuation,
  FetchLike,
  InteractiveCallOptions,
  InteractiveCallResult,
  ListToolsResult,
  ListWatchHandle,
  OperationOptions,
  PoolStats,
  Progress,
  Tool,
  UpstreamChannel,
  UpstreamInputRequired,
  UpstreamLogger,
  UpstreamLogMessage,
  UpstreamOptions,
  UpstreamTarget,
  UpstreamTask,
  UpstreamTransport,
} from './types.js';
