/** One memory unit: its facts, text edit, invalidate/restore, delete and curation history. */
import { type FormEvent, useEffect, useRef, useState } from 'react';
import { api, enc, errorText, type MemoryHistoryEntry, type MemoryUnit } from '../api';
import { ErrorBox, Loading, useAsync, when } from '../ui';
import { Source } from './Source';
import { ConfirmDelete, type Flash, FlashNotice } from './shared';

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

export function UnitDetail({
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
