/** The Memory screen: bank agents share on `/mcp/memory`, read and curated through `/api/memory/…`. */
import { useCallback, useState } from 'react';
import { api, type MemoryStats } from '../api';
import { Notice, useAsync, useDebounced, useLive } from '../ui';
import { BankStats, type TagList } from './BankStats';
import { Directives } from './Directives';
import { MentalModels } from './MentalModels';
import { Operations } from './Operations';
import { Units } from './Units';

/** Shown where the Memory screen would be when the memory bank is off. */
export const MEMORY_OFF_REASON =
  'The memory bank is switched off (mcp.memoryEnabled is false): /mcp/memory and /api/memory are not served. An admin can switch it on in Settings.';

export function Memory({ enabled }: { enabled: boolean }) {
  const [version, setVersion] = useState(0);
  const changed = useCallback(() => setVersion((v) => v + 1), []);
  // An agent's memory call is audited as `tool.called` on the memory surface (batched, within ~100 ms);
  // an approved memory delete arrives as `approval.decided`. Either way, look again shortly after.
  const refresh = useDebounced(changed, 400);
  useLive(['tool.called', 'approval.decided'], (event) => {
    if (event.type !== 'tool.called' || event.data.surface === 'memory') refresh();
  });
  const stats = useAsync(
    (signal) => (enabled ? api<MemoryStats>('/api/memory/stats', { signal }) : Promise.resolve(undefined)),
    [enabled, version],
  );
  const tags = useAsync(
    (signal) => (enabled ? api<TagList>('/api/memory/tags', { signal }) : Promise.resolve(undefined)),
    [enabled, version],
  );
  if (!enabled) {
    return (
      <section aria-labelledby="memory-title">
        <div className="section-head">
          <h1 id="memory-title">Memory</h1>
        </div>
        <Notice kind="info">{MEMORY_OFF_REASON}</Notice>
      </section>
    );
  }
  return (
    <section aria-labelledby="memory-title" className="memory">
      <div className="section-head">
        <h1 id="memory-title">Memory</h1>
        <span className="muted">the bank agents share on /mcp/memory</span>
      </div>
      <BankStats stats={stats} tags={tags} />
      <Units version={version} onChanged={changed} stats={stats.data} tags={tags.data} />
      <Operations version={version} onChanged={changed} stats={stats.data} />
      <div className="two-col memory-cols">
        <Directives />
        <MentalModels />
      </div>
    </section>
  );
}
