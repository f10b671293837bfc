/** Bearer tokens: created (shown once), listed (never the token), revoked. */
import { type FormEvent, useState } from 'react';
import { api, enc, errorText, type SettingsMap, type TokenView } from './api';
import { PLATFORM_DEFAULT, ToolViewSelect, useToolsetNames } from './ToolView';
import { Empty, ErrorBox, Loading, Notice, useAsync, useLive, when } from './ui';

/**
 * Tokens: an admin's every token (any role), or — `mine` — a member's own agent tokens (the gateway
 * keeps them to the member's groups and refuses anything else). An admin also picks each agent
 * token's tool view (issue 22); a member's tokens take the platform default.
 */
export function Tokens({ mine = false }: { mine?: boolean }) {
  const tokens = useAsync(
    (signal) => api<{ tokens: TokenView[]; total: number }>('/api/tokens?limit=500', { signal }),
    [],
  );
  useLive(['token.changed'], tokens.reload);
  const settings = useAsync(
    (signal) => (mine ? Promise.resolve(undefined) : api<{ settings: SettingsMap }>('/api/settings', { signal })),
    [mine],
  );
  useLive(['settings.changed'], settings.reload);
  const platformView = String(settings.data?.settings['hub.toolView'] ?? 'all');
  const toolsets = useToolsetNames(!mine);
  const [toolView, setToolView] = useState(PLATFORM_DEFAULT);
  const [role, setRole] = useState('agent');
  const [name, setName] = useState('');
  const [groups, setGroups] = useState(mine ? '' : 'default');
  const [created, setCreated] = useState<{ name: string; token: string }>();
  const [flash, setFlash] = useState<{ kind: 'ok' | 'error'; text: string }>();
  const [revoking, setRevoking] = useState<string>();

  const create = async (event: FormEvent) => {
    event.preventDefault();
    setFlash(undefined);
    setCreated(undefined);
    try {
      const body: Record<string, unknown> = { role, name: name.trim() };
      const listed = groups
        .split(',')
        .map((g) => g.trim())
        .filter(Boolean);
      // A member's blank groups: the gateway gives the token the member's own.
      if (role === 'agent' && (!mine || listed.length > 0)) body.groups = listed;
      if (role === 'agent' && !mine && toolView !== PLATFORM_DEFAULT) body.toolView = toolView;
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
      <h2 id="tokens-title">{mine ? 'My tokens' : 'Tokens'}</h2>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <form className="row wrap" onSubmit={create} aria-label="Create a token">
        {!mine && (
          <label>
            Role
            <select value={role} onChange={(e) => setRole(e.target.value)}>
              <option value="agent">agent</option>
              <option value="operator">operator</option>
              <option value="admin">admin</option>
              <option value="ops">ops</option>
            </select>
          </label>
        )}
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
        </label>
        {role === 'agent' && (
          <label>
            Groups
            <input
              value={groups}
              onChange={(e) => setGroups(e.target.value)}
              placeholder={mine ? 'all of yours' : undefined}
            />
          </label>
        )}
        {role === 'agent' && !mine && (
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
                {!mine && <th scope="col">Tool view</th>}
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
                  {!mine && (
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
                  )}
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
