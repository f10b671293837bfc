/**
 * An OAuth server's grant in the drawer's facts: its state (a `needs reconnect` badge when the
 * authorization server refused a refresh) and Connect / Disconnect. Connect opens the authorization
 * server's sign-in in a new tab; the callback stores the grant and tests the server.
 */
import { useState } from 'react';
import { api, errorText, type ServerDetail, type UpstreamAuthView } from '../api';
import { useAsync } from '../ui';

export function OAuthFacts({ server, base, onChanged }: { server: ServerDetail; base: string; onChanged: () => void }) {
  const [refresh, setRefresh] = useState(0);
  const [problem, setProblem] = useState<string>();
  const auth = useAsync(
    () => api<{ auth: UpstreamAuthView }>(`${base}/auth`).then((answer) => answer.auth),
    [base, server.status, server.lastTestedAt, refresh],
  );
  const view = auth.data;
  const connect = async () => {
    setProblem(undefined);
    try {
      const answer = await api<{ authorizationUrl?: string }>(`${base}/auth/connect`, { method: 'POST', body: {} });
      // Opened by the person's browser, never fetched by the gateway.
      if (answer.authorizationUrl) window.open(answer.authorizationUrl, '_blank', 'noopener,noreferrer');
      setRefresh((n) => n + 1);
      onChanged();
    } catch (error) {
      setProblem(errorText(error));
    }
  };
  const disconnect = async () => {
    setProblem(undefined);
    try {
      await api(`${base}/auth`, { method: 'DELETE' });
      setRefresh((n) => n + 1);
      onChanged();
    } catch (error) {
      setProblem(errorText(error));
    }
  };
  return (
    <>
      <dt>Auth</dt>
      <dd data-testid="drawer-oauth">
        OAuth ({server.auth.type === 'oauth' ? server.auth.mode : ''}){' '}
        {view?.state === 'needs_reconnect' && (
          <span className="badge badge-warn" data-testid="oauth-needs-reconnect" title={view.lastError ?? undefined}>
            needs reconnect
          </span>
        )}
        {view?.state === 'connected' && (
          <span data-testid="oauth-state">
            connected{view.expiresAt ? ` · token until ${new Date(view.expiresAt).toLocaleTimeString()}` : ''}
          </span>
        )}
        {view?.state === 'not_connected' && <span data-testid="oauth-state">not connected</span>}{' '}
        <button type="button" data-testid="oauth-connect" onClick={() => void connect()}>
          {view?.state === 'connected' ? 'Reconnect' : 'Connect'}
        </button>
        {view?.state && view.state !== 'not_connected' && (
          <button type="button" data-testid="oauth-disconnect" onClick={() => void disconnect()}>
            Disconnect
          </button>
        )}
        {(problem ?? auth.error) && <div className="error-text small-text">{problem ?? auth.error}</div>}
      </dd>
      {server.auth.type === 'oauth' && server.auth.issuer && (
        <>
          <dt>Issuer</dt>
          <dd className="mono break" data-testid="oauth-issuer">
            {server.auth.issuer}
          </dd>
        </>
      )}
    </>
  );
}
