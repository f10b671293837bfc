/** Small shared pieces: data loading, live events, status dots, loading/empty/error states. */
import { createContext, type ReactNode, useCallback, useContext, useEffect, useRef, useState } from 'react';
import { errorText, type LiveEvent } from './api';

export interface AsyncState<T> {
  data: T | undefined;
  error: string | undefined;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` now and whenever `deps` change or `reload()` is called; keeps the last data while reloading. */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]): AsyncState<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<string>();
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  // biome-ignore lint/correctness/useExhaustiveDependencies: deps are the caller's
  useEffect(() => {
    const controller = new AbortController();
    setLoading(true);
    loadRef.current(controller.signal).then(
      (value) => {
        if (controller.signal.aborted) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        setError(errorText(err));
        setLoading(false);
      },
    );
    return () => controller.abort();
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

type Listener = (event: LiveEvent) => void;
export interface LiveBus {
  subscribe(listener: Listener): () => void;
}
export const LiveContext = createContext<LiveBus>({ subscribe: () => () => {} });

/** Calls `onEvent` for every live event whose type is in `types` (e.g. `approval.`, a prefix, or an exact type). */
export function useLive(types: readonly string[], onEvent: (event: LiveEvent) => void): void {
  const bus = useContext(LiveContext);
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const key = types.join(',');
  // biome-ignore lint/correctness/useExhaustiveDependencies: the key stands for types
  useEffect(
    () =>
      bus.subscribe((event) => {
        if (types.some((t) => event.type === t || (t.endsWith('.') && event.type.startsWith(t))))
          handler.current(event);
      }),
    [bus, key],
  );
}

/** Coalesces bursts: `fn` runs at most once per `ms`, trailing. */
export function useDebounced(fn: () => void, ms = 300): () => void {
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => latest.current(), ms);
  }, [ms]);
}

export const STATUS_LABEL: Record<string, string> = {
  connected: 'Connected',
  failed: 'Failed',
  unknown: 'Not tested',
};

export function StatusDot({ status, lastError }: { status: string; lastError?: string | null }) {
  const label = STATUS_LABEL[status] ?? status;
  const title = status === 'failed' && lastError ? `${label}: ${lastError}` : label;
  return <span className={`dot dot-${status}`} title={title} role="img" aria-label={title} data-status={status} />;
}

/** A stdio server whose child runs outside the bubblewrap sandbox (the gateway's mode, or its record's escape hatch). */
export function SandboxOffBadge() {
  return (
    <span
      className="badge badge-warn"
      data-testid="sandbox-off"
      title="Its child runs unsandboxed: it sees what the gateway's user sees (GATEHOUSE_STDIO_SANDBOX=off, or sandbox.mode off on the server)"
    >
      sandbox off
    </span>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted loading" role="status">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

export function ErrorBox({ error, onRetry }: { error: string; onRetry?: () => void }) {
  return (
    <div className="error-box" role="alert">
      <span>{error}</span>
      {onRetry && (
        <button type="button" className="small" onClick={onRetry}>
          Retry
        </button>
      )}
    </div>
  );
}

/** How many hex digits of a trace id a table shows (the whole id is on hover, and copied). */
const TRACE_SHORT = 8;

/**
 * An OpenTelemetry trace id: its first digits (the whole id on hover and in what is copied), a copy
 * button, and — where the screen can filter by it — a button that shows the events of that trace.
 */
export function TraceId({ id, onFilter }: { id: string; onFilter?: (id: string) => void }) {
  const [copied, setCopied] = useState<string>();
  const copy = () =>
    navigator.clipboard.writeText(id).then(
      () => setCopied('Copied'),
      () => setCopied('Copy failed: select the id and copy it'),
    );
  return (
    <span className="trace-id" data-trace-id={id}>
      <code title={id}>{id.slice(0, TRACE_SHORT)}</code>{' '}
      <button type="button" className="link small-text" onClick={copy} aria-label={`Copy trace id ${id}`}>
        copy
      </button>
      {onFilter && (
        <>
          {' · '}
          <button
            type="button"
            className="link small-text"
            onClick={() => onFilter(id)}
            aria-label={`Show the events of trace ${id}`}
          >
            filter
          </button>
        </>
      )}
      {copied && (
        <span role="status" className="muted small-text">
          {' '}
          {copied}
        </span>
      )}
    </span>
  );
}

export function Notice({ kind, children }: { kind: 'ok' | 'error' | 'info'; children: ReactNode }) {
  return (
    <div className={`notice notice-${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      {children}
    </div>
  );
}

export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** "4m 10s" until `iso`, or "expired". */
export function timeLeft(iso: string, now: number): string {
  const ms = new Date(iso).getTime() - now;
  if (!(ms > 0)) return 'expired';
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s % 60}s` : `${s}s`;
}

export function useNow(intervalMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}

/** Shown where an action is switched off because the hub is off. */
export const HUB_OFF_REASON =
  'The hub is switched off (mcp.hubEnabled is false): agents cannot use tools, so use-related actions are disabled. An admin can switch it on in Settings.';

export interface Session {
  role: 'admin' | 'operator' | 'member';
  name: string;
  hubOn: boolean;
  /** Re-reads /info (after a settings change). */
  refreshInfo: () => void;
  openServer: (id: string) => void;
}
export const SessionContext = createContext<Session>({
  role: 'operator',
  name: '',
  hubOn: true,
  refreshInfo: () => {},
  openServer: () => {},
});
export const useSession = () => useContext(SessionContext);
