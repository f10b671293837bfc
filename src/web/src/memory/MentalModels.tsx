/** Mental models: summaries the bank keeps current; list, create, refresh and delete. */
import { type FormEvent, useState } from 'react';
import { ApiError, api, enc, errorText, type MentalModel } from '../api';
import { Empty, ErrorBox, Loading, useAsync, when } from '../ui';
import { ConfirmDelete, type Flash, FlashNotice } from './shared';

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

export function MentalModels() {
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
