/** Tools: the tool mode, default tier, per-tool tier and include/exclude, with each tool's pin state. */
import { Fragment, useEffect, useState } from 'react';
import { api, errorText, type ServerDetail, type Tier, type ToolPolicy } from '../api';
import { Notice, useAsync } from '../ui';
import { OverrideEditor, OverrideState, type OverrideView } from './OverrideEditor';
import type { Flash } from './shared';

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
export function ToolsPanel({ server, base, onChanged }: { server: ServerDetail; base: string; onChanged: () => void }) {
  const [policy, setPolicy] = useState<ToolPolicy>(server.toolPolicy);
  const [flash, setFlash] = useState<Flash>();
  const [saving, setSaving] = useState(false);
  useEffect(() => setPolicy(server.toolPolicy), [server.toolPolicy]);
  const dirty = JSON.stringify(policy) !== JSON.stringify(server.toolPolicy);
  const pins = new Map(server.pins.map((p) => [p.tool, p]));
  const overrideList = useAsync(
    (signal) => api<{ overrides: OverrideView[] }>(`${base}/overrides?limit=500`, { signal }),
    [base, server],
  );
  const overrides = new Map((overrideList.data?.overrides ?? []).map((o) => [o.tool, o]));
  const [editingOverride, setEditingOverride] = useState<string>();

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
                <th scope="col">Override</th>
              </tr>
            </thead>
            <tbody>
              {server.discoveredTools.map((tool) => {
                const pin = pins.get(tool.name);
                return (
                  <Fragment key={tool.name}>
                    <tr data-tool={tool.name}>
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
                      <td>
                        <OverrideState view={overrides.get(tool.name)} />{' '}
                        <button
                          type="button"
                          className="small"
                          aria-label={`Override ${tool.name}`}
                          onClick={() => setEditingOverride(editingOverride === tool.name ? undefined : tool.name)}
                        >
                          {overrides.has(tool.name) ? 'Edit' : 'Override…'}
                        </button>
                      </td>
                    </tr>
                    {editingOverride === tool.name && (
                      <tr>
                        <td colSpan={policy.mode !== 'all' ? 5 : 4}>
                          <OverrideEditor
                            base={base}
                            tool={tool.name}
                            current={overrides.get(tool.name)}
                            onDone={(message) => {
                              setEditingOverride(undefined);
                              if (message) setFlash({ kind: 'ok', text: message });
                              overrideList.reload();
                              onChanged();
                            }}
                          />
                        </td>
                      </tr>
                    )}
                  </Fragment>
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
