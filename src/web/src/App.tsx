/**
 * Sign-in, the capability gate and the shell. At start the app reads `/info` with the signed-in token:
 * `registry` and `hub` → everything; `registry` without `hub` → the registry with use-related actions
 * disabled and the reason shown; `/info` failing → a "backend unavailable" page, never a broken screen.
 */
import { type FormEvent, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { Account } from './Account';
import { Activity } from './Activity';
import { Approvals } from './Approvals';
import {
  ApiError,
  type Approval,
  type AuthContext,
  api,
  errorText,
  type Info,
  type LiveEvent,
  openEventStream,
  type SessionInfo,
  type StreamState,
  storedToken,
  storeToken,
  UNAUTHORIZED_EVENT,
} from './api';
import { Connect } from './Connect';
import { Discover } from './Discover';
import { ServerDrawer } from './drawer';
import { Import } from './Import';
import { MEMORY_OFF_REASON, Memory } from './memory';
import { Overview } from './Overview';
import { Servers } from './Servers';
import { Settings } from './Settings';
import { Toolsets } from './Toolsets';
import { HUB_OFF_REASON, type LiveBus, LiveContext, type Session, SessionContext, useLive } from './ui';

type View =
  | 'overview'
  | 'servers'
  | 'discover'
  | 'approvals'
  | 'activity'
  | 'memory'
  | 'settings'
  | 'toolsets'
  | 'connect'
  | 'import'
  | 'account';
const VIEWS: { id: View; label: string }[] = [
  { id: 'overview', label: 'Overview' },
  { id: 'servers', label: 'Servers' },
  { id: 'discover', label: 'Discover' },
  { id: 'approvals', label: 'Approvals' },
  { id: 'activity', label: 'Activity' },
  { id: 'memory', label: 'Memory' },
  { id: 'settings', label: 'Settings' },
  { id: 'toolsets', label: 'Toolsets' },
  { id: 'connect', label: 'Connect' },
  { id: 'import', label: 'Import' },
];
/** A member manages its own tokens and grants and sees its own activity; nothing else is shown to it. */
const MEMBER_VIEWS: { id: View; label: string }[] = [
  { id: 'account', label: 'Account' },
  { id: 'activity', label: 'Activity' },
];
const viewsOf = (role: string) => (role === 'member' ? MEMBER_VIEWS : VIEWS);

/** The view the address names; the landing page is the Overview (a member's: its Account). */
function viewFromHash(views: readonly { id: View }[]): View {
  const name = window.location.hash.replace(/^#\/?/, '').split('/')[0];
  return views.find((v) => v.id === name)?.id ?? (views[0] === MEMBER_VIEWS[0] ? 'account' : 'overview');
}

type Gate =
  | { kind: 'signed-out'; message?: string }
  | { kind: 'checking' }
  | { kind: 'unavailable'; message: string }
  | { kind: 'ready'; info: Info; who: AuthContext };

/** Reads /info and who the token (or, without one, the session cookie) is; throws ApiError. */
async function probe(token: string | undefined): Promise<{ info: Info; who: AuthContext }> {
  const options = token ? { token } : {};
  const info = await api<Info>('/info', options);
  const who = await api<AuthContext>('/api/platform/auth-context', options).catch(async (error: unknown) => {
    // A member (a signed-in person who manages nothing) may not read the platform routes: who it is comes from here.
    if (!(error instanceof ApiError && error.status === 403)) throw error;
    const me = await api<{ principal: AuthContext }>('/api/users/me', options);
    if (me.principal.role !== 'member') throw error;
    return me.principal;
  });
  return { info, who };
}

/** The session cookie's state and the sign-in options (never throws: an old gateway has no /auth/session). */
async function sessionInfo(): Promise<SessionInfo> {
  try {
    return await api<SessionInfo>('/auth/session', { token: '' });
  } catch {
    return { signedIn: false, oidc: null };
  }
}

/** What `?signin_error=` (set by the OIDC callback) means, once; the address is cleaned of it. */
/** Opens a dashboard session as the person who owns `token`; false when it signs nobody in. */
function openSession(token: string): Promise<boolean> {
  return api('/auth/session', { method: 'POST', body: { token }, token: '' }).then(
    () => true,
    () => false,
  );
}

function signInErrorFromUrl(): string | undefined {
  const url = new URL(window.location.href);
  const code = url.searchParams.get('signin_error');
  if (!code) return undefined;
  url.searchParams.delete('signin_error');
  window.history.replaceState(null, '', url.toString());
  return code === 'user.disabled'
    ? 'Your account is disabled. Ask an admin.'
    : `Sign-in with the identity provider failed (${code}).`;
}

function gateFromError(error: unknown): Gate {
  if (error instanceof ApiError && error.status === 401) {
    storeToken(null);
    return { kind: 'signed-out', message: 'The gateway did not accept that token (it may have been revoked).' };
  }
  if (error instanceof ApiError && error.status === 403) {
    storeToken(null);
    return {
      kind: 'signed-out',
      message: 'That token may not manage this gateway: sign in with an admin or operator token.',
    };
  }
  return { kind: 'unavailable', message: errorText(error) };
}

export function App() {
  const [gate, setGate] = useState<Gate>(() => ({ kind: 'checking' }));
  const [oidc, setOidc] = useState<SessionInfo['oidc']>(null);

  const check = useCallback(async () => {
    const token = storedToken();
    if (!token) {
      // No token in this tab: a session cookie (token or OIDC sign-in) may sign us in.
      const session = await sessionInfo();
      setOidc(session.oidc);
      if (!session.signedIn) return setGate({ kind: 'signed-out', message: signInErrorFromUrl() });
    }
    try {
      setGate(gateOf(await probe(token ?? undefined)));
    } catch (error) {
      setGate(gateFromError(error));
    }
  }, []);

  useEffect(() => {
    void check();
  }, [check]);

  useEffect(() => {
    const onRefused = () => {
      storeToken(null);
      setGate({
        kind: 'signed-out',
        message: 'The gateway no longer accepts your token (it may have been revoked). Sign in again.',
      });
    };
    window.addEventListener(UNAUTHORIZED_EVENT, onRefused);
    return () => window.removeEventListener(UNAUTHORIZED_EVENT, onRefused);
  }, []);

  const signIn = async (token: string) => {
    try {
      const probed = await probe(token);
      const next = gateOf(probed);
      if (next.kind === 'ready' || next.kind === 'unavailable') {
        storeToken(token);
        // A server-side session too, so signing out ends it everywhere (an older gateway has none).
        await api('/auth/session', { method: 'POST', body: { token }, token }).catch(() => undefined);
      }
      setGate(next);
    } catch (error) {
      // An agent token a person owns signs its owner in as a member (a cookie session): the tab keeps no bearer then.
      if (error instanceof ApiError && error.status === 403 && (await openSession(token))) {
        return setGate(await probe(undefined).then(gateOf, gateFromError));
      }
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
        setGate(gateFromError(error));
      } else {
        storeToken(token);
        setGate({ kind: 'unavailable', message: errorText(error) });
      }
    }
  };

  const signOut = () => {
    storeToken(null);
    setGate({ kind: 'signed-out' });
    // Revokes the session in the store (every replica); the cookies are cleared by the answer.
    void api('/auth/logout', { method: 'POST', token: '' }).catch(() => undefined);
  };

  if (gate.kind === 'signed-out') return <SignIn message={gate.message} onSignIn={signIn} oidc={oidc} />;
  if (gate.kind === 'checking') {
    return (
      <main className="center">
        <p role="status">Connecting to the gateway…</p>
      </main>
    );
  }
  if (gate.kind === 'unavailable') return <Unavailable message={gate.message} onRetry={check} onSignOut={signOut} />;
  return <Shell info={gate.info} who={gate.who} onSignOut={signOut} onRefreshInfo={check} />;
}

function gateOf({ info, who }: { info: Info; who: AuthContext }): Gate {
  if (who.role !== 'admin' && who.role !== 'operator' && who.role !== 'member') {
    storeToken(null);
    return {
      kind: 'signed-out',
      message: 'That token may not manage this gateway: sign in with an admin or operator token.',
    };
  }
  if (!info.capabilities.includes('registry')) {
    return {
      kind: 'unavailable',
      message: `This gateway (${info.name} ${info.version}) does not offer the server registry: it reports only [${info.capabilities.join(', ') || 'nothing'}].`,
    };
  }
  return { kind: 'ready', info, who };
}

function SignIn({
  message,
  onSignIn,
  oidc,
}: {
  message?: string | undefined;
  onSignIn: (token: string) => Promise<void>;
  oidc: SessionInfo['oidc'];
}) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!token.trim()) return;
    setBusy(true);
    await onSignIn(token.trim());
    setBusy(false);
  };
  return (
    <main className="center">
      <form className="card signin" onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Gatehouse</h1>
        <p className="muted">
          Sign in with an admin or operator token. This tab keeps it and sends it as a bearer header; the gateway also
          opens a session (a cookie, 12 hours) for this browser. Sign out ends both.
        </p>
        {message && (
          <p className="notice notice-error" role="alert">
            {message}
          </p>
        )}
        <label>
          Token
          <input
            type="password"
            name="token"
            autoComplete="off"
            spellCheck={false}
            value={token}
            onChange={(e) => setToken(e.target.value)}
            required
          />
        </label>
        <button type="submit" className="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p className="muted small-text">
          Create one with <code>gatehouse token create --role operator --name you</code>.
        </p>
        {oidc && (
          <a className="button" href={`${oidc.start}?returnTo=${encodeURIComponent('/')}`}>
            Sign in with {new URL(oidc.issuer).host}
          </a>
        )}
      </form>
    </main>
  );
}

function Unavailable({ message, onRetry, onSignOut }: { message: string; onRetry: () => void; onSignOut: () => void }) {
  return (
    <main className="center">
      <section className="card unavailable" aria-labelledby="unavailable-title">
        <h1 id="unavailable-title">Backend unavailable</h1>
        <p>
          The dashboard could not read what this gateway offers, so it shows nothing rather than stale or broken
          screens.
        </p>
        <p className="notice notice-error" role="alert">
          {message}
        </p>
        <div className="row">
          <button type="button" className="primary" onClick={onRetry}>
            Retry
          </button>
          <button type="button" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </section>
    </main>
  );
}

function Shell({
  info,
  who,
  onSignOut,
  onRefreshInfo,
}: {
  info: Info;
  who: AuthContext;
  onSignOut: () => void;
  onRefreshInfo: () => void;
}) {
  const member = who.role === 'member';
  const views = viewsOf(who.role);
  const [view, setView] = useState<View>(() => viewFromHash(views));
  const [openServer, setOpenServer] = useState<string>();
  const closeServer = useCallback(() => setOpenServer(undefined), []);
  const [streamState, setStreamState] = useState<StreamState>('connecting');
  const listeners = useRef(new Set<(event: LiveEvent) => void>());

  useEffect(() => {
    const onHash = () => setView(viewFromHash(views));
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, [views]);

  // The event stream is the operators' (every server's and approval's events): a member's screens reload on their own.
  useEffect(
    () =>
      member
        ? undefined
        : openEventStream((event) => {
            for (const listener of listeners.current) listener(event);
          }, setStreamState),
    [member],
  );

  const bus = useMemo<LiveBus>(
    () => ({
      subscribe(listener) {
        listeners.current.add(listener);
        return () => listeners.current.delete(listener);
      },
    }),
    [],
  );

  const hubOn = info.capabilities.includes('hub');
  const memoryOn = info.capabilities.includes('memory');
  const session = useMemo<Session>(
    () => ({
      role: who.role as 'admin' | 'operator' | 'member',
      name: who.name,
      hubOn,
      refreshInfo: onRefreshInfo,
      openServer: setOpenServer,
    }),
    [who, hubOn, onRefreshInfo],
  );

  const go = (next: View) => {
    window.location.hash = `#/${next}`;
    setView(next);
  };

  return (
    <SessionContext.Provider value={session}>
      <LiveContext.Provider value={bus}>
        <a className="skip" href="#main">
          Skip to content
        </a>
        <header className="topbar">
          <span className="brand">Gatehouse</span>
          <nav aria-label="Main">
            {views.map((v) => (
              <button
                key={v.id}
                type="button"
                className={`${view === v.id ? 'tab active' : 'tab'}${v.id === 'memory' && !memoryOn ? ' off' : ''}`}
                aria-current={view === v.id ? 'page' : undefined}
                title={v.id === 'memory' && !memoryOn ? MEMORY_OFF_REASON : undefined}
                onClick={() => go(v.id)}
              >
                {v.label}
                {v.id === 'approvals' && !member && <PendingBadge />}
                {v.id === 'memory' && !memoryOn && <span className="sr-only"> (switched off)</span>}
              </button>
            ))}
          </nav>
          <span className="who">
            {!member && (
              <span className={`live live-${streamState}`} title={`Live updates: ${streamState}`}>
                {streamState === 'live' ? 'live' : streamState}
              </span>
            )}
            <span className="muted">
              {who.name} ({who.role}) · v{info.version}
            </span>
            <button type="button" className="small" onClick={onSignOut}>
              Sign out
            </button>
          </span>
        </header>
        {!hubOn && (
          <div className="banner" role="status" data-testid="hub-off">
            {HUB_OFF_REASON}
          </div>
        )}
        <main id="main" tabIndex={-1}>
          {view === 'overview' && <Overview />}
          {view === 'servers' && <Servers />}
          {view === 'discover' && <Discover />}
          {view === 'approvals' && <Approvals />}
          {view === 'activity' && <Activity />}
          {view === 'memory' && <Memory enabled={memoryOn} />}
          {view === 'settings' && <Settings />}
          {view === 'toolsets' && <Toolsets />}
          {view === 'account' && <Account />}
          {view === 'connect' && <Connect />}
          {view === 'import' && <Import />}
        </main>
        {openServer && <ServerDrawer id={openServer} onClose={closeServer} />}
      </LiveContext.Provider>
    </SessionContext.Provider>
  );
}

function PendingBadge() {
  const [count, setCount] = useState<number>();
  const load = useCallback(() => {
    api<{ total: number; approvals: Approval[] }>('/api/approvals?status=pending&limit=1').then(
      (a) => setCount(a.total),
      () => setCount(undefined),
    );
  }, []);
  useEffect(load, [load]);
  useLive(['approval.'], load);
  if (!count) return null;
  return (
    <span className="badge" title={`${count} pending`}>
      {count}
      <span className="sr-only"> pending</span>
    </span>
  );
}
