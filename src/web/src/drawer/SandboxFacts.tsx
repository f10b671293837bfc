/** A stdio server's sandbox in the drawer's facts: off (a badge), or on with its network and uid (from `/process`). */
import { api, type ProcessView, type ServerDetail } from '../api';
import { SandboxOffBadge, useAsync } from '../ui';

export function SandboxFacts({ server, base }: { server: ServerDetail; base: string }) {
  // Read again when the state or the record's sandbox changes (a start gives the running child's uid).
  const process = useAsync(
    () => api<{ process: ProcessView }>(`${base}/process`).then((answer) => answer.process),
    [base, server.state, JSON.stringify(server.sandbox ?? null)],
  );
  const view = process.data;
  const sandboxed = view?.sandboxed ?? server.sandboxed;
  const network = view?.sandbox?.network ?? server.sandbox?.network ?? 'host';
  return (
    <>
      <dt>Sandbox</dt>
      <dd data-testid="drawer-sandbox">
        {sandboxed === false ? (
          <SandboxOffBadge />
        ) : (
          <>
            on · network <span data-testid="sandbox-network">{network}</span>
            {view?.sandbox?.uid != null && (
              <>
                {' '}
                · uid <span data-testid="sandbox-uid">{view.sandbox.uid}</span>
              </>
            )}
            {view && !view.sandbox && <span className="muted"> (not running)</span>}
          </>
        )}
        {process.error && <span className="muted small-text"> (process unavailable: {process.error})</span>}
      </dd>
    </>
  );
}
