/**
 * A tool's override in the drawer (issue 22): its display name in the aggregate, a replaced or appended
 * description, arguments hidden behind fixed values (JSON, checked by the gateway against the pinned schema),
 * annotations. Shows whether it is in force or quarantined (a fixed argument the upstream removed).
 */
import { type FormEvent, useState } from 'react';
import { api, enc, errorText } from '../api';
import { Notice } from '../ui';

export interface OverrideView {
  tool: string;
  state: 'active' | 'quarantined' | 'tool_missing';
  reason?: string;
  missingArguments?: string[];
  aggregatedName: string | null;
  exposedName: string | null;
  override: {
    displayName?: string;
    description?: string;
    descriptionMode?: 'replace' | 'append';
    fixedArguments?: Record<string, unknown>;
    annotations?: Record<string, unknown>;
  };
}

function parseObject(text: string, what: string): Record<string, unknown> | undefined {
  if (!text.trim()) return undefined;
  const value = JSON.parse(text) as unknown;
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Error(`${what} must be a JSON object`);
  return value as Record<string, unknown>;
}

const pretty = (value: unknown) => (value === undefined ? '' : JSON.stringify(value, null, 2));

export function OverrideState({ view }: { view: OverrideView | undefined }) {
  if (!view) return <span className="muted">—</span>;
  const name = view.exposedName && view.exposedName !== view.aggregatedName ? ` as ${view.exposedName}` : '';
  return (
    <span className={`tag override-${view.state}`} data-testid="override-state">
      {view.state === 'active' ? `override${name}` : `override ${view.state.replace('_', ' ')}`}
      {view.reason ? ` (${view.reason}${view.missingArguments ? `: ${view.missingArguments.join(', ')}` : ''})` : ''}
    </span>
  );
}

export function OverrideEditor({
  base,
  tool,
  current,
  onDone,
}: {
  base: string;
  tool: string;
  current: OverrideView | undefined;
  onDone: (message: string) => void;
}) {
  const o = current?.override ?? {};
  const [displayName, setDisplayName] = useState(o.displayName ?? '');
  const [description, setDescription] = useState(o.description ?? '');
  const [mode, setMode] = useState<'replace' | 'append'>(o.descriptionMode ?? 'replace');
  const [fixed, setFixed] = useState(pretty(o.fixedArguments));
  const [annotations, setAnnotations] = useState(pretty(o.annotations));
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const path = `${base}/overrides/${enc(tool)}`;

  const save = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const fixedArguments = parseObject(fixed, 'Fixed arguments');
      const shownAnnotations = parseObject(annotations, 'Annotations');
      await api(path, {
        method: 'PUT',
        body: {
          ...(displayName.trim() ? { displayName: displayName.trim() } : {}),
          ...(description.trim() ? { description, descriptionMode: mode } : {}),
          ...(fixedArguments ? { fixedArguments } : {}),
          ...(shownAnnotations ? { annotations: shownAnnotations } : {}),
        },
      });
      onDone(`Override of ${tool} saved.`);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    try {
      await api(path, { method: 'DELETE' });
      onDone(`Override of ${tool} removed.`);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  return (
    <form className="override-editor" onSubmit={save} aria-label={`Override of ${tool}`}>
      <label>
        Display name (its name in the aggregate and toolsets; letters, digits, _ . -, ≤ 64)
        <input
          value={displayName}
          onChange={(e) => setDisplayName(e.target.value)}
          maxLength={64}
          placeholder={current?.aggregatedName ?? ''}
        />
      </label>
      <label>
        Description
        <textarea value={description} onChange={(e) => setDescription(e.target.value)} rows={3} />
      </label>
      <label>
        <select
          value={mode}
          onChange={(e) => setMode(e.target.value as 'replace' | 'append')}
          aria-label="Description mode"
        >
          <option value="replace">replaces the upstream description</option>
          <option value="append">is appended to the upstream description</option>
        </select>
      </label>
      <label>
        Fixed arguments (JSON object: hidden from agents, sent on every call; approval cards still show them)
        <textarea value={fixed} onChange={(e) => setFixed(e.target.value)} rows={3} spellCheck={false} />
      </label>
      <label>
        Annotations (JSON object, e.g. {'{"readOnlyHint": true}'})
        <textarea value={annotations} onChange={(e) => setAnnotations(e.target.value)} rows={2} spellCheck={false} />
      </label>
      {error && <Notice kind="error">{error}</Notice>}
      <div className="row">
        <button type="submit" className="primary" disabled={busy}>
          Save override
        </button>
        {current && (
          <button type="button" className="danger" disabled={busy} onClick={remove}>
            Remove override
          </button>
        )}
        <button type="button" onClick={() => onDone('')}>
          Cancel
        </button>
      </div>
    </form>
  );
}
