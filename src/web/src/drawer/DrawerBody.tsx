/** The drawer's content: the server's facts, a shared flash for quick actions, then one panel per concern. */
import { useState } from 'react';
import { errorText, type ServerDetail, type ServerEvent } from '../api';
import { Notice, when } from '../ui';
import { ActivatePanel } from './ActivatePanel';
import { EventsPanel } from './EventsPanel';
import { ExposurePanel } from './ExposurePanel';
import { OAuthFacts } from './OAuthFacts';
import { SandboxFacts } from './SandboxFacts';
import { SecretsPanel } from './SecretsPanel';
import { type Flash, shown } from './shared';
import { ToolsPanel } from './ToolsPanel';
import { UninstallPanel } from './UninstallPanel';

/** Runs one quick action (`label` marks it busy); a returned text is flashed as success. */
export type Act = (label: string, run: () => Promise<string | undefined>) => Promise<void>;

export function DrawerBody({
  server,
  base,
  onChanged,
  onGone,
  events,
  eventsError,
}: {
  server: ServerDetail;
  base: string;
  onChanged: () => void;
  onGone: () => void;
  events: ServerEvent[] | undefined;
  eventsError: string | undefined;
}) {
  const [flash, setFlash] = useState<Flash>();
  const [busy, setBusy] = useState<string>();

  const act = async (label: string, run: () => Promise<string | undefined>) => {
    setBusy(label);
    setFlash(undefined);
    try {
      const text = await run();
      if (text) setFlash({ kind: 'ok', text });
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setBusy(undefined);
    }
  };

  return (
    <div className="drawer-body">
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <dl className="facts">
        <dt>Status</dt>
        <dd data-testid="drawer-status">
          {server.status === 'unknown' ? 'not tested' : server.status}
          {server.latencyMs !== null && server.status === 'connected' ? ` · ${server.latencyMs} ms` : ''}
          {server.lastTestedAt ? ` · tested ${when(server.lastTestedAt)}` : ''}
        </dd>
        {server.lastError && (
          <>
            <dt>Last error</dt>
            <dd className="error-text">{server.lastError}</dd>
          </>
        )}
        <dt>State</dt>
        <dd>{server.state ?? '—'}</dd>
        <dt>Transport</dt>
        <dd>{server.transport}</dd>
        {server.transport === 'stdio' && <SandboxFacts server={server} base={base} />}
        <dt>{server.transport === 'stdio' ? 'Command' : 'URL'}</dt>
        <dd className="mono break">
          {server.transport === 'stdio' ? [server.command, ...server.args].join(' ') : server.url}
        </dd>
        {server.transport !== 'stdio' && server.auth.type === 'oauth' && (
          <OAuthFacts server={server} base={base} onChanged={onChanged} />
        )}
        {server.transport !== 'stdio' && server.auth.type !== 'oauth' && (
          <>
            <dt>Auth</dt>
            <dd>{server.auth.type === 'bearer' ? `bearer (${shown(server.auth.token)})` : 'none'}</dd>
          </>
        )}
        <dt>Source</dt>
        <dd>{server.sourceKind}</dd>
      </dl>

      <ActivatePanel server={server} base={base} busy={busy} act={act} />

      <ToolsPanel server={server} base={base} onChanged={onChanged} />
      <ExposurePanel server={server} base={base} onChanged={onChanged} />
      <SecretsPanel server={server} base={base} onChanged={onChanged} />

      <EventsPanel events={events} error={eventsError} />

      <UninstallPanel server={server} base={base} onGone={onGone} />
    </div>
  );
}
