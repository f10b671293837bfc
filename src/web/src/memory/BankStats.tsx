/** The bank's counts per state, dataset and operation status, and the tags in use. */
import type { MemoryStats } from '../api';
import { type AsyncState, ErrorBox, Loading } from '../ui';

export type TagList = { tags: { tag: string; count: number }[] };

export function BankStats({
  stats,
  tags,
}: {
  stats: AsyncState<MemoryStats | undefined>;
  tags: AsyncState<TagList | undefined>;
}) {
  const s = stats.data;
  return (
    <section className="panel" aria-labelledby="memory-stats-title">
      <h2 id="memory-stats-title">Bank</h2>
      {stats.error && <ErrorBox error={stats.error} onRetry={stats.reload} />}
      {stats.loading && !s && <Loading what="the bank's counts" />}
      {s && (
        <dl className="stats" data-testid="memory-stats">
          <div>
            <dt>Valid units</dt>
            <dd>{s.nodes}</dd>
          </div>
          <div>
            <dt>Invalidated</dt>
            <dd>{s.invalidated}</dd>
          </div>
          <div>
            <dt>Documents</dt>
            <dd>{s.documents}</dd>
          </div>
          <div>
            <dt>Datasets</dt>
            <dd>{Object.keys(s.datasets).length}</dd>
          </div>
          <div>
            <dt>Directives</dt>
            <dd>{s.directives}</dd>
          </div>
          <div>
            <dt>Mental models</dt>
            <dd>{s.mental_models}</dd>
          </div>
          <div>
            <dt>Operations</dt>
            <dd>
              {Object.keys(s.operations).length === 0
                ? 'none'
                : Object.entries(s.operations)
                    .map(([status, n]) => `${n} ${status}`)
                    .join(', ')}
            </dd>
          </div>
        </dl>
      )}
      {s && Object.keys(s.datasets).length > 0 && (
        <p className="small-text muted" data-testid="memory-datasets">
          {Object.entries(s.datasets)
            .map(([name, d]) => `${name}: ${d.valid} valid, ${d.invalidated} invalidated`)
            .join(' · ')}
        </p>
      )}
      <h3>Tags</h3>
      {tags.error && <ErrorBox error={tags.error} onRetry={tags.reload} />}
      {tags.loading && !tags.data && <Loading what="tags" />}
      {tags.data && tags.data.tags.length === 0 && <p className="muted">No tags on valid units yet.</p>}
      {tags.data && tags.data.tags.length > 0 && (
        <ul className="tag-list" aria-label="Tags in use">
          {tags.data.tags.map((t) => (
            <li key={t.tag} className="tag">
              {t.tag} <span className="muted">×{t.count}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
