/** The installed servers: status dots, transport, tool count, state; filters and search; live. */
import { useMemo, useState } from 'react';
import { api, type ServerView } from './api';
import {
  Empty,
  ErrorBox,
  Loading,
  SandboxOffBadge,
  StatusDot,
  useAsync,
  useDebounced,
  useLive,
  useSession,
} from './ui';

/** A server missing its variables or arguments: not green, not red, and says so. */
const needsConfiguration = (s: { lastError: string | null }) =>
  s.lastError?.startsWith('needs_configuration:') ?? false;

function statusText(s: { status: string; lastError: string | null; enabled: boolean }): string {
  if (needsConfiguration(s)) return 'needs configuration';
  if (!s.enabled) return 'disabled';
  return s.status === 'unknown' ? 'not tested' : s.status;
}

const PAGE = 500;

/** Every server, page by page (a list answer holds at most 500): ceil(total / 500) requests. */
export async function loadAllServers(signal: AbortSignal): Promise<{ servers: ServerView[]; total: number }> {
  const servers: ServerView[] = [];
  for (;;) {
    const page = await api<{ servers: ServerView[]; total: number }>(
      `/api/mcp/servers?limit=${PAGE}&offset=${servers.length}`,
      { signal },
    );
    servers.push(...page.servers);
    if (page.servers.length === 0 || servers.length >= page.total) return { servers, total: page.total };
  }
}

export function Servers() {
  const { openServer } = useSession();
  const servers = useAsync(loadAllServers, []);
  const refresh = useDebounced(servers.reload, 250);
  useLive(['server.', 'tool.quarantined', 'tool.approved'], refresh);
  const [query, setQuery] = useState('');
  const [status, setStatus] = useState('');
  const [transport, setTransport] = useState('');

  const shown = useMemo(() => {
    const q = query.trim().toLowerCase();
    return (servers.data?.servers ?? []).filter(
      (s) =>
        (!status || s.status === status) &&
        (!transport || s.transport === transport) &&
        (!q ||
          s.id.includes(q) ||
          s.name.toLowerCase().includes(q) ||
          (s.url ?? s.command ?? '').toLowerCase().includes(q)),
    );
  }, [servers.data, query, status, transport]);

  const all = servers.data?.servers ?? [];
  return (
    <section aria-labelledby="servers-title">
      <div className="section-head">
        <h1 id="servers-title">Servers</h1>
        <span className="muted">
          {servers.data
            ? `${all.filter((s) => s.status === 'connected').length} connected of ${servers.data.total}`
            : ''}
        </span>
      </div>
      <div className="filters">
        <label>
          Search
          <input type="search" value={query} onChange={(e) => setQuery(e.target.value)} placeholder="name, id, URL" />
        </label>
        <label>
          Status
          <select value={status} onChange={(e) => setStatus(e.target.value)}>
            <option value="">any</option>
            <option value="connected">connected</option>
            <option value="failed">failed</option>
            <option value="unknown">not tested</option>
          </select>
        </label>
        <label>
          Transport
          <select value={transport} onChange={(e) => setTransport(e.target.value)}>
            <option value="">any</option>
            <option value="streamable-http">streamable-http</option>
            <option value="stdio">stdio</option>
          </select>
        </label>
      </div>
      {servers.error && <ErrorBox error={servers.error} onRetry={servers.reload} />}
      {servers.loading && !servers.data && <Loading what="servers" />}
      {servers.data && all.length === 0 && (
        <Empty>
          No servers installed yet. <a href="#/discover">Discover</a> one from the catalog or add it by hand.
        </Empty>
      )}
      {servers.data && all.length > 0 && shown.length === 0 && <Empty>No server matches these filters.</Empty>}
      {shown.length > 0 && (
        <div className="table-wrap">
          <table className="servers">
            <thead>
              <tr>
                <th scope="col">Status</th>
                <th scope="col">Server</th>
                <th scope="col">Transport</th>
                <th scope="col">Tools</th>
                <th scope="col">State</th>
                <th scope="col">Enabled</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((s) => (
                <tr key={s.id} data-server={s.id}>
                  <td>
                    <StatusDot status={s.status} lastError={s.lastError} />{' '}
                    <span className="status-text">{statusText(s)}</span>
                  </td>
                  <td>
                    <button type="button" className="link" onClick={() => openServer(s.id)}>
                      {s.name}
                    </button>
                    <div className="muted mono small-text">{s.id}</div>
                    {(s.status === 'failed' || needsConfiguration(s)) && s.lastError && (
                      <div className="error-text small-text">{s.lastError}</div>
                    )}
                  </td>
                  <td>
                    {s.transport}
                    {s.sandboxed === false && <SandboxOffBadge />}
                  </td>
                  <td className="tools-count">{s.discoveredToolsCount}</td>
                  <td>{s.state ?? '—'}</td>
                  <td>{s.enabled ? 'yes' : 'no'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
