/** Activate and test: the enabled toggle, the handshake test and, for stdio, start/stop/restart. */
import { useEffect, useState } from 'react';
import { ApiError, api, type ServerDetail, type ServerView, type TestResult } from '../api';
import { HUB_OFF_REASON, useSession } from '../ui';
import type { Act } from './DrawerBody';

export function ActivatePanel({
  server,
  base,
  busy,
  act,
}: {
  server: ServerDetail;
  base: string;
  busy: string | undefined;
  act: Act;
}) {
  const { hubOn, role } = useSession();
  const [test, setTest] = useState<TestResult>();
  const [enabled, setEnabled] = useState(server.enabled);
  useEffect(() => setEnabled(server.enabled), [server.enabled]);
  const [privateNetwork, setPrivateNetwork] = useState(server.privateNetwork);
  useEffect(() => setPrivateNetwork(server.privateNetwork), [server.privateNetwork]);

  const runTest = () =>
    act('test', async () => {
      setTest(undefined);
      setTest(await api<TestResult>(`${base}/test`, { method: 'POST' }));
      return undefined;
    });

  const lifecycle = (verb: 'start' | 'stop' | 'restart') =>
    act(verb, async () => {
      try {
        const answer = await api<{ server?: ServerView } & Partial<ServerView>>(`${base}/${verb}`, { method: 'POST' });
        const state = answer.server?.state ?? answer.state;
        return `${verb[0]?.toUpperCase()}${verb.slice(1)} requested${state ? `: now ${state}` : ''}.`;
      } catch (error) {
        if (error instanceof ApiError && error.noSuchRoute) {
          throw new Error(
            `This gateway cannot ${verb} stdio servers yet (POST …/${verb} answered 404). Update Gatehouse to manage the process from here.`,
          );
        }
        throw error;
      }
    });

  return (
    <section className="panel" aria-labelledby="activate-title">
      <h3 id="activate-title">Activate and test</h3>
      <div className="row wrap">
        <label className="toggle">
          <input
            type="checkbox"
            checked={enabled}
            disabled={busy !== undefined}
            onChange={(e) => {
              const next = e.target.checked;
              setEnabled(next); // shown at once; put back if the gateway refuses
              void act('enabled', async () => {
                try {
                  await api(`${base}/config`, { method: 'PATCH', body: { enabled: next } });
                } catch (error) {
                  setEnabled(!next);
                  throw error;
                }
                return next ? 'Enabled: agents can see it.' : 'Disabled: its tools left the agents’ view.';
              });
            }}
          />
          Enabled
        </label>
        {server.transport !== 'stdio' && role === 'admin' && (
          <label className="toggle" title="Allow loopback and LAN addresses (admin only)">
            <input
              type="checkbox"
              checked={privateNetwork}
              disabled={busy !== undefined}
              onChange={(e) => {
                const next = e.target.checked;
                setPrivateNetwork(next);
                void act('privateNetwork', async () => {
                  try {
                    await api(`${base}/config`, { method: 'PATCH', body: { privateNetwork: next } });
                  } catch (error) {
                    setPrivateNetwork(!next);
                    throw error;
                  }
                  return next
                    ? 'Private network allowed: it may be on loopback or your LAN.'
                    : 'Private network refused: public addresses only.';
                });
              }}
            />
            Private network
          </label>
        )}
        <button
          type="button"
          className="primary"
          onClick={runTest}
          disabled={busy !== undefined || !hubOn}
          title={hubOn ? 'Handshake: connect and list tools' : HUB_OFF_REASON}
        >
          {busy === 'test' ? 'Testing…' : 'Test'}
        </button>
        {server.transport === 'stdio' &&
          (['start', 'stop', 'restart'] as const).map((verb) => (
            <button
              key={verb}
              type="button"
              onClick={() => lifecycle(verb)}
              disabled={busy !== undefined || !hubOn}
              title={hubOn ? `${verb} the process` : HUB_OFF_REASON}
            >
              {busy === verb ? `${verb}…` : verb[0]?.toUpperCase() + verb.slice(1)}
            </button>
          ))}
      </div>
      {!hubOn && <p className="muted small-text">{HUB_OFF_REASON}</p>}
      {test && (
        <div className={`test-result ${test.ok ? 'ok' : 'failed'}`} role="status" data-testid="test-result">
          {test.ok ? (
            <>
              Connected in {test.latencyMs} ms · {test.discoveredToolsCount} tool
              {test.discoveredToolsCount === 1 ? '' : 's'}
            </>
          ) : (
            <>
              Failed after {test.latencyMs} ms: {test.error?.message ?? 'unknown error'}
              {test.error?.code ? ` (${test.error.code})` : ''}
            </>
          )}
        </div>
      )}
    </section>
  );
}
