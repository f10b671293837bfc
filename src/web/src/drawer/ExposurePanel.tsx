/** Exposure: which agent groups see this server. */
import { type FormEvent, useEffect, useState } from 'react';
import { api, errorText, type ServerView } from '../api';
import { Notice } from '../ui';
import type { Flash } from './shared';

export function ExposurePanel({
  server,
  base,
  onChanged,
}: {
  server: ServerView;
  base: string;
  onChanged: () => void;
}) {
  const [groups, setGroups] = useState(server.exposure.join(', '));
  const [flash, setFlash] = useState<Flash>();
  useEffect(() => setGroups(server.exposure.join(', ')), [server.exposure]);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setFlash(undefined);
    try {
      const list = groups
        .split(',')
        .map((g) => g.trim())
        .filter(Boolean);
      await api(`${base}/exposure`, { method: 'PATCH', body: { groups: list } });
      setFlash({ kind: 'ok', text: list.length ? `Visible to: ${list.join(', ')}.` : 'Visible to no agent group.' });
      onChanged();
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    }
  };
  return (
    <section className="panel" aria-labelledby="exposure-title">
      <h3 id="exposure-title">Exposure</h3>
      {flash && <Notice kind={flash.kind}>{flash.text}</Notice>}
      <form className="row wrap" onSubmit={submit}>
        <label className="grow">
          Agent groups that see this server (comma-separated)
          <input value={groups} onChange={(e) => setGroups(e.target.value)} />
        </label>
        <button type="submit">Save groups</button>
      </form>
    </section>
  );
}
