/**
 * The approval inbox, live: pending calls (client, server, tool, the full tool description, the arguments
 * exactly as they will be sent, time left; approve or reject with a reason), and quarantined tools (the
 * definition diff and hidden-content flags; approving re-pins).
 */
import { useState } from 'react';
import { type Approval, api, type DiffEntry, enc, errorText, type Pin } from './api';
import {
  Empty,
  ErrorBox,
  HUB_OFF_REASON,
  Loading,
  Notice,
  TraceId,
  timeLeft,
  useAsync,
  useDebounced,
  useLive,
  useNow,
  useSession,
  when,
} from './ui';

interface QuarantinedTool extends Pin {
  serverId: string;
  serverName: string;
}

/** One request for every server's quarantined tools (not one per server), the first 500 of them. */
async function loadQuarantine(signal: AbortSignal): Promise<QuarantinedTool[]> {
  const { pins } = await api<{ pins: QuarantinedTool[] }>('/api/mcp/pins/quarantined?limit=500', { signal });
  return pins;
}

export function Approvals() {
  const pending = useAsync(
    (signal) => api<{ approvals: Approval[]; total: number }>('/api/approvals?status=pending&limit=100', { signal }),
    [],
  );
  const recent = useAsync((signal) => api<{ approvals: Approval[] }>('/api/approvals?limit=10', { signal }), []);
  const quarantine = useAsync(loadQuarantine, []);
  const refreshApprovals = useDebounced(() => {
    pending.reload();
    recent.reload();
  }, 150);
  const refreshQuarantine = useDebounced(quarantine.reload, 150);
  useLive(['approval.'], refreshApprovals);
  // Only what changes the quarantine (a server's status changing does not).
  useLive(['tool.quarantined', 'tool.approved', 'server.changed'], refreshQuarantine);

  const decided = (recent.data?.approvals ?? []).filter((a) => a.status !== 'pending');
  return (
    <section aria-labelledby="approvals-title">
      <div className="section-head">
        <h1 id="approvals-title">Approvals</h1>
        <span className="muted">{pending.data ? `${pending.data.total} pending` : ''}</span>
      </div>

      <h2>Pending calls</h2>
      {pending.error && <ErrorBox error={pending.error} onRetry={pending.reload} />}
      {pending.loading && !pending.data && <Loading what="approvals" />}
      {pending.data && pending.data.approvals.length === 0 && (
        <Empty>No call is waiting for a decision. Gated calls appear here the moment an agent makes them.</Empty>
      )}
      <div className="cards">
        {pending.data?.approvals.map((a) => (
          <ApprovalCard key={a.id} approval={a} onDecided={refreshApprovals} />
        ))}
      </div>

      <h2>Quarantined tools</h2>
      {quarantine.error && <ErrorBox error={quarantine.error} onRetry={quarantine.reload} />}
      {quarantine.loading && !quarantine.data && <Loading what="quarantined tools" />}
      {quarantine.data && quarantine.data.length === 0 && (
        <Empty>
          No tool is quarantined. A tool whose definition changes after it was pinned lands here for review.
        </Empty>
      )}
      <div className="cards">
        {quarantine.data?.map((q) => (
          <QuarantineCard key={`${q.serverId}/${q.kind ?? 'tool'}/${q.tool}`} item={q} onDecided={refreshQuarantine} />
        ))}
      </div>

      {decided.length > 0 && (
        <>
          <h2>Recently decided</h2>
          <ul className="decided">
            {decided.map((a) => (
              <li key={a.id}>
                <span className={`tag status-${a.status}`}>{a.status}</span>{' '}
                <span className="mono">{a.exposedName}</span> for {a.requester.name} ·{' '}
                {a.decidedBy?.name ? `by ${a.decidedBy.name} · ` : ''}
                {when(a.decidedAt ?? a.createdAt)}
                {a.reason ? ` · “${a.reason}”` : ''}
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function ApprovalCard({ approval, onDecided }: { approval: Approval; onDecided: () => void }) {
  const { hubOn } = useSession();
  const now = useNow();
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const left = timeLeft(approval.expiresAt, now);
  // JSON escapes control characters but not bidi controls, zero-width or tag characters: `reveal` shows those.
  const arguments_ = JSON.stringify(approval.arguments, null, 2);

  const decide = async (verdict: 'approve' | 'reject') => {
    setBusy(true);
    setError(undefined);
    try {
      await api(`/api/approvals/${enc(approval.id)}/${verdict}`, {
        method: 'POST',
        body: reason.trim() ? { reason: reason.trim() } : {},
      });
      onDecided();
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  const titleId = `approval-${approval.id}`;
  return (
    <article className="card approval" aria-labelledby={titleId} data-approval={approval.id}>
      <header className="row spread">
        <h3 id={titleId} className="mono">
          {approval.exposedName}
        </h3>
        <span
          className={left === 'expired' ? 'tag status-expired' : 'tag'}
          title={`expires ${when(approval.expiresAt)}`}
        >
          {left === 'expired' ? 'expired' : `${left} left`}
        </span>
      </header>
      <dl className="facts">
        <dt>Client</dt>
        <dd>{approval.requester.name}</dd>
        <dt>Server</dt>
        <dd>{approval.serverId ?? approval.surface}</dd>
        <dt>Tool</dt>
        <dd className="mono">{approval.tool}</dd>
        <dt>Requested</dt>
        <dd>{when(approval.createdAt)}</dd>
        {approval.traceId && (
          <>
            <dt>Trace</dt>
            <dd>
              <TraceId id={approval.traceId} />{' '}
              <a className="small-text" href={`#/activity/trace/${approval.traceId}`}>
                activity
              </a>
            </dd>
          </>
        )}
      </dl>
      <OverrideFacts approval={approval} />
      <h4>Tool description</h4>
      {approval.detail.title && <p>{reveal(approval.detail.title)}</p>}
      <pre className="description">{reveal(approval.detail.description ?? '(the tool has no description)')}</pre>
      <h4>Arguments, exactly as they will be sent</h4>
      {arguments_ !== reveal(arguments_) && (
        <p className="notice notice-error" role="alert" data-testid="hidden-characters">
          The arguments hold invisible or direction-changing characters: each is shown below as{' '}
          <span className="mono">&lt;U+XXXX&gt;</span>, where it sits in what will be sent.
        </p>
      )}
      <pre className="arguments" data-testid="arguments">
        {reveal(arguments_)}
      </pre>
      {error && <ErrorBox error={error} />}
      <label>
        Reason (optional; the agent reads it)
        <input value={reason} onChange={(e) => setReason(e.target.value)} maxLength={2000} />
      </label>
      <div className="row">
        <button
          type="button"
          className="primary"
          disabled={busy || !hubOn}
          title={hubOn ? undefined : HUB_OFF_REASON}
          onClick={() => decide('approve')}
        >
          Approve
        </button>
        <button type="button" className="danger" disabled={busy} onClick={() => decide('reject')}>
          Reject
        </button>
      </div>
    </article>
  );
}

function show(value: unknown): string {
  if (value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

/** Makes invisible characters visible in a diff: zero-width, bidi controls and tag characters as `<U+XXXX>`. */
function reveal(text: string): string {
  return text.replace(/[\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]|[\u{E0000}-\u{E007F}]/gu, (c) => {
    const code = c.codePointAt(0) ?? 0;
    return `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>`;
  });
}

function DiffTable({ diff }: { diff: DiffEntry[] }) {
  return (
    <div className="table-wrap">
      <table className="diff">
        <thead>
          <tr>
            <th scope="col">Field</th>
            <th scope="col">Change</th>
            <th scope="col">Pinned</th>
            <th scope="col">Now</th>
          </tr>
        </thead>
        <tbody>
          {diff.map((d) => (
            <tr key={`${d.path}-${d.change}`}>
              <td className="mono">{d.path}</td>
              <td>{d.change}</td>
              <td>
                <pre className="before">{reveal(show(d.before))}</pre>
              </td>
              <td>
                <pre className="after">{reveal(show(d.after))}</pre>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function QuarantineCard({ item, onDecided }: { item: QuarantinedTool; onDecided: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const [done, setDone] = useState(false);
  const approve = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await api(`/api/mcp/servers/${enc(item.serverId)}/pins/${enc(item.tool)}/approve`, {
        method: 'POST',
        // The hash of the definition shown here: if it changed again meanwhile, the gateway refuses (409).
        body: { pendingHash: item.pendingHash, ...(item.kind && item.kind !== 'tool' ? { kind: item.kind } : {}) },
      });
      setDone(true);
      onDecided();
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  const kind = item.kind ?? 'tool';
  const titleId = `q-${item.serverId}-${kind}-${item.tool}`;
  return (
    <article
      className="card quarantine"
      aria-labelledby={titleId}
      data-quarantine={`${item.serverId}/${item.tool}`}
      data-kind={kind}
    >
      <header className="row spread">
        <h3 id={titleId} className="mono">
          {item.serverId}/{item.tool}
        </h3>
        <span className="tag">{kind}</span>
        <span className="tag pin-quarantined">quarantined: {item.reason ?? 'changed'}</span>
      </header>
      <p className="muted">
        {kind === 'resource'
          ? 'This UI resource’s content (the app a host renders) changed since it was pinned. Agents cannot read it until the new content is approved.'
          : kind === 'prompt'
            ? item.reason === 'new'
              ? 'This prompt appeared after the server was pinned. Agents do not see it until it is approved.'
              : 'This prompt’s definition changed since it was pinned. Agents do not see it until the new definition is approved.'
            : item.reason === 'new'
              ? 'This tool appeared after the server was pinned. Agents cannot call it until it is approved.'
              : 'This tool’s definition changed since it was pinned. Agents cannot call it until the new definition is approved.'}{' '}
        Server: {item.serverName} · since {when(item.updatedAt)}
      </p>
      {item.flags && item.flags.length > 0 && (
        <div className="notice notice-error" role="alert">
          <strong>Hidden content found:</strong>
          <ul className="flags">
            {item.flags.map((f) => (
              <li key={`${f.path}-${f.kind}-${f.index}`}>
                {f.kind.replace(/_/g, ' ')} in <span className="mono">{f.path}</span>
                {f.in === 'key' ? ' (a property name)' : ''}: {f.match}
                {f.count > 1 ? ` ×${f.count}` : ''}
              </li>
            ))}
          </ul>
        </div>
      )}
      {item.diff && item.diff.length > 0 ? (
        <DiffTable diff={item.diff} />
      ) : (
        <p className="muted">No field-level diff.</p>
      )}
      {error && <ErrorBox error={error} />}
      {done ? (
        <Notice kind="ok">Approved: the new definition is pinned.</Notice>
      ) : (
        <div className="row">
          <button type="button" className="primary" disabled={busy} onClick={approve}>
            Approve new definition
          </button>
        </div>
      )}
    </article>
  );
}

/**
 * An overridden tool's card names both its names and what the override fixed: the arguments below are the
 * real ones (fixed values included), so an override never hides what will be sent upstream.
 */
function OverrideFacts({ approval }: { approval: Approval }) {
  const override = approval.detail.override as
    | { aggregatedName?: string; displayName?: string; fixedArguments?: string[] }
    | undefined;
  if (!override || typeof override !== 'object') return null;
  return (
    <p className="notice notice-info" data-testid="override">
      Shown to the agent as <span className="mono">{override.displayName ?? approval.exposedName}</span> by an operator
      override (aggregated name <span className="mono">{override.aggregatedName}</span>)
      {override.fixedArguments?.length ? (
        <>
          ; fixed by it: <span className="mono">{override.fixedArguments.join(', ')}</span>
        </>
      ) : null}
      .
    </p>
  );
}
