/**
 * The audit stream, live: every call and control-plane change, filterable by client, user, server,
 * verdict and OpenTelemetry trace id (a call and its approved execution share one). `#/activity/trace/<id>`
 * opens it filtered by that trace (the approval card links there).
 */
import { useEffect, useState } from 'react';
import { type AuditEvent, api } from './api';
import { Empty, ErrorBox, Loading, TraceId, useAsync, useDebounced, useLive, when } from './ui';

const TRACE_ID = /^[0-9a-f]{32}$/;

/** The trace the address names (`#/activity/trace/<id>`), if any. */
function traceFromHash(): string {
  const [view, key, value] = window.location.hash.replace(/^#\/?/, '').split('/');
  return view === 'activity' && key === 'trace' && value && TRACE_ID.test(value) ? value : '';
}

const VERDICTS = ['allow', 'gated', 'blocked', 'unknown_server', 'unknown_tool', 'quarantined'];

export function Activity() {
  const [client, setClient] = useState('');
  const [user, setUser] = useState('');
  const [server, setServer] = useState('');
  const [verdict, setVerdict] = useState('');
  const [trace, setTrace] = useState(traceFromHash);
  const [applied, setApplied] = useState({ client: '', server: '', user: '' });
  // A trace filter is applied only once it is a whole trace id (32 hex digits): a partial one matches nothing.
  const traceWanted = trace.trim().toLowerCase();
  const traceValid = traceWanted === '' || TRACE_ID.test(traceWanted);
  const params = new URLSearchParams({ limit: '100' });
  if (applied.client) params.set('client', applied.client);
  if (applied.user) params.set('user', applied.user);
  if (applied.server) params.set('server', applied.server);
  if (verdict) params.set('verdict', verdict);
  if (traceWanted && traceValid) params.set('trace', traceWanted);
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
  useEffect(() => {
    const onHash = () => {
      const named = traceFromHash();
      if (named) setTrace(named);
    };
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
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
        <label>
          Trace
          <input
            value={trace}
            onChange={(e) => setTrace(e.target.value)}
            placeholder="trace id (32 hex digits)"
            className="mono"
            spellCheck={false}
            aria-invalid={!traceValid}
            aria-describedby={traceValid ? undefined : 'trace-hint'}
          />
        </label>
        {trace && (
          <button type="button" className="small" onClick={() => setTrace('')}>
            Clear trace
          </button>
        )}
      </div>
      {!traceValid && (
        <p id="trace-hint" className="muted small-text" role="status">
          A trace id is 32 hexadecimal digits (a call and its approved execution share one).
        </p>
      )}
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
                <th scope="col">Trace</th>
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
                  <td>{e.traceId ? <TraceId id={e.traceId} onFilter={setTrace} /> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
