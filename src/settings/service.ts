/**
 * Settings as every request sees them: cached, and re-read only when the
 * store's change version for `settings` moved — so a PATCH is in force on the
 * very next request of every process, without a store round trip per request.
 */
import { type ValidationIssue, validationError } from '../errors.js';
import type { Store } from '../store/db.js';
import { nowIso, parseJson } from '../store/json.js';
import { DEFAULT_SETTINGS, isSettingName, SETTING_KEYS, type SettingName, type Settings } from './keys.js';

export class SettingsService {
  private cached: { version: string; settings: Promise<Settings> } | undefined;

  constructor(private readonly store: Store) {}

  /** Concurrent callers on a cold cache share one read. */
  current(): Promise<Settings> {
    const version = this.store.version('settings');
    if (this.cached?.version !== version) {
      const read = this.read();
      this.cached = { version, settings: read };
      read.catch(() => {
        if (this.cached?.settings === read) this.cached = undefined;
      });
    }
    return this.cached.settings;
  }

  private async read(): Promise<Settings> {
    const rows = await this.store.db.selectFrom('settings').select(['key', 'value']).execute();
    const merged: Record<string, unknown> = { ...DEFAULT_SETTINGS };
    for (const row of rows) {
      if (!isSettingName(row.key)) continue; // a key from a newer version: ignored, kept
      const parsed = SETTING_KEYS[row.key].schema.safeParse(parseJson(row.value, undefined));
      if (parsed.success) merged[row.key] = parsed.data;
    }
    return Object.freeze(merged) as Settings;
  }

  /** Validates every key first (unknown keys and out-of-range values are 400), then writes them in one transaction. */
  validate(changes: Record<string, unknown>): Partial<Record<SettingName, unknown>> {
    const issues: ValidationIssue[] = [];
    const valid: Partial<Record<SettingName, unknown>> = {};
    for (const [key, value] of Object.entries(changes)) {
      if (!isSettingName(key)) {
        issues.push({ path: key, message: `unknown setting; known: ${Object.keys(SETTING_KEYS).join(', ')}` });
        continue;
      }
      const parsed = SETTING_KEYS[key].schema.safeParse(value);
      if (parsed.success) valid[key] = parsed.data;
      else issues.push(...parsed.error.issues.map((i) => ({ path: key, message: i.message })));
    }
    if (issues.length > 0) throw validationError(issues);
    return valid;
  }

  async patch(changes: Record<string, unknown>, actor: string | null): Promise<Settings> {
    const valid = this.validate(changes);
    const at = nowIso();
    await this.store.db.transaction().execute(async (trx) => {
      for (const [key, value] of Object.entries(valid)) {
        const row = { key, value: JSON.stringify(value), updated_at: at, updated_by: actor };
        await trx
          .insertInto('settings')
          .values(row)
          .onConflict((oc) => oc.column('key').doUpdateSet({ value: row.value, updated_at: at, updated_by: actor }))
          .execute();
      }
    });
    await this.store.changed('settings');
    return this.current();
  }
}
