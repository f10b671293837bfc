/** The audit stream, live: every call and control-plane change, filterable by client, server and verdict. */
import { useState } from 'react';
import { type AuditEvent, api } from './api';
import { Empty, ErrorBox, Loading, useAsync, useDebounced, useLive, when } from './ui';

const VERDICTS = ['allow', 'gated', 'blocked', 'unknown_server', 'unknown_tool', 'quarantined'];

export function Activity() {
  const [client, setClient] = useState('');
  const [user, setUser] = useState('');
  const [server, setServer] = useState('');
  const [verdict, setVerdict] = useState('');
  const [applied, setApplied] = useState({ client: '', server: '', user: '' });
  const params = new URLSearchParams({ limit: '100' });
  if (applied.client) params.set('client', applied.client);
  if (applied.user) params.set('user', applied.user);
  if (applied.server) params.set('server', applied.server);
  if (verdict) params.set('verdict', verdict);
  const qs = params.toString();
  const audit = useAsync(
    (signal) => api<{ events: AuditEvent[]; total: number }>(`/api/audit?${qs}`, { signal }),
    [qs],
  );
  // Audit rows are written in small batches (within ~100 ms), so refetch shortly after the live event.
  const refresh = useDebounced(audit.reload, 400);
  useLive(
    ['tool.called', 'approval.', 'server.changed', 'settings.changed', 'token.changed', 'tool.approved'],
    refresh,
  );
  const applyText = useDebounced(
    () => setApplied({ client: client.trim(), server: server.trim(), user: user.trim() }),
    300,
  );

  return (
    <section aria-labelledby="activity-title">
      <div className="section-head">
        <h1 id="activity-title">Activity</h1>
        <span className="muted">{audit.data ? `${audit.data.total} events` : ''}</span>
      </div>
      <div className="filters">
        <label>
          Client
          <input
            value={client}
            onChange={(e) => {
              setClient(e.target.value);
              applyText();
            }}
            placeholder="token name or id"
          />
        </label>
        <label>
          User
          <input
            value={user}
            onChange={(e) => {
              setUser(e.target.value);
              applyText();
            }}
            placeholder="user name or id"
          />
        </label>
        <label>
          Server
          <input
            value={server}
            onChange={(e) => {
              setServer(e.target.value);
              applyText();
            }}
            placeholder="server id"
          />
        </label>
        <label>
          Verdict
          <select value={verdict} onChange={(e) => setVerdict(e.target.value)}>
            <option value="">any</option>
            {VERDICTS.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </label>
      </div>
      {audit.error && <ErrorBox error={audit.error} onRetry={audit.reload} />}
      {audit.loading && !audit.data && <Loading what="the audit trail" />}
      {audit.data && audit.data.events.length === 0 && <Empty>No events match.</Empty>}
      {audit.data && audit.data.events.length > 0 && (
        <div className="table-wrap">
          <table className="audit">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Client</th>
                <th scope="col">Action</th>
                <th scope="col">Server / tool</th>
                <th scope="col">Verdict</th>
                <th scope="col">Outcome</th>
                <th scope="col">Latency</th>
              </tr>
            </thead>
            <tbody>
              {audit.data.events.map((e) => (
                <tr key={e.id} data-verdict={e.verdict ?? ''}>
                  <td className="small-text">{when(e.at)}</td>
                  <td>
                    {e.actorName ?? e.actorId ?? '—'}
                    {e.userName && <span className="muted small-text"> for {e.userName}</span>}
                  </td>
                  <td>
                    <span className="tag">{e.kind}</span> {e.action}
                  </td>
                  <td className="mono">{[e.serverId, e.tool].filter(Boolean).join(' / ') || '—'}</td>
                  <td>{e.verdict ? <span className={`tag verdict-${e.verdict}`}>{e.verdict}</span> : '—'}</td>
                  <td>{e.outcome ?? '—'}</td>
                  <td>{e.latencyMs !== null ? `${e.latencyMs} ms` : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
