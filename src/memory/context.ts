/** What every part of the memory engine shares, created once by the `MemoryEngine` facade. */
import type { Logger } from '../logging.js';
import type { Store } from '../store/db.js';
import type { LlmClient } from './llm.js';
import type { OperationRunner } from './runner.js';

export interface MemoryContext {
  readonly store: Store;
  /** Absent when no language-model endpoint is configured: the features that need one say `unsupported`. */
  readonly llm: LlmClient | undefined;
  readonly logger: Logger | undefined;
  /** Runs queued operations in the background; a module that queues one launches it here. */
  readonly runner: OperationRunner;
}
