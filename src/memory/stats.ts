/** Memory statistics: unit counts by dataset, state and fact type, documents, directives, models, operations. */
import { withStore } from './availability.js';
import type { MemoryContext } from './context.js';

export async function stats(ctx: MemoryContext, datasets: readonly string[]): Promise<Record<string, unknown>> {
  const db = ctx.store.db;
  return withStore(async () => {
    const byDataset =
      datasets.length === 0
        ? []
        : await db
            .selectFrom('memory_units')
            .select(['dataset', 'state', 'fact_type', (eb) => eb.fn.countAll<number>().as('n')])
            .where('dataset', 'in', [...datasets])
            .groupBy(['dataset', 'state', 'fact_type'])
            .execute();
    const documents =
      datasets.length === 0
        ? 0
        : Number(
            (
              await db
                .selectFrom('memory_documents')
                .select((eb) => eb.fn.countAll<number>().as('n'))
                .where('dataset', 'in', [...datasets])
                .executeTakeFirstOrThrow()
            ).n,
          );
    // Only the operations of datasets the caller may see: counts of others' work would leak it.
    const ops =
      datasets.length === 0
        ? []
        : await db
            .selectFrom('memory_operations')
            .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
            .where('dataset', 'in', [...datasets])
            .groupBy('status')
            .execute();
    const count = async (table: 'memory_directives' | 'memory_mental_models') =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const perDataset: Record<string, { valid: number; invalidated: number }> = {};
    const factTypes: Record<string, number> = {};
    let valid = 0;
    let invalidated = 0;
    for (const row of byDataset) {
      const n = Number(row.n);
      const entry = perDataset[row.dataset] ?? { valid: 0, invalidated: 0 };
      perDataset[row.dataset] = entry;
      if (row.state === 'valid') {
        entry.valid += n;
        valid += n;
        factTypes[row.fact_type] = (factTypes[row.fact_type] ?? 0) + n;
      } else {
        entry.invalidated += n;
        invalidated += n;
      }
    }
    return {
      nodes: valid,
      invalidated,
      documents,
      fact_types: factTypes,
      datasets: perDataset,
      directives: await count('memory_directives'),
      mental_models: await count('memory_mental_models'),
      operations: Object.fromEntries(ops.map((o) => [o.status, Number(o.n)])),
    };
  });
}
