/** The server's recent events, newest first. */
import type { ServerEvent } from '../api';
import { ErrorBox, when } from '../ui';

export function EventsPanel({ events, error }: { events: ServerEvent[] | undefined; error: string | undefined }) {
  return (
    <section className="panel" aria-labelledby="events-title">
      <h3 id="events-title">Recent events</h3>
      {error && <ErrorBox error={error} />}
      {events && events.length === 0 && <p className="muted">No events yet.</p>}
      {events && events.length > 0 && (
        <ul className="events">
          {events.map((e) => (
            <li key={e.id}>
              <span className="muted small-text">{when(e.at)}</span> <span className="tag">{e.kind}</span> {e.message}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
