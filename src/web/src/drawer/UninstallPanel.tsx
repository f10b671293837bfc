/** Danger zone: uninstall the server after a focused confirmation. */
import { useEffect, useRef, useState } from 'react';
import { api, errorText, type ServerView } from '../api';
import { ErrorBox } from '../ui';

export function UninstallPanel({ server, base, onGone }: { server: ServerView; base: string; onGone: () => void }) {
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
