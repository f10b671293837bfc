/**
 * The Overview: calls per minute by verdict and outcome over the last hour or day (a uPlot chart, live:
 * redrawn as calls are announced), p50/p95 latency and errors per server, top tools, pending approvals and
 * quarantined tools with links, servers by status — all from one request, `GET /api/overview`.
 */
import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api } from './api';
import { Empty, ErrorBox, Loading, useAsync, useDebounced, useLive } from './ui';

interface OverviewData {
  window: 'hour' | 'day';
  since: string;
  bucketMinutes: number;
  series: { at: string; total: number; verdicts: Record<string, number>; outcomes: Record<string, number> }[];
  servers: { id: string; calls: number; errors: number; p50Ms: number | null; p95Ms: number | null }[];
  topTools: { server: string | null; tool: string | null; calls: number }[];
  approvals: { pending: number; oldest: { id: string; serverId: string | null; tool: string; createdAt: string }[] };
  quarantined: { total: number; items: { serverId: string; tool: string; kind: string }[] };
  serversByStatus: Record<string, number>;
}

/** The chart's lines: per minute, so an hour and a day read the same. */
const LINES: { label: string; stroke: string; value: (b: OverviewData['series'][number]) => number }[] = [
  { label: 'allowed', stroke: '#2f7d32', value: (b) => b.verdicts.allow ?? 0 },
  { label: 'gated', stroke: '#b26a00', value: (b) => b.verdicts.gated ?? 0 },
  { label: 'blocked', stroke: '#8e24aa', value: (b) => (b.verdicts.blocked ?? 0) + (b.verdicts.quarantined ?? 0) },
  {
    label: 'errors',
    stroke: '#c62828',
    value: (b) =>
      Object.entries(b.outcomes)
        .filter(([o]) => !['ok', 'pending_approval', 'input_required', 'none'].includes(o))
        .reduce((n, [, c]) => n + c, 0),
  },
];

function CallsChart({ data }: { data: OverviewData }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const step = data.bucketMinutes * 60;
    const start = Math.floor(Date.parse(data.since) / 1000 / step) * step;
    const end = Math.floor(Date.now() / 1000 / step) * step;
    const byAt = new Map(data.series.map((b) => [Math.floor(Date.parse(b.at) / 1000), b]));
    const xs: number[] = [];
    for (let t = start; t <= end; t += step) xs.push(t);
    const columns = LINES.map((line) =>
      xs.map((t) => (byAt.has(t) ? line.value(byAt.get(t)!) / data.bucketMinutes : 0)),
    );
    const plot = new uPlot(
      {
        width: Math.max(320, el.clientWidth),
        height: 220,
        scales: { x: { time: true } },
        axes: [{}, { label: 'calls / min' }],
        series: [{}, ...LINES.map((l) => ({ label: l.label, stroke: l.stroke, width: 2 }))],
      },
      [xs, ...columns],
      el,
    );
    return () => plot.destroy();
  }, [data]);
  return <div ref={box} className="overview-chart" data-testid="calls-chart" />;
}

const ms = (v: number | null) => (v === null ? '—' : v >= 60_000 ? '> 60 s' : `≤ ${v} ms`);

export function Overview() {
  const [window, setWindow] = useState<'hour' | 'day'>('hour');
  const overview = useAsync((signal) => api<OverviewData>(`/api/overview?window=${window}`, { signal }), [window]);
  // Live: calls, approvals and pins change the numbers; redrawn at most every 2 s.
  const refresh = useDebounced(overview.reload, 2000);
  useLive(['tool.called', 'approval.', 'tool.quarantined', 'tool.approved', 'server.'], refresh);
  const data = overview.data;
  const calls = data?.series.reduce((n, b) => n + b.total, 0) ?? 0;
  return (
    <section aria-labelledby="overview-title">
      <div className="section-head">
        <h1 id="overview-title">Overview</h1>
        <label>
          Window{' '}
          <select value={window} onChange={(e) => setWindow(e.target.value as 'hour' | 'day')}>
            <option value="hour">last hour</option>
            <option value="day">last day</option>
          </select>
        </label>
      </div>
      {overview.error && <ErrorBox error={overview.error} onRetry={overview.reload} />}
      {overview.loading && !data && <Loading what="the overview" />}
      {data && (
        <>
          <h2>Calls per minute</h2>
          <p className="muted" data-testid="calls-total">
            {calls} calls in the last {data.window}
          </p>
          <CallsChart data={data} />

          <div className="overview-grid">
            <div>
              <h2>Needs you</h2>
              <p>
                <a href="#/approvals" data-testid="pending-link">
                  {data.approvals.pending} pending approval{data.approvals.pending === 1 ? '' : 's'}
                </a>
                {' · '}
                <a href="#/approvals" data-testid="quarantined-link">
                  {data.quarantined.total} quarantined tool{data.quarantined.total === 1 ? '' : 's'}
                </a>
              </p>
              <ul>
                {data.quarantined.items.map((q) => (
                  <li key={`${q.serverId}/${q.kind}/${q.tool}`} className="mono small-text">
                    {q.serverId} · {q.tool}
                  </li>
                ))}
              </ul>
              <h2>Servers by status</h2>
              <ul data-testid="servers-by-status">
                {Object.entries(data.serversByStatus).map(([status, n]) => (
                  <li key={status}>
                    <a href="#/servers">{status}</a>: {n}
                  </li>
                ))}
              </ul>
            </div>
            <div>
              <h2>Per server</h2>
              {data.servers.length === 0 ? (
                <Empty>No calls in this window.</Empty>
              ) : (
                <table className="servers" data-testid="per-server">
                  <thead>
                    <tr>
                      <th scope="col">Server</th>
                      <th scope="col">Calls</th>
                      <th scope="col">Errors</th>
                      <th scope="col">p50</th>
                      <th scope="col">p95</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.servers.map((s) => (
                      <tr key={s.id} data-server={s.id}>
                        <td className="mono">{s.id}</td>
                        <td>{s.calls}</td>
                        <td>{s.errors}</td>
                        <td>{ms(s.p50Ms)}</td>
                        <td>{ms(s.p95Ms)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
              <h2>Top tools</h2>
              <ol data-testid="top-tools">
                {data.topTools.map((t) => (
                  <li key={`${t.server}/${t.tool}`} className="mono small-text">
                    {t.server}__{t.tool} · {t.calls}
                  </li>
                ))}
              </ol>
            </div>
          </div>
        </>
      )}
    </section>
  );
}
