/** Declarative settings: only keys whose value differs are written, so a second apply writes nothing. */
import { isDeepStrictEqual } from 'node:util';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import type { Principal } from '../identity/index.js';
import type { SettingName, Settings } from '../settings/keys.js';
import type { SettingsService } from '../settings/service.js';
import type { KindReport } from './report.js';

export interface SettingsDeps {
  settings: SettingsService;
  audit: AuditLog;
  events: EventHub;
}

export interface SettingsPlan {
  changes: Record<string, unknown>;
  unchanged: string[];
  /** The settings once this plan is written: what the rest of the apply is checked against. */
  after: Settings;
}

/**
 * The keys to write: compared with what every request sees now (stored value or default). Values are compared
 * as stored, after the setting's schema (which trims a command, say): the raw value may never equal it. The
 * store's own validation runs here, so the patch cannot refuse what the plan let through.
 */
export async function planSettings(deps: SettingsDeps, declared: Record<string, unknown>): Promise<SettingsPlan> {
  const current = await deps.settings.current();
  const changes: Record<string, unknown> = {};
  const unchanged: string[] = [];
  for (const [key, value] of Object.entries(deps.settings.validate(declared))) {
    if (isDeepStrictEqual(current[key as SettingName], value)) unchanged.push(key);
    else changes[key] = value;
  }
  return { changes, unchanged, after: Object.freeze({ ...current, ...changes }) as Settings };
}

export async function applySettings(
  deps: SettingsDeps,
  plan: SettingsPlan,
  actor: Principal,
  report: KindReport,
): Promise<void> {
  report.unchanged.push(...plan.unchanged);
  const keys = Object.keys(plan.changes);
  if (keys.length === 0) return;
  await deps.settings.patch(plan.changes, actor.id);
  await deps.audit.recordAdmin({ action: 'settings.update', actor, data: { changes: plan.changes } });
  await deps.events.publish('settings.changed', { keys });
  report.updated.push(...keys);
}
