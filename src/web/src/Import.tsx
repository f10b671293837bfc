/**
 * Import what a client already has: paste an MCP client's config file (Claude Desktop, Claude Code, Cursor, VS Code,
 * Windsurf, LM Studio), see the plan (`POST /api/mcp/import` with `dryRun`: stdio and HTTP entries, the env and
 * header values that will be sealed — shown masked, the gateway never answers them —, duplicates, refused entries
 * with the reason), confirm to register, then point the client at the hub: the same file rewritten by the writers of
 * `gatehouse connect` (`POST /api/mcp/import/rewrite`), answered as text to copy. The gateway writes no client file;
 * `gatehouse import --rewrite` does that on the machine that holds it, with a backup.
 */
import { type FormEvent, useState } from 'react';
import { api, errorText } from './api';
import { CopyButton } from './Connect';
import { Empty, Notice, useSession } from './ui';

const CLIENTS = [
  { id: 'claude-desktop', label: 'Claude Desktop', file: 'claude_desktop_config.json' },
  { id: 'claude-code', label: 'Claude Code', file: '.mcp.json or ~/.claude.json' },
  { id: 'cursor', label: 'Cursor', file: '.cursor/mcp.json or ~/.cursor/mcp.json' },
  { id: 'vscode', label: 'VS Code', file: '.vscode/mcp.json' },
  { id: 'windsurf', label: 'Windsurf', file: '~/.codeium/windsurf/mcp_config.json' },
  { id: 'lmstudio', label: 'LM Studio', file: '~/.lmstudio/mcp.json' },
] as const;
type ClientId = (typeof CLIENTS)[number]['id'];

interface ImportItem {
  name: string;
  id: string | null;
  transport: 'stdio' | 'streamable-http' | 'sse' | null;
  target: string | null;
  action: 'register' | 'duplicate' | 'refused';
  reason?: string;
  sealed: { env: string[]; headers: string[] };
  warnings: string[];
}
interface ImportAnswer {
  dryRun: boolean;
  items: ImportItem[];
  registered: number;
}
interface Rewrite {
  client: string;
  label: string;
  usualPath: string;
  hubUrl: string;
  text: string;
  changes: string[];
  note: string;
}

const MASK = '••••••••';
const ACTION_LABEL: Record<ImportItem['action'], { planned: string; done: string }> = {
  register: { planned: 'will register', done: 'registered' },
  duplicate: { planned: 'duplicate', done: 'duplicate' },
  refused: { planned: 'refused', done: 'refused' },
};

function PlanTable({ answer }: { answer: ImportAnswer }) {
  return (
    <div className="table-wrap">
      <table className="import-plan">
        <thead>
          <tr>
            <th scope="col">Entry</th>
            <th scope="col">Action</th>
            <th scope="col">Server id</th>
            <th scope="col">Transport</th>
            <th scope="col">Command or URL</th>
            <th scope="col">Sealed values</th>
            <th scope="col">Reason / notes</th>
          </tr>
        </thead>
        <tbody>
          {answer.items.map((item) => (
            <tr key={item.name} data-import-item={item.name} data-action={item.action}>
              <td className="mono">{item.name}</td>
              <td>
                <span className={`import-action import-${item.action}`}>
                  {answer.dryRun ? ACTION_LABEL[item.action].planned : ACTION_LABEL[item.action].done}
                </span>
              </td>
              <td className="mono">{item.id ?? '—'}</td>
              <td>{item.transport ?? '—'}</td>
              <td className="mono small-text import-target">{item.target ?? '—'}</td>
              <td className="small-text">
                {item.action === 'register' && item.sealed.env.length + item.sealed.headers.length > 0 ? (
                  <ul className="sealed-list">
                    {item.sealed.env.map((n) => (
                      <li key={`env-${n}`} data-sealed={`env:${n}`}>
                        env <code>{n}</code> ={' '}
                        <span className="masked" title="sealed on registration; never shown">
                          {MASK}
                        </span>
                      </li>
                    ))}
                    {item.sealed.headers.map((n) => (
                      <li key={`header-${n}`} data-sealed={`header:${n}`}>
                        header <code>{n}</code> ={' '}
                        <span className="masked" title="sealed on registration; never shown">
                          {MASK}
                        </span>
                      </li>
                    ))}
                  </ul>
                ) : (
                  '—'
                )}
              </td>
              <td className="small-text">
                {item.reason && <div className={item.action === 'refused' ? 'error-text' : ''}>{item.reason}</div>}
                {item.warnings.map((w) => (
                  <div key={w} className="muted">
                    {w}
                  </div>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Import() {
  const { role } = useSession();
  const [client, setClient] = useState<ClientId>('claude-desktop');
  const [config, setConfig] = useState('');
  const [plan, setPlan] = useState<ImportAnswer>();
  const [done, setDone] = useState<ImportAnswer>();
  const [rewrite, setRewrite] = useState<Rewrite>();
  const [rewriteError, setRewriteError] = useState<string>();
  const [busy, setBusy] = useState<'plan' | 'register'>();
  const [failure, setFailure] = useState<string>();
  const spec = CLIENTS.find((c) => c.id === client) ?? CLIENTS[0];

  /** A new paste or client: the plan shown no longer describes it. */
  const reset = () => {
    setPlan(undefined);
    setDone(undefined);
    setRewrite(undefined);
    setRewriteError(undefined);
    setFailure(undefined);
  };

  const showPlan = async (event: FormEvent) => {
    event.preventDefault();
    reset();
    setBusy('plan');
    try {
      setPlan(await api<ImportAnswer>('/api/mcp/import', { method: 'POST', body: { config, dryRun: true } }));
    } catch (error) {
      setFailure(errorText(error));
    } finally {
      setBusy(undefined);
    }
  };

  const register = async () => {
    setBusy('register');
    setFailure(undefined);
    try {
      const answer = await api<ImportAnswer>('/api/mcp/import', { method: 'POST', body: { config } });
      setDone(answer);
      // What the hub serves now (registered, or installed already) leaves the client's own file.
      const moved = answer.items.filter((i) => i.action !== 'refused').map((i) => i.name);
      if (client !== 'windsurf' && moved.length > 0) {
        try {
          setRewrite(
            await api<Rewrite>('/api/mcp/import/rewrite', { method: 'POST', body: { client, config, moved } }),
          );
        } catch (error) {
          setRewriteError(errorText(error));
        }
      }
    } catch (error) {
      setFailure(errorText(error));
    } finally {
      setBusy(undefined);
    }
  };

  const shown = done ?? plan;
  const count = (a: ImportItem['action']) => shown?.items.filter((i) => i.action === a).length ?? 0;
  const toRegister = plan?.items.filter((i) => i.action === 'register').length ?? 0;

  return (
    <section aria-labelledby="import-title">
      <div className="section-head">
        <h1 id="import-title">Import</h1>
        <span className="muted">register the servers a client already has</span>
      </div>
      <form onSubmit={showPlan} className="import-form">
        <h2>1. Paste the client's config</h2>
        <p className="muted">
          The whole file, comments included (its <code>mcpServers</code>, or VS Code's <code>servers</code>). Nothing is
          registered before you confirm; literal env and header values are sealed on registration and never shown again.
        </p>
        <label>
          Client{' '}
          <select
            aria-label="Client"
            value={client}
            onChange={(e) => {
              setClient(e.target.value as ClientId);
              reset();
            }}
          >
            {CLIENTS.map((c) => (
              <option key={c.id} value={c.id}>
                {c.label}
              </option>
            ))}
          </select>
          <span className="muted small-text">usually {spec.file}</span>
        </label>
        <label>
          Config file
          <textarea
            aria-label="Config file"
            className="mono"
            rows={10}
            spellCheck={false}
            value={config}
            onChange={(e) => {
              setConfig(e.target.value);
              reset();
            }}
            placeholder={
              '{\n  "mcpServers": {\n    "memory": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"] }\n  }\n}'
            }
            required
          />
        </label>
        <div className="row">
          <button type="submit" className="primary" disabled={busy !== undefined || !config.trim()}>
            {busy === 'plan' ? 'Reading…' : 'Show the plan'}
          </button>
        </div>
      </form>
      {failure && <Notice kind="error">{failure}</Notice>}

      {shown && (
        <>
          <h2>{done ? '2. Imported' : '2. The plan'}</h2>
          {shown.items.length === 0 ? (
            <Empty>
              No servers in this config: paste the whole file, with its <code>mcpServers</code> (VS Code:{' '}
              <code>servers</code>) object.
            </Empty>
          ) : (
            <>
              <p data-testid="import-summary">
                {done
                  ? `${done.registered} registered, ${count('duplicate')} already installed, ${count('refused')} refused.`
                  : `${count('register')} to register, ${count('duplicate')} already installed, ${count('refused')} refused.`}
              </p>
              <PlanTable answer={shown} />
              {!done && (
                <div className="row">
                  <button
                    type="button"
                    className="primary"
                    disabled={busy !== undefined || toRegister === 0}
                    onClick={register}
                  >
                    {busy === 'register'
                      ? 'Registering…'
                      : `Register ${toRegister} server${toRegister === 1 ? '' : 's'}`}
                  </button>
                  {toRegister === 0 && <span className="muted">Nothing new to register.</span>}
                </div>
              )}
              {done && done.registered > 0 && (
                <Notice kind="ok">
                  Registered {done.registered} server{done.registered === 1 ? '' : 's'}: test and configure them on the{' '}
                  <a href="#/servers">Servers</a> screen.
                </Notice>
              )}
            </>
          )}
        </>
      )}

      {done && (
        <section aria-labelledby="import-hub-title">
          <h2 id="import-hub-title">3. Point {spec.label} at the hub</h2>
          {client === 'windsurf' ? (
            <p className="muted">
              Gatehouse has no writer for Windsurf's file: remove the imported entries and add the hub by hand (see{' '}
              <a href="#/connect">Connect</a> for the hub URL and a token).
            </p>
          ) : rewriteError ? (
            <Notice kind="error">{rewriteError}</Notice>
          ) : rewrite ? (
            <>
              <p className="muted">
                The same file, with the entries the hub now serves removed and the hub's entry added (
                {rewrite.changes.join('; ') || 'no change'}). Replace {rewrite.label}'s file (usually{' '}
                <code>{rewrite.usualPath}</code>) with it, or run{' '}
                <code>gatehouse import --client {rewrite.client} --file &lt;path&gt; --rewrite</code> on that machine,
                which keeps a backup. The gateway writes no file itself.
              </p>
              <pre className="mono" data-testid="rewritten-config">
                {rewrite.text}
              </pre>
              <CopyButton text={rewrite.text} />
              <p className="muted small-text" data-testid="rewrite-note" style={{ whiteSpace: 'pre-wrap' }}>
                {rewrite.note}
              </p>
              <p className="muted">
                {role === 'admin' ? (
                  <>
                    Create the agent token for it on the <a href="#/connect">Connect</a> screen.
                  </>
                ) : (
                  'An admin creates the agent token for it (Connect screen).'
                )}
              </p>
            </>
          ) : (
            <p className="muted">Nothing the hub serves came from this file: it stays as it is.</p>
          )}
        </section>
      )}
    </section>
  );
}
