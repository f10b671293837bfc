/** Memory units: full-text search or the paged list filtered by dataset, state and tag, with one unit open. */
import { useState } from 'react';
import { api, type MemorySearchResult, type MemoryStats, type MemoryUnit } from '../api';
import { Empty, ErrorBox, Loading, useAsync, useDebounced, when } from '../ui';
import type { TagList } from './BankStats';
import { Source, useTokenNames } from './Source';
import { PAGE, Pager, plural } from './shared';
import { UnitDetail } from './UnitDetail';

type Row = Pick<MemoryUnit, 'id' | 'text' | 'dataset' | 'source' | 'fact_type' | 'timestamp'> & {
  state?: MemoryUnit['state'];
  score?: number;
};

export function Units({
  version,
  onChanged,
  stats,
  tags,
}: {
  version: number;
  onChanged: () => void;
  stats: MemoryStats | undefined;
  tags: TagList | undefined;
}) {
  const [query, setQuery] = useState('');
  const [applied, setApplied] = useState('');
  const [dataset, setDataset] = useState('');
  const [state, setState] = useState<'valid' | 'invalidated' | 'all'>('valid');
  const [tag, setTag] = useState('');
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState<string>();
  const applyQuery = useDebounced(() => setApplied(query.trim()), 300);

  const params = new URLSearchParams();
  if (dataset) params.set('dataset', dataset);
  if (applied) {
    params.set('query', applied);
    params.set('limit', '50');
  } else {
    params.set('state', state);
    if (tag) params.set('tag', tag);
    params.set('limit', String(PAGE));
    params.set('offset', String(offset));
  }
  const qs = params.toString();
  const list = useAsync(
    async (signal): Promise<{ rows: Row[]; total: number }> => {
      if (applied) {
        const found = await api<{ results: MemorySearchResult[]; total: number }>(`/api/memory/search?${qs}`, {
          signal,
        });
        return { rows: found.results, total: found.total };
      }
      const page = await api<{ units: MemoryUnit[]; total: number }>(`/api/memory/units?${qs}`, { signal });
      return { rows: page.units, total: page.total };
    },
    [qs, version],
  );

  const names = useTokenNames(version);
  const rows = list.data?.rows;
  const total = list.data?.total ?? 0;
  const resetPage = () => setOffset(0);

  return (
    <section className="panel" aria-labelledby="memory-units-title">
      <div className="row spread">
        <h2 id="memory-units-title">Units</h2>
        <span className="muted" data-testid="units-count">
          {list.data ? (applied ? `${plural(total, 'match', 'matches')}` : plural(total, 'unit')) : ''}
        </span>
      </div>
      <search className="filters" aria-label="Memory units">
        <label className="grow">
          Search
          <input
            type="search"
            value={query}
            placeholder="words to look for (full-text, newest ranked higher)"
            onChange={(e) => {
              setQuery(e.target.value);
              applyQuery();
            }}
          />
        </label>
        <label>
          Dataset
          <select
            value={dataset}
            onChange={(e) => {
              setDataset(e.target.value);
              resetPage();
            }}
          >
            <option value="">all</option>
            {Object.keys(stats?.datasets ?? {}).map((d) => (
              <option key={d} value={d}>
                {d}
              </option>
            ))}
          </select>
        </label>
        <label>
          State
          <select
            value={state}
            disabled={Boolean(applied)}
            title={applied ? 'Search looks at valid units only' : undefined}
            onChange={(e) => {
              setState(e.target.value as typeof state);
              resetPage();
            }}
          >
            <option value="valid">valid</option>
            <option value="invalidated">invalidated</option>
            <option value="all">all</option>
          </select>
        </label>
        <label>
          Tag
          <select
            value={tag}
            disabled={Boolean(applied)}
            onChange={(e) => {
              setTag(e.target.value);
              resetPage();
            }}
          >
            <option value="">any</option>
            {(tags?.tags ?? []).map((t) => (
              <option key={t.tag} value={t.tag}>
                {t.tag}
              </option>
            ))}
          </select>
        </label>
      </search>
      {applied && (
        <p className="muted small-text">Search covers valid units; the state and tag filters apply to the list.</p>
      )}
      <div className={open ? 'units-layout open' : 'units-layout'}>
        <div className="units-main">
          {list.error && <ErrorBox error={list.error} onRetry={list.reload} />}
          {list.loading && !rows && <Loading what="memory units" />}
          {rows && rows.length === 0 && (
            <Empty>
              {applied
                ? `No unit matches “${applied}”.`
                : dataset || tag || state !== 'valid'
                  ? 'No units match these filters.'
                  : 'The bank is empty: no agent has added a memory yet. Agents write with memory_add on /mcp/memory.'}
            </Empty>
          )}
          {rows && rows.length > 0 && (
            <ul className="units" aria-label={applied ? 'Search results' : 'Memory units'}>
              {rows.map((u) => (
                <li
                  key={u.id}
                  data-unit={u.id}
                  data-state={u.state ?? 'valid'}
                  className={open === u.id ? 'unit open' : 'unit'}
                >
                  <p className="unit-text">{u.text}</p>
                  <div className="row wrap unit-meta small-text">
                    <span className="tag" title="dataset">
                      {u.dataset}
                    </span>
                    <span className="tag" title="fact type">
                      {u.fact_type}
                    </span>
                    {u.state && <span className={`tag state-${u.state}`}>{u.state}</span>}
                    {u.score !== undefined && <span className="muted">score {u.score.toFixed(3)}</span>}
                    <span className="muted">
                      from <Source id={u.source} names={names} />
                    </span>
                    <span className="muted">{when(u.timestamp)}</span>
                    <button
                      type="button"
                      className="small"
                      aria-expanded={open === u.id}
                      aria-controls={open === u.id ? 'unit-detail' : undefined}
                      onClick={() => setOpen(open === u.id ? undefined : u.id)}
                    >
                      {open === u.id ? 'Close' : 'Open'}
                      <span className="sr-only"> unit {u.id}</span>
                    </button>
                  </div>
                </li>
              ))}
            </ul>
          )}
          {!applied && rows && total > PAGE && <Pager offset={offset} total={total} onOffset={setOffset} />}
        </div>
        {open && (
          <UnitDetail
            key={open}
            id={open}
            names={names}
            onChanged={onChanged}
            onClose={() => setOpen(undefined)}
            onGone={() => {
              setOpen(undefined);
              onChanged();
            }}
          />
        )}
      </div>
    </section>
  );
}
