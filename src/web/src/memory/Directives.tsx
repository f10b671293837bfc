/** Directives: standing instructions injected into prompts; list, create, edit and delete. */
import { type FormEvent, useState } from 'react';
import { api, type Directive, enc, errorText } from '../api';
import { Empty, ErrorBox, Loading, useAsync } from '../ui';
import { ConfirmDelete, type Flash, FlashNotice } from './shared';

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

export function Directives() {
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
