/**
 * Connect a client: pick Claude Desktop, Claude Code, Cursor, VS Code or LM Studio and copy the exact config entry
 * that points it at this gateway's hub (`GET /api/connect/:client`, the same writers as `gatehouse connect`).
 * An admin may create an agent token for the client (`POST …/token`): shown once, and written into the entry for
 * the clients that hold it in their file.
 */
import { type FormEvent, useState } from 'react';
import { api, errorText } from './api';
import { ErrorBox, Loading, useAsync, useSession } from './ui';

const CLIENTS = [
  { id: 'claude-desktop', label: 'Claude Desktop' },
  { id: 'claude-code', label: 'Claude Code' },
  { id: 'cursor', label: 'Cursor' },
  { id: 'vscode', label: 'VS Code' },
  { id: 'lmstudio', label: 'LM Studio' },
] as const;

interface Wiring {
  client: string;
  label: string;
  usualPath: string;
  secret: 'reference' | 'clear';
  hubUrl: string;
  snippet: string;
  note: string;
  token?: string;
  tokenId?: string;
}

export function CopyButton({ text }: { text: string }) {
  const [copied, setCopied] = useState<string>();
  const copy = () =>
    navigator.clipboard.writeText(text).then(
      () => setCopied('Copied'),
      () => setCopied('Copy failed: select the text and copy it'),
    );
  return (
    <span>
      <button type="button" className="small" onClick={copy}>
        Copy
      </button>{' '}
      {copied && (
        <span role="status" className="muted small-text">
          {copied}
        </span>
      )}
    </span>
  );
}

export function Connect() {
  const { role } = useSession();
  const [client, setClient] = useState<string>('claude-desktop');
  const [name, setName] = useState('gatehouse');
  const [tokenName, setTokenName] = useState('');
  const [created, setCreated] = useState<Wiring>();
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string>();
  const wiring = useAsync(
    (signal) => api<Wiring>(`/api/connect/${client}?name=${encodeURIComponent(name || 'gatehouse')}`, { signal }),
    [client, name],
  );
  const shown = created?.client === client ? created : wiring.data;

  const createToken = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setFailure(undefined);
    try {
      setCreated(
        await api<Wiring>(`/api/connect/${client}/token`, {
          method: 'POST',
          body: { name: name || 'gatehouse', tokenName: tokenName.trim() },
        }),
      );
    } catch (error) {
      setFailure(errorText(error));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="connect-title">
      <div className="section-head">
        <h1 id="connect-title">Connect a client</h1>
      </div>
      <div className="row">
        <label>
          Client{' '}
          <select
            aria-label="Client"
            value={client}
            onChange={(e) => {
              setClient(e.target.value);
              setCreated(undefined);
            }}
          >
            {CLIENTS.map((c) => (
              <option key={c.id} value={c.id}>
                {c.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Entry name{' '}
          <input aria-label="Entry name" value={name} onChange={(e) => setName(e.target.value)} spellCheck={false} />
        </label>
      </div>
      {wiring.error && <ErrorBox error={wiring.error} onRetry={wiring.reload} />}
      {wiring.loading && !shown && <Loading what="the entry" />}
      {shown && (
        <>
          <p>
            Hub URL: <code data-testid="hub-url">{shown.hubUrl}</code>
          </p>
          <p className="muted">
            Add this to {shown.label}'s config, usually <code>{shown.usualPath}</code>, or run{' '}
            <code>
              gatehouse connect --client {shown.client} --write {'<path>'}
            </code>
            .
          </p>
          <pre className="mono" data-testid="connect-snippet">
            {shown.snippet}
          </pre>
          <CopyButton text={shown.snippet} />
          <p className="muted small-text" data-testid="connect-note" style={{ whiteSpace: 'pre-wrap' }}>
            {shown.note}
          </p>
        </>
      )}
      <h2>A token for this client</h2>
      {role === 'admin' ? (
        <form onSubmit={createToken} className="row">
          <label>
            Token name{' '}
            <input
              aria-label="Token name"
              value={tokenName}
              onChange={(e) => setTokenName(e.target.value)}
              placeholder={`${client}-laptop`}
              required
            />
          </label>
          <button type="submit" className="primary" disabled={busy}>
            {busy ? 'Creating…' : 'Create agent token'}
          </button>
        </form>
      ) : (
        <p className="muted">Only an admin can create tokens.</p>
      )}
      {failure && (
        <p className="notice notice-error" role="alert">
          {failure}
        </p>
      )}
      {created?.token && created.client === client && (
        <p className="notice" role="status" data-testid="created-token">
          Agent token {created.tokenId} created — shown once, keep it safe: <code>{created.token}</code>
        </p>
      )}
    </section>
  );
}
