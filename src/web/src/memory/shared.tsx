/** Small pieces several memory panels use: flash notices, plurals, paging and a two-step delete. */
import { useEffect, useRef, useState } from 'react';
import { errorText } from '../api';
import { ErrorBox, Notice } from '../ui';

export const PAGE = 20;

export type Flash = { kind: 'ok' | 'error' | 'info'; text: string } | undefined;

export function FlashNotice({ flash }: { flash: Flash }) {
  return flash ? <Notice kind={flash.kind}>{flash.text}</Notice> : null;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** A two-step delete: the first button asks, the second (focused) does it. */
export function ConfirmDelete({
  what,
  detail,
  onDelete,
}: {
  what: string;
  detail: string;
  onDelete: () => Promise<void>;
}) {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  const ask = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  useEffect(() => {
    // Focus goes to "Yes, delete" when asked, and back to the first button on Cancel.
    if (confirming) yes.current?.focus();
    else if (asked.current) ask.current?.focus();
    asked.current = confirming;
  }, [confirming]);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await onDelete();
      setConfirming(false);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      {error && <ErrorBox error={error} />}
      {!confirming ? (
        <button type="button" className="danger small" ref={ask} onClick={() => setConfirming(true)}>
          Delete {what}…
        </button>
      ) : (
        <div role="alertdialog" aria-label={`Delete ${what}`} className="confirm">
          <p>{detail}</p>
          <div className="row">
            <button type="button" className="danger small" ref={yes} onClick={run} disabled={busy}>
              {busy ? 'Deleting…' : 'Yes, delete'}
            </button>
            <button type="button" className="small" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        </div>
      )}
    </>
  );
}

/** Previous/next buttons and the "1–20 of 57" range for a list paged by PAGE. */
export function Pager({ offset, total, onOffset }: { offset: number; total: number; onOffset: (n: number) => void }) {
  return (
    <div className="row pager">
      <button
        type="button"
        className="small"
        disabled={offset === 0}
        onClick={() => onOffset(Math.max(0, offset - PAGE))}
      >
        Previous
      </button>
      <span className="muted">
        {offset + 1}–{Math.min(offset + PAGE, total)} of {total}
      </span>
      <button type="button" className="small" disabled={offset + PAGE >= total} onClick={() => onOffset(offset + PAGE)}>
        Next
      </button>
    </div>
  );
}
