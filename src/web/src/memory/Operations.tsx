/** Memory operations (retain, consolidation, refresh): the paged list, polled while one runs, and Consolidate. */
import { useEffect, useState } from 'react';
import { api, errorText, type MemoryOperation, type MemoryStats, type OperationStatus } from '../api';
import { Empty, ErrorBox, Loading, useAsync, when } from '../ui';
import { type Flash, FlashNotice, PAGE, Pager, plural } from './shared';

const OP_STATUSES: OperationStatus[] = ['pending', 'processing', 'completed', 'failed', 'cancelled'];

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

export function Operations({
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
      {ops.data && ops.data.total > PAGE && <Pager offset={offset} total={ops.data.total} onOffset={setOffset} />}
    </section>
  );
}
