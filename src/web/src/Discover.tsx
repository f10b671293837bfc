/**
 * Discover: the catalog (search, categories, one-click preset install) and manual entry (name, URL or
 * command + args, transport, auth none/bearer/oauth, headers and env as masked inputs or `MCP_SECRET_` env
 * references). Secret values are write-only: the API answers `{"set": true}` and the form forgets them.
 */
import { type FormEvent, useId, useState } from 'react';
import { api, type CatalogItem, errorText, type ServerView } from './api';
import { Empty, ErrorBox, Loading, Notice, useAsync, useSession } from './ui';

export interface SecretRow {
  key: number;
  name: string;
  /** `value`: a literal, sealed at rest; `env`: the name of an `MCP_SECRET_…` variable. */
  mode: 'value' | 'env';
  value: string;
}

export function secretPayload(rows: SecretRow[]): Record<string, string | { env: string }> {
  const out: Record<string, string | { env: string }> = {};
  for (const row of rows) {
    if (!row.name.trim()) continue;
    out[row.name.trim()] = row.mode === 'env' ? { env: row.value.trim() } : row.value;
  }
  return out;
}

let nextKey = 1;

/** Rows of name + masked value (or env reference); values are never rendered back as text. */
export function SecretRows({
  rows,
  onChange,
  kind,
}: {
  rows: SecretRow[];
  onChange: (rows: SecretRow[]) => void;
  kind: 'headers' | 'env';
}) {
  const label = kind === 'env' ? 'variable' : 'header';
  const update = (key: number, change: Partial<SecretRow>) =>
    onChange(rows.map((r) => (r.key === key ? { ...r, ...change } : r)));
  return (
    <div className="secret-rows">
      {rows.map((row, index) => (
        <fieldset key={row.key} className="secret-row">
          <legend className="sr-only">
            {label} {index + 1}
          </legend>
          <label>
            {kind === 'env' ? 'Variable name' : 'Header name'}
            <input
              value={row.name}
              onChange={(e) => update(row.key, { name: e.target.value })}
              placeholder={kind === 'env' ? 'API_KEY' : 'Authorization'}
              spellCheck={false}
            />
          </label>
          <label>
            Source
            <select
              value={row.mode}
              onChange={(e) => update(row.key, { mode: e.target.value as SecretRow['mode'], value: '' })}
            >
              <option value="value">secret value</option>
              <option value="env">env reference</option>
            </select>
          </label>
          <label className="grow">
            {row.mode === 'env' ? 'Environment variable (MCP_SECRET_…)' : 'Value (sealed, never shown again)'}
            <input
              type={row.mode === 'env' ? 'text' : 'password'}
              autoComplete="off"
              spellCheck={false}
              value={row.value}
              placeholder={row.mode === 'env' ? 'MCP_SECRET_…' : ''}
              onChange={(e) => update(row.key, { value: e.target.value })}
            />
          </label>
          <button type="button" className="small" onClick={() => onChange(rows.filter((r) => r.key !== row.key))}>
            Remove
          </button>
        </fieldset>
      ))}
      <button
        type="button"
        className="small"
        onClick={() => onChange([...rows, { key: nextKey++, name: '', mode: 'value', value: '' }])}
      >
        Add {label}
      </button>
    </div>
  );
}

export function Discover() {
  return (
    <section aria-labelledby="discover-title">
      <div className="section-head">
        <h1 id="discover-title">Discover</h1>
      </div>
      <div className="two-col">
        <CatalogBrowser />
        <ManualEntry />
      </div>
    </section>
  );
}

function CatalogBrowser() {
  const { openServer } = useSession();
  const [q, setQ] = useState('');
  const [category, setCategory] = useState('');
  const [flash, setFlash] = useState<{ kind: 'ok' | 'error'; text: string; id?: string }>();
  const [installing, setInstalling] = useState<string>();
  const query = new URLSearchParams({ limit: '200' });
  if (q.trim()) query.set('q', q.trim());
  if (category) query.set('category', category);
  const qs = query.toString();
  const catalog = useAsync(
    (signal) =>
      api<{ items: CatalogItem[]; total: number; categories: string[] }>(`/api/mcp/catalog?${qs}`, { signal }),
    [qs],
  );
  const [categories, setCategories] = useState<string[]>([]);
  if (catalog.data && categories.length === 0 && catalog.data.categories.length > 0)
    setCategories(catalog.data.categories);

  const [configuring, setConfiguring] = useState<string>();
  const needsConfiguration = (item: CatalogItem) => item.envRequired.length > 0 || item.argsRequired !== undefined;

  const install = async (item: CatalogItem, given: { env?: Record<string, string>; args?: string[] } = {}) => {
    setInstalling(item.name);
    setFlash(undefined);
    try {
      const answer = await api<{ installed: ServerView }>('/api/mcp/install', {
        method: 'POST',
        body: { preset: item.name, ...given },
      });
      setConfiguring(undefined);
      catalog.reload();
      setFlash({
        kind: 'ok',
        text: `Installed ${item.title} as “${answer.installed.id}”.`,
        id: answer.installed.id,
      });
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setInstalling(undefined);
    }
  };

  return (
    <section className="panel" aria-labelledby="catalog-title">
      <h2 id="catalog-title">Catalog</h2>
      <div className="filters">
        <label className="grow">
          Search the catalog
          <input type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="name or description" />
        </label>
        <label>
          Category
          <select value={category} onChange={(e) => setCategory(e.target.value)}>
            <option value="">all</option>
            {categories.map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </label>
      </div>
      {flash && (
        <Notice kind={flash.kind}>
          {flash.text}{' '}
          {flash.id && (
            <button type="button" className="small" onClick={() => openServer(flash.id as string)}>
              Open and test
            </button>
          )}
        </Notice>
      )}
      {catalog.error && <ErrorBox error={catalog.error} onRetry={catalog.reload} />}
      {catalog.loading && !catalog.data && <Loading what="the catalog" />}
      {catalog.data && catalog.data.items.length === 0 && <Empty>Nothing in the catalog matches.</Empty>}
      <ul className="catalog">
        {catalog.data?.items.map((item) => (
          <li key={item.name} className="card" data-preset={item.name}>
            <div className="row spread">
              <strong>{item.title}</strong>
              <span className="tag">{item.category}</span>
            </div>
            <div className="muted mono small-text">{item.name}</div>
            <p>{item.description}</p>
            <div className="row spread">
              <span className="muted small-text">
                {item.transport}
                {item.envRequired.length > 0 ? ` · needs ${item.envRequired.join(', ')}` : ''}
                {item.argsRequired ? ` · needs ${item.argsRequired}` : ''}
              </span>
              {item.installed && (
                <button
                  type="button"
                  className="small"
                  onClick={() => openServer(item.installedAs as string)}
                  aria-label={`Open ${item.title}, installed as ${item.installedAs}`}
                >
                  <span className="tag installed">installed</span> as {item.installedAs}
                </button>
              )}
              <button
                type="button"
                className="primary small"
                disabled={installing !== undefined}
                onClick={() =>
                  needsConfiguration(item)
                    ? setConfiguring(configuring === item.name ? undefined : item.name)
                    : install(item)
                }
                aria-label={`Install ${item.title}`}
                aria-expanded={needsConfiguration(item) ? configuring === item.name : undefined}
              >
                {installing === item.name ? 'Installing…' : item.installed ? 'Install again' : 'Install'}
              </button>
            </div>
            {configuring === item.name && (
              <PresetForm item={item} busy={installing !== undefined} onInstall={(given) => install(item, given)} />
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** What a preset needs before it can work (its variables, its extra arguments), asked before installing it. */
function PresetForm({
  item,
  busy,
  onInstall,
}: {
  item: CatalogItem;
  busy: boolean;
  onInstall: (given: { env?: Record<string, string>; args?: string[] }) => void;
}) {
  const ids = useId();
  const [env, setEnv] = useState<Record<string, string>>({});
  const [args, setArgs] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const list = args
      .split('\n')
      .map((a) => a.trim())
      .filter(Boolean);
    onInstall({
      ...(item.envRequired.length > 0 ? { env } : {}),
      ...(list.length > 0 ? { args: list } : {}),
    });
  };
  return (
    <form className="stack preset-form" onSubmit={submit} aria-label={`Configure ${item.title}`}>
      {item.envRequired.map((name) => (
        <label key={name}>
          {name} (sealed, never shown again)
          <input
            type="password"
            autoComplete="off"
            spellCheck={false}
            required
            value={env[name] ?? ''}
            onChange={(e) => setEnv({ ...env, [name]: e.target.value })}
          />
        </label>
      ))}
      {item.argsRequired && (
        <label>
          {`Arguments: ${item.argsRequired} (one per line)`}
          <textarea
            id={`${ids}-args`}
            required
            rows={2}
            spellCheck={false}
            value={args}
            onChange={(e) => setArgs(e.target.value)}
          />
        </label>
      )}
      <button type="submit" className="primary small" disabled={busy}>
        {busy ? 'Installing…' : `Install ${item.title}`}
      </button>
    </form>
  );
}

/** The server id rule, in our words (the browser's own pattern message says only "match the requested format"). */
export const ID_RULE = 'An id is 1–32 lower-case letters, digits and “-”, starting with a letter or digit (no “_”).';
const ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;

function ManualEntry() {
  const { openServer, role } = useSession();
  const ids = useId();
  const [name, setName] = useState('');
  const [id, setId] = useState('');
  const [transport, setTransport] = useState<'streamable-http' | 'stdio'>('streamable-http');
  const [url, setUrl] = useState('');
  const [command, setCommand] = useState('');
  const [args, setArgs] = useState('');
  const [authType, setAuthType] = useState<'none' | 'bearer' | 'oauth'>('none');
  const [oauthMode, setOauthMode] = useState<'shared' | 'per-user'>('shared');
  const [oauthClientId, setOauthClientId] = useState('');
  const [oauthClientSecret, setOauthClientSecret] = useState('');
  const [oauthIssuer, setOauthIssuer] = useState('');
  const [bearer, setBearer] = useState<SecretRow>({ key: 0, name: 'token', mode: 'value', value: '' });
  const [headers, setHeaders] = useState<SecretRow[]>([]);
  const [env, setEnv] = useState<SecretRow[]>([]);
  const [privateNetwork, setPrivateNetwork] = useState(false);
  const [flash, setFlash] = useState<{ kind: 'ok' | 'error'; text: string; id?: string }>();
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setFlash(undefined);
    const manifest: Record<string, unknown> = { name: name.trim(), transport };
    if (id.trim()) manifest.id = id.trim();
    if (transport === 'streamable-http') {
      manifest.url = url.trim();
      if (headers.length) manifest.headers = secretPayload(headers);
      if (authType === 'bearer') {
        manifest.auth = { type: 'bearer', token: bearer.mode === 'env' ? { env: bearer.value.trim() } : bearer.value };
      }
      if (authType === 'oauth') {
        // Connect from the server's drawer once installed; the client is optional (else CIMD or DCR).
        manifest.auth = {
          type: 'oauth',
          mode: oauthMode,
          ...(oauthClientId.trim() ? { clientId: oauthClientId.trim() } : {}),
          ...(oauthClientId.trim() && oauthClientSecret ? { clientSecret: oauthClientSecret } : {}),
          // Checked by the gateway (its refusal names auth.issuer and the rule).
          ...(oauthIssuer.trim() ? { issuer: oauthIssuer.trim() } : {}),
        };
      }
      if (privateNetwork) manifest.privateNetwork = true;
    } else {
      manifest.command = command.trim();
      const list = args
        .split('\n')
        .map((a) => a.trim())
        .filter(Boolean);
      if (list.length) manifest.args = list;
      if (env.length) manifest.env = secretPayload(env);
    }
    try {
      const answer = await api<{ installed: ServerView }>('/api/mcp/install', { method: 'POST', body: { manifest } });
      setFlash({
        kind: 'ok',
        text: `Installed ${answer.installed.name} as “${answer.installed.id}”.`,
        id: answer.installed.id,
      });
      // Secrets leave the page once sent.
      setBearer((b) => ({ ...b, value: '' }));
      setHeaders([]);
      setEnv([]);
    } catch (error) {
      setFlash({ kind: 'error', text: errorText(error) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="panel" aria-labelledby={`${ids}-title`}>
      <h2 id={`${ids}-title`}>Add a server by hand</h2>
      {flash && (
        <Notice kind={flash.kind}>
          {flash.text}{' '}
          {flash.id && (
            <button type="button" className="small" onClick={() => openServer(flash.id as string)}>
              Open and test
            </button>
          )}
        </Notice>
      )}
      <form className="stack" onSubmit={submit} aria-label="Manual entry">
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />
        </label>
        <label>
          Id (optional; derived from the name)
          <input
            value={id}
            onChange={(e) => {
              setId(e.target.value);
              const value = e.target.value.trim();
              e.target.setCustomValidity(value === '' || ID_PATTERN.test(value) ? '' : ID_RULE);
            }}
            aria-describedby={`${ids}-id-rule`}
            aria-invalid={id.trim() !== '' && !ID_PATTERN.test(id.trim())}
            spellCheck={false}
          />
        </label>
        {id.trim() !== '' && !ID_PATTERN.test(id.trim()) && (
          <p id={`${ids}-id-rule`} className="field-error small-text" role="alert">
            {ID_RULE}
          </p>
        )}
        <fieldset className="row">
          <legend>Transport</legend>
          {(['streamable-http', 'stdio'] as const).map((t) => (
            <label key={t} className="inline">
              <input
                type="radio"
                name={`${ids}-transport`}
                checked={transport === t}
                onChange={() => setTransport(t)}
              />
              {t}
            </label>
          ))}
        </fieldset>
        {transport === 'streamable-http' ? (
          <>
            <label>
              URL
              <input
                type="url"
                value={url}
                onChange={(e) => setUrl(e.target.value)}
                required
                placeholder="https://…/mcp"
              />
            </label>
            <fieldset className="row">
              <legend>Auth</legend>
              {(['none', 'bearer', 'oauth'] as const).map((a) => (
                <label key={a} className="inline">
                  <input type="radio" name={`${ids}-auth`} checked={authType === a} onChange={() => setAuthType(a)} />
                  {a}
                </label>
              ))}
            </fieldset>
            {authType === 'bearer' && (
              <div className="row wrap">
                <label>
                  Token source
                  <select
                    value={bearer.mode}
                    onChange={(e) => setBearer({ ...bearer, mode: e.target.value as SecretRow['mode'], value: '' })}
                  >
                    <option value="value">secret value</option>
                    <option value="env">env reference</option>
                  </select>
                </label>
                <label className="grow">
                  {bearer.mode === 'env'
                    ? 'Environment variable (MCP_SECRET_…)'
                    : 'Bearer token (sealed, never shown again)'}
                  <input
                    type={bearer.mode === 'env' ? 'text' : 'password'}
                    autoComplete="off"
                    value={bearer.value}
                    onChange={(e) => setBearer({ ...bearer, value: e.target.value })}
                    required
                  />
                </label>
              </div>
            )}
            {authType === 'oauth' && (
              <div className="row wrap" data-testid="oauth-fields">
                <label>
                  Grant
                  <select value={oauthMode} onChange={(e) => setOauthMode(e.target.value as 'shared' | 'per-user')}>
                    <option value="shared">shared (connect once for every agent)</option>
                    <option value="per-user">per-user (each person connects)</option>
                  </select>
                </label>
                <label className="grow">
                  Client id (optional)
                  <input value={oauthClientId} onChange={(e) => setOauthClientId(e.target.value)} autoComplete="off" />
                </label>
                <label className="grow">
                  Client secret (optional, sealed)
                  <input
                    type="password"
                    value={oauthClientSecret}
                    onChange={(e) => setOauthClientSecret(e.target.value)}
                    autoComplete="off"
                    disabled={!oauthClientId.trim()}
                  />
                </label>
                <label className="grow">
                  Issuer (optional; the only authorization server it may use)
                  <input
                    value={oauthIssuer}
                    onChange={(e) => setOauthIssuer(e.target.value)}
                    inputMode="url"
                    placeholder="https://auth.example.com"
                    autoComplete="off"
                    spellCheck={false}
                  />
                </label>
              </div>
            )}
            <div>
              <span className="label">Headers</span>
              <SecretRows rows={headers} onChange={setHeaders} kind="headers" />
            </div>
            {role === 'admin' && (
              <label className="inline">
                <input type="checkbox" checked={privateNetwork} onChange={(e) => setPrivateNetwork(e.target.checked)} />
                Private network (allow loopback and LAN addresses; admin only)
              </label>
            )}
          </>
        ) : (
          <>
            <label>
              Command
              <input
                value={command}
                onChange={(e) => setCommand(e.target.value)}
                required
                placeholder="npx"
                spellCheck={false}
              />
            </label>
            <label>
              Arguments (one per line)
              <textarea value={args} onChange={(e) => setArgs(e.target.value)} rows={3} spellCheck={false} />
            </label>
            <div>
              <span className="label">Environment</span>
              <SecretRows rows={env} onChange={setEnv} kind="env" />
            </div>
          </>
        )}
        <button type="submit" className="primary" disabled={busy}>
          {busy ? 'Installing…' : 'Install'}
        </button>
      </form>
    </section>
  );
}
