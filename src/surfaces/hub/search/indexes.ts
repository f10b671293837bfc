/**
 * Search mode's index, kept off the request path: when the catalog changes (a new snapshot), the
 * new index is built in the background in slices (`ToolIndex.build`), and searches are answered from
 * the previous index until it is ready. A hit of that previous index is re-read in the current
 * snapshot before it is shown: a tool gone, quarantined, blocked or hidden since never appears, and
 * verdicts are today's; a tool added since is found once the new index takes over.
 */
import { GatehouseError } from '../../../errors.js';
import { type HubTool, isListed, type Snapshot } from '../view.js';
import type { ToolEmbeddings } from './embeddings.js';
import { type SemanticQuery, ToolIndex, yieldToLoop } from './tool-index.js';

/** Every tool the index of `snapshot` covers: listed tools of enabled servers. */
function toolsOf(snapshot: Snapshot): HubTool[] {
  const tools: HubTool[] = [];
  for (const server of snapshot.servers.values()) {
    if (!server.detail.enabled) continue;
    for (const tool of server.tools.values()) if (isListed(tool)) tools.push(tool);
  }
  return tools;
}

/** A build given up because a newer snapshot came before it finished. */
class Superseded extends Error {}

export interface IndexedSnapshot {
  /** The snapshot `index` was built from (the current one, or the one before while the new index builds). */
  snapshot: Snapshot;
  index: ToolIndex<HubTool>;
}

export class SearchIndexes {
  private current: IndexedSnapshot | undefined;
  private pending: { snapshot: Snapshot; done: Promise<void> } | undefined;

  /**
   * `pause` and `sliceMs` are the background build's (tests hold a build between two slices);
   * `embeddings`, when on, embeds each new index's tools in the background (`embeddings.ts`).
   */
  constructor(
    private readonly pause: () => Promise<void> = yieldToLoop,
    private readonly sliceMs?: number,
    private readonly embeddings?: ToolEmbeddings,
  ) {}

  /**
   * The index to search `snapshot` with: its own when built, else the previous one while the new one
   * builds. Only the very first search of a process waits for a build (which yields to other requests).
   */
  async for(snapshot: Snapshot): Promise<IndexedSnapshot> {
    if (this.current?.snapshot !== snapshot) this.refresh(snapshot, true);
    while (!this.current) {
      const pending = this.pending;
      if (!pending) throw new GatehouseError('internal_error', 'The search index could not be built.');
      await pending.done.catch(() => undefined);
    }
    return this.current;
  }

  /** Resolves once no build is under way, nor any embedding of one (the bench and tests wait on it). */
  async settled(): Promise<void> {
    while (this.pending) await this.pending.done.catch(() => undefined);
    await this.embeddings?.settled();
  }

  /**
   * The semantic half of a search with `indexed`, when embeddings are on and usable right now; else
   * undefined and the search ranks with BM25 alone. Never throws.
   */
  async semantic(indexed: IndexedSnapshot, query: string): Promise<SemanticQuery | undefined> {
    return this.embeddings?.semantic(indexed.index, query);
  }

  /** Whether search mode was used in this process (an index is built or building). */
  get inUse(): boolean {
    return this.current !== undefined || this.pending !== undefined;
  }

  /**
   * Starts building `snapshot`'s index in the background, unless it is built or building. Without
   * `force`, only once search mode has been used in this process (others never pay for an index).
   */
  refresh(snapshot: Snapshot, force = false): void {
    if (!force && !this.inUse) return;
    if (this.current?.snapshot === snapshot || this.pending?.snapshot === snapshot) return;
    // A newer snapshot supersedes a build under way: it stops at its next pause.
    const pause = async () => {
      await this.pause();
      if (this.pending?.snapshot !== snapshot) throw new Superseded();
    };
    const done = ToolIndex.build(toolsOf(snapshot), pause, this.sliceMs).then(
      (index) => {
        this.current = { snapshot, index };
        this.embeddings?.prepare(index);
      },
      (error: unknown) => {
        if (!(error instanceof Superseded)) throw error;
      },
    );
    const entry = {
      snapshot,
      done: done.finally(() => {
        if (this.pending === entry) this.pending = undefined;
      }),
    };
    this.pending = entry;
    // Nobody may be waiting: a failed build surfaces to the next search (`for`), never as an unhandled rejection.
    entry.done.catch(() => undefined);
  }
}
