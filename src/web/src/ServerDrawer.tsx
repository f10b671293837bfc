/**
 * One server's detail drawer: enable/disable, test (latency, tool count, error), start/stop/restart for
 * stdio, tool mode and per-tool tiers with pin state, exposure groups, masked secrets, recent events,
 * uninstall with confirmation.
 */
import { type FormEvent, useEffect, useRef, useState } from 'react';
import {
  ApiError,
  api,
  enc,
  errorText,
  type ServerDetail,
  type ServerEvent,
  type ServerView,
  type ShownValue,
  type TestResult,
  type Tier,
  type ToolPolicy,
} from './api';
import { type SecretRow, SecretRows, secretPayload } from './Discover';
import { ErrorBox, HUB_OFF_REASON, Loading, Notice, StatusDot, useAsync, useLive, useSession, when } from './ui';

type Flash = { kind: 'ok' | 'error'; text: string } | undefined;

export function ServerDrawer({ id, onClose }: { id: string; onClose: () => void }) {
  const base = `/api/mcp/servers/${enc(id)}`;
  const detail = useAsync(() => api<ServerDetail>(base), [base]);
  const logs = useAsync(() => api<{ events: ServerEvent[] }>(`${base}/logs?limit=20`), [base]);
  const reloadAll = () => {
    detail.reload();
    logs.reload();
  };
  useLive(['server.', 'tool.quarantined', 'tool.approved'], (event) => {
    if (event.data.id === id || event.data.server === id) reloadAll();
  });
  const ref = useRef<HTMLElement>(null);
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    // Focus moves into the drawer, stays there while it is open (Tab wraps), and returns on close.
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    ref.current?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') close.current();
      if (e.key !== 'Tab' || !ref.current) return;
      const focusable = [
        ...ref.current.querySelectorAll<HTMLElement>('button, input, select, textarea, a[href]'),
      ].filter((el) => !el.hasAttribute('disabled'));
      const first = focusable[0];
      const last = focusable[focusable.length - 1];
      if (!first || !last) return;
      if (e.shiftKey && (document.activeElement === first || document.activeElement === ref.current)) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && document.activeElement === last) {
        e.preventDefault();
        first.focus();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => {
      window.removeEventListener('keydown', onKey);
      opener?.focus();
    };
  }, []);

  return (
    <div className="drawer-backdrop">
      <button type="button" className="drawer-scrim" aria-label="Close the server detail" onClick={onClose} />
      <aside className="drawer" ref={ref} tabIndex={-1} role="dialog" aria-modal="true" aria-labelledby="drawer-title">
        <div className="drawer-head">
          <h2 id="drawer-title">
            {detail.data ? (
              <>
                <StatusDot status={detail.data.status} lastError={detail.data.lastError} /> {detail.data.name}
              </>
            ) : (
              id
            )}
          </h2>
          <button type="button" className="small" onClick={onClose} aria-label="Close">
            Close
          </button>
        </div>
        {detail.error && <ErrorBox error={detail.error} onRetry={detail.reload} />}
        {detail.loading && !detail.data && <Loading what="the server" />}
        {detail.data && (
          <DrawerBody
            server={detail.data}
            base={base}
            onChanged={reloadAll}
            onGone={onClose}
            events={logs.data?.events}
            eventsError={logs.error}
          />
        )}
      </aside>
    </div>
  );
}

function DrawerBody({
  server,
  base,
  onChanged,
  onGone,
  events,
  eventsError,
}: {
  server: ServerDetail;
  base: string;
  onChanged: () => void;
  onGone: () => void;
  events: ServerEvent[] | undefined;
  eventsError: string | undefined;
}) {
  const { hubOn } = useSession();
  const [flash, setFlash] = useState<Flash>();
  const [busy, setBusy] = useState<string>();
  const [test, setTest] = useState<TestResult>();
  const [enabled, setEnabled] = useState(server.enabled);
  useEffect(() => setEnabled(server.enabled), [server.enabled]);

  const act = async (label: string, run: () => Promise<string | undefined>) => {
    setBusy(label);
    setFlash(undefined);
    try {
      const text = await run();
      if (text) setFlash({ kind: 'ok', text });
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setBusy(undefined);
    }
  };

  const runTest = () =>
    act('test', async () => {
      setTest(undefined);
      setTest(await api<TestResult>(`${base}/test`, { method: 'POST' }));
      return undefined;
    });

  const lifecycle = (verb: 'start' | 'stop' | 'restart') =>
    act(verb, async () => {
      try {
        const answer = await api<{ server?: ServerView } & Partial<ServerView>>(`${base}/${verb}`, { method: 'POST' });
        const state = answer.server?.state ?? answer.state;
        return `${verb[0]?.toUpperCase()}${verb.slice(1)} requested${state ? `: now ${state}` : ''}.`;
      } catch (error) {
        if (error instanceof ApiError && error.noSuchRoute) {
          throw new Error(
            `This gateway cannot ${verb} stdio servers yet (POST …/${verb} answered 404). Update Gatehouse to manage the process from here.`,
          );
        }
        throw error;
      }
    });

  return (
    <div className="drawer-body">
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <dl className="facts">
        <dt>Status</dt>
        <dd data-testid="drawer-status">
          {server.status === 'unknown' ? 'not tested' : server.status}
          {server.latencyMs !== null && server.status === 'connected' ? ` · ${server.latencyMs} ms` : ''}
          {server.lastTestedAt ? ` · tested ${when(server.lastTestedAt)}` : ''}
        </dd>
        {server.lastError && (
          <>
            <dt>Last error</dt>
            <dd className="error-text">{server.lastError}</dd>
          </>
        )}
        <dt>State</dt>
        <dd>{server.state ?? '—'}</dd>
        <dt>Transport</dt>
        <dd>{server.transport}</dd>
        <dt>{server.transport === 'stdio' ? 'Command' : 'URL'}</dt>
        <dd className="mono break">
          {server.transport === 'stdio' ? [server.command, ...server.args].join(' ') : server.url}
        </dd>
        {server.transport !== 'stdio' && (
          <>
            <dt>Auth</dt>
            <dd>{server.auth.type === 'bearer' ? `bearer (${shown(server.auth.token)})` : 'none'}</dd>
          </>
        )}
        <dt>Source</dt>
        <dd>{server.sourceKind}</dd>
      </dl>

      <section className="panel" aria-labelledby="activate-title">
        <h3 id="activate-title">Activate and test</h3>
        <div className="row wrap">
          <label className="toggle">
            <input
              type="checkbox"
              checked={enabled}
              disabled={busy !== undefined}
              onChange={(e) => {
                const next = e.target.checked;
                setEnabled(next); // shown at once; put back if the gateway refuses
                void act('enabled', async () => {
                  try {
                    await api(`${base}/config`, { method: 'PATCH', body: { enabled: next } });
                  } catch (error) {
                    setEnabled(!next);
                    throw error;
                  }
                  return next ? 'Enabled: agents can see it.' : 'Disabled: its tools left the agents’ view.';
                });
              }}
            />
            Enabled
          </label>
          <button
            type="button"
            className="primary"
            onClick={runTest}
            disabled={busy !== undefined || !hubOn}
            title={hubOn ? 'Handshake: connect and list tools' : HUB_OFF_REASON}
          >
            {busy === 'test' ? 'Testing…' : 'Test'}
          </button>
          {server.transport === 'stdio' &&
            (['start', 'stop', 'restart'] as const).map((verb) => (
              <button
                key={verb}
                type="button"
                onClick={() => lifecycle(verb)}
                disabled={busy !== undefined || !hubOn}
                title={hubOn ? `${verb} the process` : HUB_OFF_REASON}
              >
                {busy === verb ? `${verb}…` : verb[0]?.toUpperCase() + verb.slice(1)}
              </button>
            ))}
        </div>
        {!hubOn && <p className="muted small-text">{HUB_OFF_REASON}</p>}
        {test && (
          <div className={`test-result ${test.ok ? 'ok' : 'failed'}`} role="status" data-testid="test-result">
            {test.ok ? (
              <>
                Connected in {test.latencyMs} ms · {test.discoveredToolsCount} tool
                {test.discoveredToolsCount === 1 ? '' : 's'}
              </>
            ) : (
              <>
                Failed after {test.latencyMs} ms: {test.error?.message ?? 'unknown error'}
                {test.error?.code ? ` (${test.error.code})` : ''}
              </>
            )}
          </div>
        )}
      </section>

      <ToolsPanel server={server} base={base} onChanged={onChanged} />
      <ExposurePanel server={server} base={base} onChanged={onChanged} />
      <SecretsPanel server={server} base={base} onChanged={onChanged} />

      <section className="panel" aria-labelledby="events-title">
        <h3 id="events-title">Recent events</h3>
        {eventsError && <ErrorBox error={eventsError} />}
        {events && events.length === 0 && <p className="muted">No events yet.</p>}
        {events && events.length > 0 && (
          <ul className="events">
            {events.map((e) => (
              <li key={e.id}>
                <span className="muted small-text">{when(e.at)}</span> <span className="tag">{e.kind}</span> {e.message}
              </li>
            ))}
          </ul>
        )}
      </section>

      <UninstallPanel server={server} base={base} onGone={onGone} />
    </div>
  );
}

function shown(value: ShownValue): string {
  return 'env' in value ? `from $${value.env}` : 'set, hidden';
}

const TIERS: { value: Tier | 'default'; label: string }[] = [
  { value: 'default', label: 'default' },
  { value: 'allow', label: 'allow' },
  { value: 'gated', label: 'gated' },
  { value: 'blocked', label: 'blocked' },
];

function tierOf(policy: ToolPolicy, tool: string): Tier | 'default' {
  if (policy.blocked.includes(tool)) return 'blocked';
  if (policy.gated.includes(tool)) return 'gated';
  if (policy.allow.includes(tool)) return 'allow';
  return 'default';
}

function ToolsPanel({ server, base, onChanged }: { server: ServerDetail; base: string; onChanged: () => void }) {
  const [policy, setPolicy] = useState<ToolPolicy>(server.toolPolicy);
  const [flash, setFlash] = useState<Flash>();
  const [saving, setSaving] = useState(false);
  useEffect(() => setPolicy(server.toolPolicy), [server.toolPolicy]);
  const dirty = JSON.stringify(policy) !== JSON.stringify(server.toolPolicy);
  const pins = new Map(server.pins.map((p) => [p.tool, p]));

  const setTier = (tool: string, tier: Tier | 'default') =>
    setPolicy((p) => {
      const without = (list: string[]) => list.filter((t) => t !== tool);
      const next = { ...p, allow: without(p.allow), gated: without(p.gated), blocked: without(p.blocked) };
      if (tier !== 'default') next[tier] = [...next[tier], tool];
      return next;
    });
  const listKey = policy.mode === 'exclude' ? 'exclude' : 'include';
  const toggleListed = (tool: string, on: boolean) =>
    setPolicy((p) => ({
      ...p,
      [listKey]: on ? [...p[listKey].filter((t) => t !== tool), tool] : p[listKey].filter((t) => t !== tool),
    }));

  const save = async () => {
    setSaving(true);
    setFlash(undefined);
    try {
      await api(`${base}/tools`, { method: 'PATCH', body: policy });
      setFlash({ kind: 'ok', text: 'Tool policy saved.' });
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setSaving(false);
    }
  };

  return (
    <section className="panel" aria-labelledby="tools-title">
      <h3 id="tools-title">Tools ({server.discoveredTools.length})</h3>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <div className="row wrap">
        <label>
          Tool mode
          <select
            value={policy.mode}
            onChange={(e) => setPolicy((p) => ({ ...p, mode: e.target.value as ToolPolicy['mode'] }))}
          >
            <option value="all">all tools</option>
            <option value="include">only the included</option>
            <option value="exclude">all but the excluded</option>
          </select>
        </label>
        <label>
          Default tier
          <select
            value={policy.defaultTier}
            onChange={(e) => setPolicy((p) => ({ ...p, defaultTier: e.target.value as Tier }))}
          >
            <option value="allow">allow</option>
            <option value="gated">gated</option>
            <option value="blocked">blocked</option>
          </select>
        </label>
      </div>
      {server.discoveredTools.length === 0 ? (
        <p className="muted">No tools discovered yet: run Test to handshake.</p>
      ) : (
        <div className="table-wrap">
          <table className="tools">
            <thead>
              <tr>
                {policy.mode !== 'all' && <th scope="col">{policy.mode === 'include' ? 'Included' : 'Excluded'}</th>}
                <th scope="col">Tool</th>
                <th scope="col">Tier</th>
                <th scope="col">Pin</th>
              </tr>
            </thead>
            <tbody>
              {server.discoveredTools.map((tool) => {
                const pin = pins.get(tool.name);
                return (
                  <tr key={tool.name} data-tool={tool.name}>
                    {policy.mode !== 'all' && (
                      <td>
                        <input
                          type="checkbox"
                          aria-label={`${policy.mode} ${tool.name}`}
                          checked={policy[listKey].includes(tool.name)}
                          onChange={(e) => toggleListed(tool.name, e.target.checked)}
                        />
                      </td>
                    )}
                    <td>
                      <span className="mono">{tool.name}</span>
                      {tool.description && <div className="muted small-text clamp">{tool.description}</div>}
                    </td>
                    <td>
                      <select
                        aria-label={`Tier of ${tool.name}`}
                        value={tierOf(policy, tool.name)}
                        onChange={(e) => setTier(tool.name, e.target.value as Tier | 'default')}
                      >
                        {TIERS.map((t) => (
                          <option key={t.value} value={t.value}>
                            {t.value === 'default' ? `default (${policy.defaultTier})` : t.label}
                          </option>
                        ))}
                      </select>
                    </td>
                    <td>
                      {pin ? (
                        <span className={`tag pin-${pin.state}`} title={pin.pinHash ?? undefined}>
                          {pin.state === 'quarantined' ? `quarantined (${pin.reason ?? 'changed'})` : 'pinned'}
                        </span>
                      ) : (
                        <span className="muted">—</span>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <div className="row">
        <button type="button" className="primary" disabled={!dirty || saving} onClick={save}>
          {saving ? 'Saving…' : 'Save tool policy'}
        </button>
        {dirty && (
          <button type="button" onClick={() => setPolicy(server.toolPolicy)}>
            Discard changes
          </button>
        )}
      </div>
    </section>
  );
}

function ExposurePanel({ server, base, onChanged }: { server: ServerView; base: string; onChanged: () => void }) {
  const [groups, setGroups] = useState(server.exposure.join(', '));
  const [flash, setFlash] = useState<Flash>();
  useEffect(() => setGroups(server.exposure.join(', ')), [server.exposure]);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setFlash(undefined);
    try {
      const list = groups
        .split(',')
        .map((g) => g.trim())
        .filter(Boolean);
      await api(`${base}/exposure`, { method: 'PATCH', body: { groups: list } });
      setFlash({ kind: 'ok', text: list.length ? `Visible to: ${list.join(', ')}.` : 'Visible to no agent group.' });
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };
  return (
    <section className="panel" aria-labelledby="exposure-title">
      <h3 id="exposure-title">Exposure</h3>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <form className="row wrap" onSubmit={submit}>
        <label className="grow">
          Agent groups that see this server (comma-separated)
          <input value={groups} onChange={(e) => setGroups(e.target.value)} />
        </label>
        <button type="submit">Save groups</button>
      </form>
    </section>
  );
}

function SecretsPanel({ server, base, onChanged }: { server: ServerView; base: string; onChanged: () => void }) {
  const field = server.transport === 'stdio' ? 'env' : 'headers';
  const current = server.transport === 'stdio' ? server.env : server.headers;
  const [rows, setRows] = useState<SecretRow[]>([]);
  const [flash, setFlash] = useState<Flash>();
  const patch = async (body: Record<string, unknown>, text: string) => {
    setFlash(undefined);
    try {
      await api(`${base}/config`, { method: 'PATCH', body });
      setFlash({ kind: 'ok', text });
      setRows([]);
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };
  return (
    <section className="panel" aria-labelledby="secrets-title">
      <h3 id="secrets-title">{field === 'env' ? 'Environment' : 'Headers'}</h3>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      {Object.keys(current).length === 0 ? (
        <p className="muted">None set.</p>
      ) : (
        <ul className="secrets">
          {Object.entries(current).map(([name, value]) => (
            <li key={name}>
              <span className="mono">{name}</span> <span className="muted">{shown(value)}</span>{' '}
              <button
                type="button"
                className="small"
                onClick={() => patch({ [field]: { [name]: null } }, `${name} removed.`)}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      {server.envRequired && server.envRequired.length > 0 && (
        <p className="muted small-text">The manifest asks for: {server.envRequired.join(', ')}</p>
      )}
      <SecretRows rows={rows} onChange={setRows} kind={field} />
      {rows.length > 0 && (
        <button
          type="button"
          className="primary"
          onClick={() => {
            const payload = secretPayload(rows);
            void patch(
              { [field]: payload },
              `Saved ${Object.keys(payload).join(', ')} (values are sealed; never shown again).`,
            );
          }}
        >
          Save {field}
        </button>
      )}
    </section>
  );
}

function UninstallPanel({ server, base, onGone }: { server: ServerView; base: string; onGone: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string>();
  const confirmRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) confirmRef.current?.focus();
  }, [confirming]);
  const uninstall = async () => {
    try {
      await api(base, { method: 'DELETE' });
      onGone();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section className="panel danger" aria-labelledby="uninstall-title">
      <h3 id="uninstall-title">Uninstall</h3>
      {error && <ErrorBox error={error} />}
      {!confirming ? (
        <button type="button" className="danger" onClick={() => setConfirming(true)}>
          Uninstall {server.name}…
        </button>
      ) : (
        <div role="alertdialog" aria-labelledby="uninstall-confirm" className="confirm">
          <p id="uninstall-confirm">
            Uninstall <strong>{server.name}</strong> ({server.id})? Its record, pins and events are deleted and agents
            lose its tools.
          </p>
          <div className="row">
            <button type="button" className="danger" ref={confirmRef} onClick={uninstall}>
              Yes, uninstall
            </button>
            <button type="button" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </div>
      )}
    </section>
  );
}
