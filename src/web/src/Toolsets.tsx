/**
 * Toolsets (issue 22): named sets of tools from several servers, each a virtual server at `/mcp/t/{name}`.
 * Each tool shows its state now — a tool that was quarantined, blocked or removed upstream says so here
 * instead of the toolset failing — and a toolset is created, edited (one `server/tool` per line) or deleted.
 */
import { type FormEvent, useState } from 'react';
import { api, enc, errorText } from './api';
import { Empty, ErrorBox, Loading, Notice, useAsync, useLive } from './ui';

export interface ToolsetEntryView {
  server: string;
  tool: string;
  state: string;
  exposed?: string;
  verdict?: string;
  reason?: string;
}

export interface ToolsetView {
  name: string;
  description: string | null;
  path: string;
  available: number;
  tools: ToolsetEntryView[];
  updatedAt: string;
}

/** `server/tool` lines into entries (blank lines ignored); a line without `/` is reported. */
function entriesOf(text: string): { server: string; tool: string }[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const slash = line.indexOf('/');
      if (slash <= 0 || slash === line.length - 1) throw new Error(`"${line}" is not server/tool`);
      return { server: line.slice(0, slash), tool: line.slice(slash + 1) };
    });
}

const linesOf = (toolset: ToolsetView) => toolset.tools.map((t) => `${t.server}/${t.tool}`).join('\n');

export function Toolsets() {
  const list = useAsync(
    (signal) => api<{ toolsets: ToolsetView[]; total: number }>('/api/toolsets?limit=500', { signal }),
    [],
  );
  useLive(['server.', 'tool.'], list.reload);
  const [editing, setEditing] = useState<string | 'new'>();

  if (list.error) return <ErrorBox error={list.error} onRetry={list.reload} />;
  if (!list.data) return <Loading what="toolsets" />;
  return (
    <section aria-labelledby="toolsets-title">
      <header className="row spread">
        <h1 id="toolsets-title">Toolsets</h1>
        <button type="button" className="primary" onClick={() => setEditing('new')}>
          New toolset
        </button>
      </header>
      <p className="muted">
        A toolset is a curated set of tools from several servers, served at its own MCP endpoint. Policy stays per
        server: an agent sees only the tools its groups may use, with their verdicts.
      </p>
      {editing === 'new' && (
        <ToolsetForm
          onDone={() => {
            setEditing(undefined);
            list.reload();
          }}
        />
      )}
      {list.data.toolsets.length === 0 && editing !== 'new' ? (
        <Empty>No toolsets yet.</Empty>
      ) : (
        list.data.toolsets.map((toolset) =>
          editing === toolset.name ? (
            <ToolsetForm
              key={toolset.name}
              existing={toolset}
              onDone={() => {
                setEditing(undefined);
                list.reload();
              }}
            />
          ) : (
            <ToolsetCard
              key={toolset.name}
              toolset={toolset}
              onEdit={() => setEditing(toolset.name)}
              onChanged={list.reload}
            />
          ),
        )
      )}
    </section>
  );
}

function ToolsetCard({
  toolset,
  onEdit,
  onChanged,
}: {
  toolset: ToolsetView;
  onEdit: () => void;
  onChanged: () => void;
}) {
  const [error, setError] = useState<string>();
  const remove = async () => {
    if (!window.confirm(`Delete the toolset ${toolset.name}? Its agents lose ${toolset.path}.`)) return;
    try {
      await api(`/api/toolsets/${enc(toolset.name)}`, { method: 'DELETE' });
      onChanged();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const titleId = `toolset-${toolset.name}`;
  return (
    <article className="card" aria-labelledby={titleId} data-toolset={toolset.name}>
      <header className="row spread">
        <h3 id={titleId}>
          {toolset.name} <span className="muted mono small-text">{toolset.path}</span>
        </h3>
        <span className="tag">
          {toolset.available} of {toolset.tools.length} available
        </span>
      </header>
      {toolset.description && <p>{toolset.description}</p>}
      {error && <ErrorBox error={error} />}
      <div className="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Tool</th>
              <th scope="col">Name agents call</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {toolset.tools.map((entry) => (
              <tr key={`${entry.server}/${entry.tool}`} data-entry={`${entry.server}/${entry.tool}`}>
                <td className="mono">
                  {entry.server}/{entry.tool}
                </td>
                <td className="mono">{entry.exposed ?? '—'}</td>
                <td>
                  <span className={`tag state-${entry.state}`} data-testid="entry-state">
                    {entry.state === 'available' ? (entry.verdict ?? 'available') : entry.state.replace('_', ' ')}
                    {entry.reason ? ` (${entry.reason})` : ''}
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="row">
        <button type="button" onClick={onEdit}>
          Edit
        </button>
        <button type="button" className="danger" onClick={remove}>
          Delete
        </button>
      </div>
    </article>
  );
}

function ToolsetForm({ existing, onDone }: { existing?: ToolsetView; onDone: () => void }) {
  const [name, setName] = useState(existing?.name ?? '');
  const [description, setDescription] = useState(existing?.description ?? '');
  const [tools, setTools] = useState(existing ? linesOf(existing) : '');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const body = { description: description.trim() || null, tools: entriesOf(tools) };
      if (existing) await api(`/api/toolsets/${enc(existing.name)}`, { method: 'PUT', body });
      else await api('/api/toolsets', { method: 'POST', body: { name: name.trim(), ...body } });
      onDone();
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label={existing ? `Edit ${existing.name}` : 'New toolset'}>
      {!existing && (
        <label>
          Name (lowercase letters, digits and -)
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={32} />
        </label>
      )}
      <label>
        Description (agents read it)
        <input value={description} onChange={(e) => setDescription(e.target.value)} maxLength={2000} />
      </label>
      <label>
        Tools, one <span className="mono">server/tool</span> per line (the tool’s upstream name)
        <textarea value={tools} onChange={(e) => setTools(e.target.value)} rows={6} spellCheck={false} />
      </label>
      {error && <Notice kind="error">{error}</Notice>}
      <div className="row">
        <button type="submit" className="primary" disabled={busy}>
          {busy ? 'Saving…' : existing ? 'Save toolset' : 'Create toolset'}
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
