/**
 * A member's own access: the agent tokens it holds and the apps it let in with OAuth (grants), each
 * revocable. The gateway lists only the member's own and refuses the rest; this screen asks for no more.
 */
import { useState } from 'react';
import { api, enc, errorText, type OAuthGrant } from './api';
import { Tokens } from './Tokens';
import { Empty, ErrorBox, Loading, Notice, useAsync, when } from './ui';

export function Account() {
  return (
    <section aria-labelledby="account-title">
      <div className="section-head">
        <h1 id="account-title">Account</h1>
      </div>
      <Tokens mine />
      <Grants />
    </section>
  );
}

function Grants() {
  const grants = useAsync((signal) => api<{ grants: OAuthGrant[] }>('/api/oauth/grants', { signal }), []);
  const [flash, setFlash] = useState<{ kind: 'ok' | 'error'; text: string }>();
  const revoke = async (grant: OAuthGrant) => {
    try {
      await api(`/api/oauth/grants/${enc(grant.id)}`, { method: 'DELETE' });
      setFlash({ kind: 'ok', text: `${grant.clientName} no longer has access.` });
      grants.reload();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };
  return (
    <section className="panel" aria-labelledby="grants-title">
      <h2 id="grants-title">Connected apps</h2>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      {grants.error && <ErrorBox error={grants.error} onRetry={grants.reload} />}
      {grants.loading && !grants.data && <Loading what="connected apps" />}
      {grants.data && grants.data.grants.length === 0 && <Empty>No app signed in with your account.</Empty>}
      {grants.data && grants.data.grants.length > 0 && (
        <div className="table-wrap">
          <table className="grants">
            <thead>
              <tr>
                <th scope="col">App</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Groups</th>
                <th scope="col">Allowed</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {grants.data.grants.map((g) => (
                <tr key={g.id} data-grant={g.clientName}>
                  <td>{g.clientName}</td>
                  <td className="mono small-text">{g.resource}</td>
                  <td>{g.groups.join(', ') || '—'}</td>
                  <td className="small-text">{when(g.createdAt)}</td>
                  <td className="small-text">{when(g.lastUsedAt)}</td>
                  <td>
                    <button
                      type="button"
                      className="small"
                      onClick={() => void revoke(g)}
                      aria-label={`Revoke ${g.clientName}`}
                    >
                      Revoke
                    </button>
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
