/** Settings: surfaces on/off and scope access levels (admins change, operators read); tokens (admins). */
import { type FormEvent, useEffect, useState } from 'react';
import { api, errorText, type SettingsMap } from './api';
import { Tokens } from './Tokens';
import { ToolViewSelect, useToolsetNames } from './ToolView';
import { ErrorBox, Loading, Notice, useAsync, useLive, useSession } from './ui';

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
