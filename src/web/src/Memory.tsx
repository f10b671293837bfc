/**
 * The memory bank agents share on `/mcp/memory`, read and curated through `/api/memory/…`: bank stats and
 * tags; units (search, or the paged list filtered by dataset, state and tag) with one unit's curation
 * history, edit, invalidate/restore and delete; operations (retain, consolidation, refresh) and a
 * consolidate button; directives; mental models.
 */
import { type FormEvent, useCallback, useEffect, useRef, useState } from 'react';
import {
  ApiError,
  api,
  type Directive,
  enc,
  errorText,
  type MemoryHistoryEntry,
  type MemoryOperation,
  type MemorySearchResult,
  type MemoryStats,
  type MemoryUnit,
  type MentalModel,
  type OperationStatus,
  type TokenView,
} from './api';
import {
  type AsyncState,
  Empty,
  ErrorBox,
  Loading,
  Notice,
  useAsync,
  useDebounced,
  useLive,
  useSession,
  when,
} from './ui';

/** Shown where the Memory screen would be when the memory bank is off. */
export const MEMORY_OFF_REASON =
  'The memory bank is switched off (mcp.memoryEnabled is false): /mcp/memory and /api/memory are not served. An admin can switch it on in Settings.';

const PAGE = 20;
const OP_STATUSES: OperationStatus[] = ['pending', 'processing', 'completed', 'failed', 'cancelled'];

type Flash = { kind: 'ok' | 'error' | 'info'; text: string } | undefined;

function FlashNotice({ flash }: { flash: Flash }) {
  return flash ? <Notice kind={flash.kind}>{flash.text}</Notice> : null;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** A two-step delete: the first button asks, the second (focused) does it. */
function ConfirmDelete({ what, detail, onDelete }: { what: string; detail: string; onDelete: () => Promise<void> }) {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  const ask = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  useEffect(() => {
    // Focus goes to "Yes, delete" when asked, and back to the first button on Cancel.
    if (confirming) yes.current?.focus();
    else if (asked.current) ask.current?.focus();
    asked.current = confirming;
  }, [confirming]);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await onDelete();
      setConfirming(false);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      {error && <ErrorBox error={error} />}
      {!confirming ? (
        <button type="button" className="danger small" ref={ask} onClick={() => setConfirming(true)}>
          Delete {what}…
        </button>
      ) : (
        <div role="alertdialog" aria-label={`Delete ${what}`} className="confirm">
          <p>{detail}</p>
          <div className="row">
            <button type="button" className="danger small" ref={yes} onClick={run} disabled={busy}>
              {busy ? 'Deleting…' : 'Yes, delete'}
            </button>
            <button type="button" className="small" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </div>
      )}
    </>
  );
}

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

// --- stats and tags ------------------------------------------------------------------------------------------

type TagList = { tags: { tag: string; count: number }[] };

function BankStats({
  stats,
  tags,
}: {
  stats: AsyncState<MemoryStats | undefined>;
  tags: AsyncState<TagList | undefined>;
}) {
  const s = stats.data;
  return (
    <section className="panel" aria-labelledby="memory-stats-title">
      <h2 id="memory-stats-title">Bank</h2>
      {stats.error && <ErrorBox error={stats.error} onRetry={stats.reload} />}
      {stats.loading && !s && <Loading what="the bank's counts" />}
      {s && (
        <dl className="stats" data-testid="memory-stats">
          <div>
            <dt>Valid units</dt>
            <dd>{s.nodes}</dd>
          </div>
          <div>
            <dt>Invalidated</dt>
            <dd>{s.invalidated}</dd>
          </div>
          <div>
            <dt>Documents</dt>
            <dd>{s.documents}</dd>
          </div>
          <div>
            <dt>Datasets</dt>
            <dd>{Object.keys(s.datasets).length}</dd>
          </div>
          <div>
            <dt>Directives</dt>
            <dd>{s.directives}</dd>
          </div>
          <div>
            <dt>Mental models</dt>
            <dd>{s.mental_models}</dd>
          </div>
          <div>
            <dt>Operations</dt>
            <dd>
              {Object.keys(s.operations).length === 0
                ? 'none'
                : Object.entries(s.operations)
                    .map(([status, n]) => `${n} ${status}`)
                    .join(', ')}
            </dd>
          </div>
        </dl>
      )}
      {s && Object.keys(s.datasets).length > 0 && (
        <p className="small-text muted" data-testid="memory-datasets">
          {Object.entries(s.datasets)
            .map(([name, d]) => `${name}: ${d.valid} valid, ${d.invalidated} invalidated`)
            .join(' · ')}
        </p>
      )}
      <h3>Tags</h3>
      {tags.error && <ErrorBox error={tags.error} onRetry={tags.reload} />}
      {tags.loading && !tags.data && <Loading what="tags" />}
      {tags.data && tags.data.tags.length === 0 && <p className="muted">No tags on valid units yet.</p>}
      {tags.data && tags.data.tags.length > 0 && (
        <ul className="tag-list" aria-label="Tags in use">
          {tags.data.tags.map((t) => (
            <li key={t.tag} className="tag">
              {t.tag} <span className="muted">×{t.count}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** Token names by id (admins may list tokens; for operators the source shows as its token id). */
function useTokenNames(version: number): Map<string, string> {
  const { role } = useSession();
  const tokens = useAsync(
    (signal) =>
      role === 'admin'
        ? api<{ tokens: TokenView[] }>('/api/tokens', { signal }).then((t) => t.tokens)
        : Promise.resolve([]),
    [role, version],
  );
  return new Map((tokens.data ?? []).map((t) => [t.id, t.name]));
}

/** Who wrote a unit: the token's name when known, its id otherwise. */
function Source({ id, names }: { id: string; names: Map<string, string> }) {
  const name = names.get(id);
  return name ? <span title={`token ${id}`}>{name}</span> : <span className="mono">{id}</span>;
}

// --- units ---------------------------------------------------------------------------------------------------

type Row = Pick<MemoryUnit, 'id' | 'text' | 'dataset' | 'source' | 'fact_type' | 'timestamp'> & {
  state?: MemoryUnit['state'];
  score?: number;
};

function Units({
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
          {!applied && rows && total > PAGE && (
            <div className="row pager">
              <button
                type="button"
                className="small"
                disabled={offset === 0}
                onClick={() => setOffset(Math.max(0, offset - PAGE))}
              >
                Previous
              </button>
              <span className="muted">
                {offset + 1}–{Math.min(offset + PAGE, total)} of {total}
              </span>
              <button
                type="button"
                className="small"
                disabled={offset + PAGE >= total}
                onClick={() => setOffset(offset + PAGE)}
              >
                Next
              </button>
            </div>
          )}
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

function describeChange(entry: MemoryHistoryEntry): string {
  const before = (entry.before ?? {}) as Record<string, unknown>;
  const after = (entry.after ?? {}) as Record<string, unknown>;
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter(
    (k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]) && k !== 'updated_at',
  );
  if (keys.length === 0) return '';
  return keys
    .slice(0, 4)
    .map((k) => `${k}: ${short(before[k])} → ${short(after[k])}`)
    .join('; ');
}

function short(value: unknown): string {
  if (value === undefined || value === null) return '—';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function UnitDetail({
  id,
  names,
  onChanged,
  onClose,
  onGone,
}: {
  id: string;
  names: Map<string, string>;
  onChanged: () => void;
  onClose: () => void;
  onGone: () => void;
}) {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => ref.current?.focus(), []);
  const path = `/api/memory/units/${enc(id)}`;
  const detail = useAsync(
    (signal) => api<{ unit: MemoryUnit; history: MemoryHistoryEntry[] }>(path, { signal }),
    [path],
  );
  const [text, setText] = useState<string>();
  const [flash, setFlash] = useState<Flash>();
  const [busy, setBusy] = useState(false);
  const unit = detail.data?.unit;

  const curate = async (body: Record<string, unknown>, done: string) => {
    setBusy(true);
    setFlash(undefined);
    try {
      await api(path, { method: 'PATCH', body });
      setFlash({ kind: 'ok', text: done });
      setText(undefined);
      detail.reload();
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setBusy(false);
    }
  };
  const saveText = (event: FormEvent) => {
    event.preventDefault();
    if (text?.trim() && text.trim() !== unit?.text)
      void curate({ text: text.trim() }, 'Text saved; the old text is kept in the history.');
  };

  return (
    <section id="unit-detail" className="unit-detail" aria-labelledby="unit-detail-title" ref={ref} tabIndex={-1}>
      <div className="row spread">
        <h3 id="unit-detail-title">Unit {id}</h3>
        <button type="button" className="small" onClick={onClose}>
          Close<span className="sr-only"> unit {id}</span>
        </button>
      </div>
      {detail.error && <ErrorBox error={detail.error} onRetry={detail.reload} />}
      {detail.loading && !detail.data && <Loading what="the unit and its history" />}
      {unit && detail.data && (
        <>
          <dl className="facts">
            <dt>Id</dt>
            <dd className="mono">{unit.id}</dd>
            <dt>State</dt>
            <dd data-testid="unit-state">{unit.state}</dd>
            <dt>Dataset</dt>
            <dd>{unit.dataset}</dd>
            <dt>Source</dt>
            <dd>
              <Source id={unit.source} names={names} />
            </dd>
            <dt>Fact type</dt>
            <dd>{unit.fact_type}</dd>
            {unit.context && (
              <>
                <dt>Context</dt>
                <dd>{unit.context}</dd>
              </>
            )}
            <dt>Entities</dt>
            <dd>{unit.entities.length ? unit.entities.join(', ') : '—'}</dd>
            <dt>Tags</dt>
            <dd>{unit.tags.length ? unit.tags.join(', ') : '—'}</dd>
            <dt>Added</dt>
            <dd>{when(unit.timestamp)}</dd>
            <dt>Updated</dt>
            <dd>{when(unit.updated_at)}</dd>
          </dl>
          <FlashNotice flash={flash} />
          <form className="stack" onSubmit={saveText}>
            <label>
              Text
              <textarea rows={3} value={text ?? unit.text} onChange={(e) => setText(e.target.value)} />
            </label>
            <div className="row wrap">
              <button
                type="submit"
                className="primary small"
                disabled={busy || text === undefined || !text.trim() || text.trim() === unit.text}
              >
                Save text
              </button>
              {unit.state === 'valid' ? (
                <button
                  type="button"
                  className="small"
                  disabled={busy}
                  onClick={() =>
                    curate(
                      { state: 'invalidated' },
                      'Invalidated: agents no longer find it; it stays in the bank and its history.',
                    )
                  }
                >
                  Invalidate
                </button>
              ) : (
                <button
                  type="button"
                  className="small"
                  disabled={busy}
                  onClick={() => curate({ state: 'valid' }, 'Restored: agents find it again.')}
                >
                  Restore
                </button>
              )}
              <ConfirmDelete
                what="this unit"
                detail="Delete this unit for good? Unlike invalidating, it cannot be restored; its history keeps one line saying who deleted it."
                onDelete={async () => {
                  await api(path, { method: 'DELETE' });
                  onGone();
                }}
              />
            </div>
            <p className="muted small-text">
              The curation API takes no reason: each change is recorded with who made it and when.
            </p>
          </form>
          <h4>History</h4>
          {detail.data.history.length === 0 ? (
            <p className="muted">No curation yet.</p>
          ) : (
            <ol className="events history" aria-label="Curation history">
              {detail.data.history.map((h, i) => (
                // biome-ignore lint/suspicious/noArrayIndexKey: history lines have no id and never reorder
                <li key={i}>
                  <span className="tag">{h.action}</span> {h.actor?.name ?? h.actor?.id ?? 'system'}{' '}
                  <span className="muted small-text">{when(h.at)}</span>
                  {describeChange(h) && <div className="small-text break">{describeChange(h)}</div>}
                </li>
              ))}
            </ol>
          )}
        </>
      )}
    </section>
  );
}

// --- operations ----------------------------------------------------------------------------------------------

function opOutcome(op: MemoryOperation): string {
  if (op.error) return `${op.error.code}: ${op.error.message}`;
  const parts: string[] = [];
  if (op.kind === 'retain' && op.facts_extracted !== undefined)
    parts.push(plural(op.facts_extracted, 'fact') + ' extracted');
  if (op.kind === 'consolidation' && op.deduplicated !== undefined)
    parts.push(`${plural(op.deduplicated, 'duplicate')} invalidated`);
  if (op.document_fact_count !== undefined) parts.push(`document has ${plural(op.document_fact_count, 'fact')}`);
  if (op.notice) parts.push(op.notice);
  return parts.join(' · ') || '—';
}

function Operations({
  version,
  onChanged,
  stats,
}: {
  version: number;
  onChanged: () => void;
  stats: MemoryStats | undefined;
}) {
  const [status, setStatus] = useState('');
  const [offset, setOffset] = useState(0);
  const [target, setTarget] = useState('shared');
  const [flash, setFlash] = useState<Flash>();
  const [latest, setLatest] = useState<string>();
  const [busy, setBusy] = useState(false);
  const params = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
  if (status) params.set('status', status);
  const qs = params.toString();
  const ops = useAsync(
    (signal) => api<{ operations: MemoryOperation[]; total: number }>(`/api/memory/operations?${qs}`, { signal }),
    [qs, version],
  );
  // Retain and refresh run in the background: while one is pending or processing, look again every second.
  const running = ops.data?.operations.some((o) => o.status === 'pending' || o.status === 'processing');
  // biome-ignore lint/correctness/useExhaustiveDependencies: ops.data re-arms the timer after each look
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(onChanged, 1000);
    return () => clearTimeout(timer);
  }, [running, onChanged, ops.data]);

  const consolidate = async () => {
    setBusy(true);
    setFlash(undefined);
    try {
      const answer = await api<{ operation_id: string; deduplicated: number }>('/api/memory/consolidate', {
        method: 'POST',
        body: { dataset: target },
      });
      setLatest(answer.operation_id);
      setFlash({
        kind: 'ok',
        text: `Consolidated ${target}: operation ${answer.operation_id}, ${plural(answer.deduplicated, 'duplicate')} invalidated.`,
      });
      setStatus('');
      setOffset(0);
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setBusy(false);
    }
  };

  const datasets = Object.keys(stats?.datasets ?? {});
  if (!datasets.includes('shared')) datasets.unshift('shared');
  const rows = ops.data?.operations;

  return (
    <section className="panel" aria-labelledby="memory-ops-title">
      <div className="row spread">
        <h2 id="memory-ops-title">Operations</h2>
        <span className="muted">{ops.data ? plural(ops.data.total, 'operation') : ''}</span>
      </div>
      <div className="filters">
        <label>
          Status
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.target.value);
              setOffset(0);
            }}
          >
            <option value="">any</option>
            {OP_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Dataset to consolidate
          <select value={target} onChange={(e) => setTarget(e.target.value)}>
            {datasets.map((d) => (
              <option key={d} value={d}>
                {d}
              </option>
            ))}
          </select>
        </label>
        <button type="button" onClick={consolidate} disabled={busy}>
          {busy ? 'Consolidating…' : 'Consolidate'}
        </button>
      </div>
      <p className="muted small-text">
        Consolidation merges exact and near-duplicate facts of one dataset: duplicates are invalidated, not deleted.
      </p>
      <FlashNotice flash={flash} />
      {ops.error && <ErrorBox error={ops.error} onRetry={ops.reload} />}
      {ops.loading && !rows && <Loading what="operations" />}
      {rows && rows.length === 0 && (
        <Empty>
          {status ? `No ${status} operations.` : 'No operations yet: they appear when agents add memories.'}
        </Empty>
      )}
      {rows && rows.length > 0 && (
        <div className="table-wrap">
          <table className="operations">
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Kind</th>
                <th scope="col">Status</th>
                <th scope="col">Dataset</th>
                <th scope="col">Requester</th>
                <th scope="col">Outcome</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((op) => (
                <tr key={op.id} data-operation={op.id} className={op.id === latest ? 'highlight' : undefined}>
                  <td className="small-text">
                    {when(op.created_at)}
                    <div className="mono muted">{op.id}</div>
                  </td>
                  <td data-label="Kind">{op.kind}</td>
                  <td data-label="Status">
                    <span className={`tag status-${op.status}`}>{op.status}</span>
                  </td>
                  <td data-label="Dataset">{op.dataset ?? '—'}</td>
                  <td data-label="Requester">{op.requester.name}</td>
                  <td data-label="Outcome" className="small-text">
                    {opOutcome(op)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {ops.data && ops.data.total > PAGE && (
        <div className="row pager">
          <button
            type="button"
            className="small"
            disabled={offset === 0}
            onClick={() => setOffset(Math.max(0, offset - PAGE))}
          >
            Previous
          </button>
          <span className="muted">
            {offset + 1}–{Math.min(offset + PAGE, ops.data.total)} of {ops.data.total}
          </span>
          <button
            type="button"
            className="small"
            disabled={offset + PAGE >= ops.data.total}
            onClick={() => setOffset(offset + PAGE)}
          >
            Next
          </button>
        </div>
      )}
    </section>
  );
}

// --- directives ----------------------------------------------------------------------------------------------

function tagList(text: string): string[] {
  return text
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
}

function DirectiveForm({
  initial,
  submitLabel,
  onSubmit,
  onCancel,
}: {
  initial?: Directive;
  submitLabel: string;
  onSubmit: (body: Record<string, unknown>) => Promise<void>;
  onCancel?: () => void;
}) {
  const [name, setName] = useState(initial?.name ?? '');
  const [content, setContent] = useState(initial?.content ?? '');
  const [priority, setPriority] = useState(String(initial?.priority ?? 0));
  const [active, setActive] = useState(initial?.is_active ?? true);
  const [tags, setTags] = useState(initial?.tags.join(', ') ?? '');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await onSubmit({
        name: name.trim(),
        content: content.trim(),
        priority: Number(priority) || 0,
        is_active: active,
        tags: tagList(tags),
      });
      if (!initial) {
        setName('');
        setContent('');
        setPriority('0');
        setTags('');
      }
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="stack" onSubmit={submit} aria-label={initial ? `Edit directive ${initial.name}` : 'New directive'}>
      {error && <ErrorBox error={error} />}
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />
      </label>
      <label>
        Instruction
        <textarea rows={2} value={content} onChange={(e) => setContent(e.target.value)} required maxLength={8000} />
      </label>
      <div className="row wrap">
        <label>
          Priority
          <input type="number" min={-100} max={100} value={priority} onChange={(e) => setPriority(e.target.value)} />
        </label>
        <label className="grow">
          Tags
          <input value={tags} onChange={(e) => setTags(e.target.value)} placeholder="comma separated" />
        </label>
      </div>
      <label className="inline">
        <input type="checkbox" checked={active} onChange={(e) => setActive(e.target.checked)} /> Active (injected into
        prompts)
      </label>
      <div className="row">
        <button type="submit" className="primary small" disabled={busy || !name.trim() || !content.trim()}>
          {submitLabel}
        </button>
        {onCancel && (
          <button type="button" className="small" onClick={onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

function Directives() {
  const list = useAsync(
    (signal) => api<{ directives: Directive[]; total: number }>('/api/memory/directives?limit=100', { signal }),
    [],
  );
  const [editing, setEditing] = useState<string>();
  const [flash, setFlash] = useState<Flash>();
  const rows = list.data?.directives;
  return (
    <section className="panel" aria-labelledby="memory-directives-title">
      <h2 id="memory-directives-title">Directives</h2>
      <p className="muted small-text">Standing instructions injected into prompts, highest priority first.</p>
      <FlashNotice flash={flash} />
      {list.error && <ErrorBox error={list.error} onRetry={list.reload} />}
      {list.loading && !rows && <Loading what="directives" />}
      {rows && rows.length === 0 && <Empty>No directives yet.</Empty>}
      {rows && rows.length > 0 && (
        <ul className="cards directives" aria-label="Directives">
          {rows.map((d) => (
            <li key={d.id} className="card" data-directive={d.id}>
              {editing === d.id ? (
                <DirectiveForm
                  initial={d}
                  submitLabel="Save directive"
                  onCancel={() => setEditing(undefined)}
                  onSubmit={async (body) => {
                    await api(`/api/memory/directives/${enc(d.id)}`, { method: 'PATCH', body });
                    setEditing(undefined);
                    setFlash({ kind: 'ok', text: `Saved directive “${String(body.name)}”.` });
                    list.reload();
                  }}
                />
              ) : (
                <>
                  <div className="row spread">
                    <strong>{d.name}</strong>
                    <span className="row">
                      <span className={`tag ${d.is_active ? 'status-approved' : ''}`}>
                        {d.is_active ? 'active' : 'inactive'}
                      </span>
                      <span className="tag">priority {d.priority}</span>
                    </span>
                  </div>
                  <p className="break">{d.content}</p>
                  {d.tags.length > 0 && <p className="small-text muted">Tags: {d.tags.join(', ')}</p>}
                  <div className="row wrap">
                    <button type="button" className="small" onClick={() => setEditing(d.id)}>
                      Edit<span className="sr-only"> directive {d.name}</span>
                    </button>
                    <ConfirmDelete
                      what="directive"
                      detail={`Delete the directive “${d.name}”? Agents stop receiving it.`}
                      onDelete={async () => {
                        await api(`/api/memory/directives/${enc(d.id)}`, { method: 'DELETE' });
                        setFlash({ kind: 'ok', text: `Deleted directive “${d.name}”.` });
                        list.reload();
                      }}
                    />
                  </div>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      <details className="add-form">
        <summary>New directive</summary>
        <DirectiveForm
          submitLabel="Create directive"
          onSubmit={async (body) => {
            const created = await api<Directive>('/api/memory/directives', { method: 'POST', body });
            setFlash({ kind: 'ok', text: `Created directive “${created.name}”.` });
            list.reload();
          }}
        />
      </details>
    </section>
  );
}

// --- mental models -------------------------------------------------------------------------------------------

/** Says in words what a 404 "no such route" means for a mental-model action this gateway's REST API lacks. */
function notOffered(error: unknown, action: string, tool: string): never {
  if (error instanceof ApiError && error.noSuchRoute) {
    throw new Error(
      `This gateway's REST API does not offer to ${action} mental models (it answered 404). Agents can, with ${tool} on /mcp/memory.`,
    );
  }
  throw error;
}

function refreshText(answer: Record<string, unknown>): Flash {
  if (answer.status === 'unsupported') {
    return {
      kind: 'info',
      text: `Not refreshed: ${typeof answer.reason === 'string' ? answer.reason : 'this gateway has no language-model endpoint (GATEHOUSE_LLM_URL), and mental model content needs one.'}`,
    };
  }
  return { kind: 'ok', text: `Refresh queued as operation ${String(answer.operation_id ?? '—')}.` };
}

function MentalModels() {
  const list = useAsync(
    (signal) => api<{ mental_models: MentalModel[]; total: number }>('/api/memory/mental-models?limit=100', { signal }),
    [],
  );
  const [flash, setFlash] = useState<Flash>();
  const [name, setName] = useState('');
  const [query, setQuery] = useState('');
  const [busy, setBusy] = useState<string>();
  const rows = list.data?.mental_models;

  const act = async (label: string, run: () => Promise<Flash>) => {
    setBusy(label);
    setFlash(undefined);
    try {
      setFlash(await run());
      list.reload();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setBusy(undefined);
    }
  };

  const create = (event: FormEvent) => {
    event.preventDefault();
    void act('create', async () => {
      const answer = await api<Record<string, unknown>>('/api/memory/mental-models', {
        method: 'POST',
        body: { name: name.trim(), source_query: query.trim() },
      }).catch((error: unknown) => notOffered(error, 'create', 'memory_mental_model_create'));
      setName('');
      setQuery('');
      const created = `Created mental model ${String(answer.mental_model_id ?? name)}.`;
      return answer.content_status === 'unsupported'
        ? {
            kind: 'info',
            text: `${created} It has no content yet: ${String(answer.reason ?? 'no language-model endpoint is configured.')}`,
          }
        : { kind: 'ok', text: created };
    });
  };

  return (
    <section className="panel" aria-labelledby="memory-models-title">
      <h2 id="memory-models-title">Mental models</h2>
      <p className="muted small-text">
        Summaries the bank keeps current by reflecting over shared memories; generating their content needs a
        language-model endpoint.
      </p>
      <FlashNotice flash={flash} />
      {list.error && <ErrorBox error={list.error} onRetry={list.reload} />}
      {list.loading && !rows && <Loading what="mental models" />}
      {rows && rows.length === 0 && <Empty>No mental models yet.</Empty>}
      {rows && rows.length > 0 && (
        <ul className="cards" aria-label="Mental models">
          {rows.map((m) => (
            <li key={m.id} className="card" data-model={m.id}>
              <div className="row spread">
                <strong>{m.name}</strong>
                <span className={`tag ${m.stale ? 'verdict-gated' : 'status-approved'}`}>
                  {m.stale ? 'stale' : 'fresh'}
                </span>
              </div>
              {m.source_query && (
                <p className="small-text">
                  <span className="muted">Question:</span> {m.source_query}
                </p>
              )}
              {m.content ? (
                <p className="break">{m.content}</p>
              ) : (
                <p className="muted">No content yet{m.refreshed_at ? '' : ': it has never been refreshed'}.</p>
              )}
              <p className="small-text muted">Refreshed: {m.refreshed_at ? when(m.refreshed_at) : 'never'}</p>
              <div className="row wrap">
                <button
                  type="button"
                  className="small"
                  disabled={busy !== undefined}
                  onClick={() =>
                    act(`refresh-${m.id}`, async () =>
                      refreshText(
                        await api<Record<string, unknown>>(`/api/memory/mental-models/${enc(m.id)}/refresh`, {
                          method: 'POST',
                        }).catch((error: unknown) => notOffered(error, 'refresh', 'memory_mental_model_refresh')),
                      ),
                    )
                  }
                >
                  {busy === `refresh-${m.id}` ? 'Refreshing…' : 'Refresh'}
                  <span className="sr-only"> mental model {m.name}</span>
                </button>
                <ConfirmDelete
                  what="mental model"
                  detail={`Delete the mental model “${m.name}”?`}
                  onDelete={async () => {
                    await api(`/api/memory/mental-models/${enc(m.id)}`, { method: 'DELETE' });
                    setFlash({ kind: 'ok', text: `Deleted mental model “${m.name}”.` });
                    list.reload();
                  }}
                />
              </div>
            </li>
          ))}
        </ul>
      )}
      <details className="add-form">
        <summary>New mental model</summary>
        <form className="stack" onSubmit={create} aria-label="New mental model">
          <label>
            Name
            <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />
          </label>
          <label>
            Question it answers
            <textarea rows={2} value={query} onChange={(e) => setQuery(e.target.value)} required />
          </label>
          <div className="row">
            <button
              type="submit"
              className="primary small"
              disabled={busy !== undefined || !name.trim() || !query.trim()}
            >
              Create mental model
            </button>
          </div>
        </form>
      </details>
    </section>
  );
}
