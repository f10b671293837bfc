/**
 * The memory engine Gatehouse embeds, on the store it already has: memory
 * units (facts) in datasets, the documents they were retained from, their
 * curation history, directives, mental models, and asynchronous operations
 * (retain, consolidation, mental-model refresh) run in the background.
 *
 * Datasets are the caller's business: every read takes the datasets it may
 * see, every write the one dataset it goes to; the surface decides them.
 * Language-model features use the optional `LlmClient`; without one, retain
 * stores each document as one fact, and reflect and refresh answer
 * `unsupported` — never a made-up answer.
 *
 * This class is a facade: each concern lives in its own module, and every
 * method here hands its work to one of them with the shared context.
 */
import type { Logger } from '../logging.js';
import type { Store } from '../store/db.js';
import { consolidate, runConsolidation } from './consolidation.js';
import type { MemoryContext } from './context.js';
import { curate, deleteUnits, resolveForDelete } from './curation.js';
import * as directives from './directives.js';
import type { LlmClient } from './llm.js';
import * as mentalModels from './mental-models.js';
import * as operations from './operations.js';
import { type RecallAnswer, type RecallOptions, type ReflectOptions, recall, reflect } from './recall.js';
import { add, runRetain } from './retain.js';
import { OperationRunner } from './runner.js';
import { stats } from './stats.js';
import type {
  Actor,
  CurateChanges,
  DatasetScope,
  MemoryUnit,
  NewMemory,
  OperationView,
  SearchResult,
} from './types.js';
import * as units from './units.js';

export { parseExtraction } from './extraction.js';
export * from './types.js';

export interface MemoryEngineOptions {
  store: Store;
  llm?: LlmClient | undefined;
  logger?: Logger | undefined;
  /** A running operation refreshes `updated_at` this often (default 10 s) … */
  heartbeatMs?: number;
  /** … and a `processing` one not refreshed for this long belongs to a dead process: it runs again (default 60 s). */
  leaseMs?: number;
}

export class MemoryEngine {
  readonly store: Store;
  readonly llm: LlmClient | undefined;
  private readonly runner: OperationRunner;
  private readonly ctx: MemoryContext;

  constructor(options: MemoryEngineOptions) {
    this.store = options.store;
    this.llm = options.llm;
    this.runner = new OperationRunner({
      store: options.store,
      logger: options.logger,
      heartbeatMs: options.heartbeatMs ?? 10_000,
      leaseMs: options.leaseMs ?? 60_000,
      handlers: {
        retain: (op, signal) => runRetain(this.ctx, op, signal),
        refresh: (op) => mentalModels.runRefresh(this.ctx, op),
        consolidation: (op) => runConsolidation(this.ctx, op),
      },
    });
    this.ctx = { store: options.store, llm: options.llm, logger: options.logger, runner: this.runner };
  }

  get db() {
    return this.store.db;
  }

  // --- background operations ------------------------------------------------------------------------------

  /** Runs what is pending now, then every heartbeat refreshes leases and reclaims lapsed operations. */
  start(): Promise<void> {
    return this.runner.start();
  }

  /** `processing` operations whose lease lapsed (and that this process does not run) go back to `pending`. */
  reclaimLapsed(): Promise<number> {
    return this.runner.reclaimLapsed();
  }

  /** Picks up pending operations (left by a restart) now. */
  resume(): Promise<number> {
    return this.runner.resume();
  }

  /** Resolves when every operation this process started has finished (tests, shutdown). */
  idle(): Promise<void> {
    return this.runner.idle();
  }

  close(): Promise<void> {
    return this.runner.close();
  }

  // --- retain and reading ---------------------------------------------------------------------------------

  add(
    input: NewMemory,
    dataset: string,
    actor: Actor,
  ): Promise<{ id: string; timestamp: string; operation_id: string }> {
    return add(this.ctx, input, dataset, actor);
  }

  search(query: string, filter: units.SearchFilterOptions, limit: number): Promise<SearchResult[]> {
    return units.search(this.ctx, query, filter, limit);
  }

  list(options: units.ListOptions): Promise<{ items: MemoryUnit[]; next_cursor: string | null }> {
    return units.list(this.ctx, options);
  }

  listPage(options: units.ListPageOptions): Promise<{ units: MemoryUnit[]; total: number }> {
    return units.listPage(this.ctx, options);
  }

  recall(query: string, options: RecallOptions): Promise<RecallAnswer> {
    return recall(this.ctx, query, options);
  }

  reflect(query: string, options: ReflectOptions): Promise<Record<string, unknown>> {
    return reflect(this.ctx, query, options);
  }

  getUnit(id: string, datasets: DatasetScope): Promise<MemoryUnit> {
    return units.getUnit(this.ctx, id, datasets);
  }

  history(id: string, datasets: DatasetScope): Promise<{ id: string; unit: MemoryUnit; history: unknown[] }> {
    return units.history(this.ctx, id, datasets);
  }

  tags(datasets: readonly string[]): Promise<{ tags: { tag: string; count: number }[]; count: number }> {
    return units.tags(this.ctx, datasets);
  }

  stats(datasets: readonly string[]): Promise<Record<string, unknown>> {
    return stats(this.ctx, datasets);
  }

  // --- curation and consolidation -------------------------------------------------------------------------

  curate(id: string, changes: CurateChanges, datasets: DatasetScope, actor: Actor): Promise<MemoryUnit> {
    return curate(this.ctx, id, changes, datasets, actor);
  }

  resolveForDelete(ids: readonly string[], datasets: DatasetScope) {
    return resolveForDelete(this.ctx, ids, datasets);
  }

  delete(ids: readonly string[], datasets: DatasetScope, actor: Actor): Promise<{ deleted: number }> {
    return deleteUnits(this.ctx, ids, datasets, actor);
  }

  consolidate(dataset: string, actor: Actor): Promise<{ operation_id: string; deduplicated: number }> {
    return consolidate(this.ctx, dataset, actor);
  }

  // --- directives -----------------------------------------------------------------------------------------

  directiveList(options: directives.DirectiveListOptions) {
    return directives.listDirectives(this.ctx, options);
  }

  directiveGet(id: string) {
    return directives.getDirective(this.ctx, id);
  }

  directiveCreate(input: directives.NewDirective, actor: Actor) {
    return directives.createDirective(this.ctx, input, actor);
  }

  directiveUpdate(id: string, changes: directives.DirectiveChanges) {
    return directives.updateDirective(this.ctx, id, changes);
  }

  directiveDelete(id: string): Promise<{ deleted: string }> {
    return directives.deleteDirective(this.ctx, id);
  }

  // --- mental models --------------------------------------------------------------------------------------

  mentalModelList(options: mentalModels.MentalModelListOptions) {
    return mentalModels.listMentalModels(this.ctx, options);
  }

  mentalModelGet(id: string) {
    return mentalModels.getMentalModel(this.ctx, id);
  }

  mentalModelCreate(input: mentalModels.NewMentalModel, actor: Actor): Promise<Record<string, unknown>> {
    return mentalModels.createMentalModel(this.ctx, input, actor);
  }

  mentalModelUpdate(id: string, changes: mentalModels.MentalModelChanges) {
    return mentalModels.updateMentalModel(this.ctx, id, changes);
  }

  mentalModelRefresh(id: string, actor: Actor): Promise<Record<string, unknown>> {
    return mentalModels.refreshMentalModel(this.ctx, id, actor);
  }

  mentalModelDelete(id: string): Promise<{ deleted: string }> {
    return mentalModels.deleteMentalModel(this.ctx, id);
  }

  // --- operations -----------------------------------------------------------------------------------------

  operationList(options: operations.OperationListOptions) {
    return operations.listOperations(this.ctx, options);
  }

  operationGet(id: string, requesterId?: string): Promise<OperationView> {
    return operations.getOperation(this.ctx, id, requesterId);
  }

  /** pending or processing → cancelled; a running extraction is aborted and writes nothing. */
  operationCancel(id: string, requesterId?: string): Promise<OperationView> {
    return operations.cancelOperation(this.ctx, id, requesterId);
  }

  /** failed or cancelled → pending again, and run. */
  operationRetry(id: string, requesterId?: string): Promise<OperationView> {
    return operations.retryOperation(this.ctx, id, requesterId);
  }
}
