/** Settings: surfaces on/off and scope access levels (admins change, operators read); tokens (admins). */
import { type FormEvent, useEffect, useState } from 'react';
import { api, enc, errorText, type SettingsMap, type TokenView } from './api';
import { PLATFORM_DEFAULT, ToolViewSelect, useToolsetNames } from './ToolView';
import { Empty, ErrorBox, Loading, Notice, useAsync, useLive, useSession, when } from './ui';

const SURFACES = ['mcp.hubEnabled', 'mcp.adminEnabled', 'mcp.memoryEnabled'];
/** The highest level each scope accepts (the API refuses higher). */
const SCOPE_MAX: Record<string, 'read' | 'write'> = {
  'mcp.scope.servers': 'write',
  'mcp.scope.approvals': 'read',
  'mcp.scope.audit': 'read',
  'mcp.scope.settings': 'read',
  'mcp.scope.tokens': 'read',
  'mcp.scope.memory': 'write',
};

export function Settings() {
  const { role } = useSession();
  return (
    <section aria-labelledby="settings-title">
      <div className="section-head">
        <h1 id="settings-title">Settings</h1>
      </div>
      <PlatformSettings />
      {role === 'admin' ? (
        <Tokens />
      ) : (
        <section className="panel">
          <h2>Tokens</h2>
          <p className="muted">Only an admin can create, list or revoke tokens.</p>
        </section>
      )}
    </section>
  );
}

function PlatformSettings() {
  const { role, refreshInfo } = useSession();
  const settings = useAsync(
    (signal) => api<{ settings: SettingsMap; descriptions: Record<string, string> }>('/api/settings', { signal }),
    [],
  );
  useLive(['settings.changed'], settings.reload);
  const toolsets = useToolsetNames();
  const [draft, setDraft] = useState<SettingsMap>({});
  const [flash, setFlash] = useState<{ kind: 'ok' | 'error'; text: string }>();
  const [saving, setSaving] = useState(false);
  useEffect(() => {
    if (settings.data) setDraft(settings.data.settings);
  }, [settings.data]);
  const readOnly = role !== 'admin';

  if (settings.error) return <ErrorBox error={settings.error} onRetry={settings.reload} />;
  if (!settings.data) return <Loading what="settings" />;
  const current = settings.data.settings;
  const describe = settings.data.descriptions;
  const changed = Object.keys(draft).filter((k) => JSON.stringify(draft[k]) !== JSON.stringify(current[k]));

  const save = async (event: FormEvent) => {
    event.preventDefault();
    setSaving(true);
    setFlash(undefined);
    try {
      await api('/api/settings', { method: 'PATCH', body: Object.fromEntries(changed.map((k) => [k, draft[k]])) });
      setFlash({ kind: 'ok', text: `Saved: ${changed.join(', ')}. In force from the next request.` });
      settings.reload();
      if (changed.some((k) => SURFACES.includes(k))) refreshInfo();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setSaving(false);
    }
  };

  const surfaces = SURFACES.filter((k) => k in current);
  const scopes = Object.keys(current).filter((k) => k.startsWith('mcp.scope.'));
  const others = Object.keys(current).filter((k) => !surfaces.includes(k) && !scopes.includes(k));
  return (
    <form className="panel" onSubmit={save} aria-labelledby="platform-title">
      <h2 id="platform-title">Surfaces and scopes</h2>
      {readOnly && <p className="muted">Operators can read these settings; only an admin can change them.</p>}
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <fieldset disabled={readOnly || saving}>
        <legend>Surfaces</legend>
        {surfaces.map((key) => (
          <label key={key} className="inline setting">
            <input
              type="checkbox"
              name={key}
              checked={draft[key] === true}
              onChange={(e) => setDraft({ ...draft, [key]: e.target.checked })}
            />
            <span className="mono">{key}</span> <span className="muted small-text">{describe[key]}</span>
          </label>
        ))}
      </fieldset>
      <fieldset disabled={readOnly || saving}>
        <legend>Agent access per scope (admin surface)</legend>
        <div className="grid-2">
          {scopes.map((key) => (
            <label key={key}>
              <span className="mono">{key}</span>
              <select
                name={key}
                value={String(draft[key] ?? 'off')}
                onChange={(e) => setDraft({ ...draft, [key]: e.target.value })}
              >
                <option value="off">off</option>
                <option value="read">read</option>
                {SCOPE_MAX[key] !== 'read' && <option value="write">write</option>}
              </select>
              <span className="muted small-text">{describe[key]}</span>
            </label>
          ))}
        </div>
      </fieldset>
      <fieldset disabled={readOnly || saving}>
        <legend>Other</legend>
        <div className="grid-2">
          {others.map((key) => (
            <div key={key} className="field">
              <span className="mono">{key}</span>
              {key === 'hub.toolView' ? (
                <ToolViewSelect
                  name={key}
                  label={key}
                  value={String(draft[key] ?? 'all')}
                  toolsets={toolsets}
                  onChange={(value) => setDraft({ ...draft, [key]: value })}
                />
              ) : key === 'audit.payloads' ? (
                <select
                  name={key}
                  aria-label={key}
                  value={String(draft[key])}
                  onChange={(e) => setDraft({ ...draft, [key]: e.target.value })}
                >
                  <option value="metadata">metadata</option>
                  <option value="data">data</option>
                </select>
              ) : typeof current[key] === 'number' ? (
                <input
                  type="number"
                  name={key}
                  aria-label={key}
                  // 0 is meaningful for several (hub.search.recentTools, audit.retentionDays); the server checks each range.
                  min={0}
                  value={String(draft[key] ?? '')}
                  onChange={(e) => setDraft({ ...draft, [key]: e.target.value === '' ? '' : Number(e.target.value) })}
                />
              ) : typeof current[key] === 'boolean' ? (
                <input
                  type="checkbox"
                  name={key}
                  aria-label={key}
                  checked={draft[key] === true}
                  onChange={(e) => setDraft({ ...draft, [key]: e.target.checked })}
                />
              ) : (
                <input
                  name={key}
                  aria-label={key}
                  value={String(draft[key] ?? '')}
                  onChange={(e) => setDraft({ ...draft, [key]: e.target.value })}
                />
              )}
              <span className="muted small-text">{describe[key]}</span>
            </div>
          ))}
        </div>
      </fieldset>
      {!readOnly && (
        <button type="submit" className="primary" disabled={changed.length === 0 || saving}>
          {saving
            ? 'Saving…'
            : changed.length
              ? `Save ${changed.length} change${changed.length > 1 ? 's' : ''}`
              : 'No changes'}
        </button>
      )}
    </form>
  );
}

function Tokens() {
  const tokens = useAsync(
    (signal) => api<{ tokens: TokenView[]; total: number }>('/api/tokens?limit=500', { signal }),
    [],
  );
  useLive(['token.changed'], tokens.reload);
  const settings = useAsync((signal) => api<{ settings: SettingsMap }>('/api/settings', { signal }), []);
  useLive(['settings.changed'], settings.reload);
  const platformView = String(settings.data?.settings['hub.toolView'] ?? 'all');
  const toolsets = useToolsetNames();
  const [role, setRole] = useState('agent');
  const [name, setName] = useState('');
  const [groups, setGroups] = useState('default');
  const [toolView, setToolView] = useState(PLATFORM_DEFAULT);
  const [created, setCreated] = useState<{ name: string; token: string }>();
  const [flash, setFlash] = useState<{ kind: 'ok' | 'error'; text: string }>();
  const [revoking, setRevoking] = useState<string>();

  const create = async (event: FormEvent) => {
    event.preventDefault();
    setFlash(undefined);
    setCreated(undefined);
    try {
      const body: Record<string, unknown> = { role, name: name.trim() };
      if (role === 'agent') {
        body.groups = groups
          .split(',')
          .map((g) => g.trim())
          .filter(Boolean);
        if (toolView !== PLATFORM_DEFAULT) body.toolView = toolView;
      }
      const answer = await api<TokenView & { token: string }>('/api/tokens', { method: 'POST', body });
      setCreated({ name: answer.name, token: answer.token });
      setName('');
      tokens.reload();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };

  // A token's view changes at once (agents' lists follow from their next request, with list_changed).
  const changeView = async (token: TokenView, value: string) => {
    setFlash(undefined);
    try {
      await api(`/api/tokens/${enc(token.id)}`, {
        method: 'PATCH',
        body: { toolView: value === PLATFORM_DEFAULT ? null : value },
      });
      setFlash({ kind: 'ok', text: `Tool view of ${token.name}: ${value || `platform default (${platformView})`}.` });
      tokens.reload();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };

  const revoke = async (id: string) => {
    try {
      await api(`/api/tokens/${enc(id)}`, { method: 'DELETE' });
      setFlash({ kind: 'ok', text: `Revoked ${id}.` });
      setRevoking(undefined);
      tokens.reload();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };

  return (
    <section className="panel" aria-labelledby="tokens-title">
      <h2 id="tokens-title">Tokens</h2>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <form className="row wrap" onSubmit={create} aria-label="Create a token">
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value)}>
            <option value="agent">agent</option>
            <option value="operator">operator</option>
            <option value="admin">admin</option>
            <option value="ops">ops</option>
          </select>
        </label>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
        </label>
        {role === 'agent' && (
          <label>
            Groups
            <input value={groups} onChange={(e) => setGroups(e.target.value)} />
          </label>
        )}
        {role === 'agent' && (
          <label htmlFor="new-token-view">
            Tool view
            <ToolViewSelect
              id="new-token-view"
              label="Tool view"
              value={toolView}
              toolsets={toolsets}
              platformDefault={platformView}
              onChange={setToolView}
            />
          </label>
        )}
        <button type="submit" className="primary">
          Create token
        </button>
      </form>
      {created && (
        <div className="notice notice-ok once" role="status" data-testid="new-token">
          <p>
            Token for <strong>{created.name}</strong>. Copy it now: it is shown this once and cannot be read again.
          </p>
          <div className="row">
            <input
              readOnly
              value={created.token}
              aria-label="The new token"
              className="mono grow"
              onFocus={(e) => e.target.select()}
            />
            <button type="button" className="small" onClick={() => void navigator.clipboard?.writeText(created.token)}>
              Copy
            </button>
            <button type="button" className="small" onClick={() => setCreated(undefined)}>
              Done
            </button>
          </div>
        </div>
      )}
      {tokens.error && <ErrorBox error={tokens.error} onRetry={tokens.reload} />}
      {tokens.loading && !tokens.data && <Loading what="tokens" />}
      {tokens.data && tokens.data.tokens.length === 0 && <Empty>No tokens.</Empty>}
      {tokens.data && tokens.data.tokens.length > 0 && (
        <div className="table-wrap">
          <table className="tokens">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Groups</th>
                <th scope="col">Tool view</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tokens.data.tokens.map((t) => (
                <tr key={t.id} data-token={t.name}>
                  <td>
                    {t.name}
                    <div className="muted mono small-text">{t.id}</div>
                  </td>
                  <td>{t.role}</td>
                  <td>{t.groups.join(', ') || '—'}</td>
                  <td>
                    {t.role === 'agent' ? (
                      <ToolViewSelect
                        label={`Tool view of ${t.name}`}
                        value={t.toolView ?? PLATFORM_DEFAULT}
                        toolsets={toolsets}
                        platformDefault={platformView}
                        onChange={(value) => void changeView(t, value)}
                      />
                    ) : (
                      '—'
                    )}
                  </td>
                  <td className="small-text">{when(t.createdAt)}</td>
                  <td className="small-text">{when(t.lastUsedAt)}</td>
                  <td>
                    {revoking === t.id ? (
                      <span className="row">
                        <button type="button" className="danger small" onClick={() => revoke(t.id)}>
                          Confirm revoke
                        </button>
                        <button type="button" className="small" onClick={() => setRevoking(undefined)}>
                          Cancel
                        </button>
                      </span>
                    ) : (
                      <button
                        type="button"
                        className="small"
                        onClick={() => setRevoking(t.id)}
                        aria-label={`Revoke ${t.name}`}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
