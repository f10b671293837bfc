/** Environment (stdio) or headers (remote): masked current values, removal, and sealed new ones. */
import { useState } from 'react';
import { api, errorText, type ServerView } from '../api';
import { type SecretRow, SecretRows, secretPayload } from '../Discover';
import { Notice } from '../ui';
import { type Flash, shown } from './shared';

export function SecretsPanel({ server, base, onChanged }: { server: ServerView; base: string; onChanged: () => void }) {
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
