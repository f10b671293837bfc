/**
 * One server's detail drawer: enable/disable, test (latency, tool count, error), start/stop/restart for
 * stdio, tool mode and per-tool tiers with pin state, exposure groups, masked secrets, recent events,
 * uninstall with confirmation. This module is the dialog shell: loading, live reloads and focus.
 */
import { useEffect, useRef } from 'react';
import { api, enc, type ServerDetail, type ServerEvent } from '../api';
import { ErrorBox, Loading, StatusDot, useAsync, useLive } from '../ui';
import { DrawerBody } from './DrawerBody';

export function ServerDrawer({ id, onClose }: { id: string; onClose: () => void }) {
  const base = `/api/mcp/servers/${enc(id)}`;
  const detail = useAsync(() => api<ServerDetail>(base), [base]);
  const logs = useAsync(() => api<{ events: ServerEvent[] }>(`${base}/logs?limit=20`), [base]);
  const reloadAll = () => {
    detail.reload();
    logs.reload();
  };
  useLive(['server.', 'tool.quarantined', 'tool.approved'], (event) => {
    if (event.data.id === id || event.data.server === id) reloadAll();
  });
  const ref = useRef<HTMLElement>(null);
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    // Focus moves into the drawer, stays there while it is open (Tab wraps), and returns on close.
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    ref.current?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') close.current();
      if (e.key !== 'Tab' || !ref.current) return;
      const focusable = [
        ...ref.current.querySelectorAll<HTMLElement>('button, input, select, textarea, a[href]'),
      ].filter((el) => !el.hasAttribute('disabled'));
      const first = focusable[0];
      const last = focusable[focusable.length - 1];
      if (!first || !last) return;
      if (e.shiftKey && (document.activeElement === first || document.activeElement === ref.current)) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && document.activeElement === last) {
        e.preventDefault();
        first.focus();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => {
      window.removeEventListener('keydown', onKey);
      opener?.focus();
    };
  }, []);

  return (
    <div className="drawer-backdrop">
      <button type="button" className="drawer-scrim" aria-label="Close the server detail" onClick={onClose} />
      <aside className="drawer" ref={ref} tabIndex={-1} role="dialog" aria-modal="true" aria-labelledby="drawer-title">
        <div className="drawer-head">
          <h2 id="drawer-title">
            {detail.data ? (
              <>
                <StatusDot status={detail.data.status} lastError={detail.data.lastError} /> {detail.data.name}
              </>
            ) : (
              id
            )}
          </h2>
          <button type="button" className="small" onClick={onClose} aria-label="Close">
            Close
          </button>
        </div>
        {detail.error && <ErrorBox error={detail.error} onRetry={detail.reload} />}
        {detail.loading && !detail.data && <Loading what="the server" />}
        {detail.data && (
          <DrawerBody
            server={detail.data}
            base={base}
            onChanged={reloadAll}
            onGone={onClose}
            events={logs.data?.events}
            eventsError={logs.error}
          />
        )}
      </aside>
    </div>
  );
}
