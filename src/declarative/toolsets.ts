/**
 * Declarative toolsets: each entry is the REST create body. Only toolsets whose description or tools differ
 * are written (a second apply writes nothing); `prune` removes toolsets the file's `toolsets:` omits.
 */
import { isDeepStrictEqual } from 'node:util';
import type { AuditLog } from '../audit/log.js';
import type { EventHub } from '../audit/stream.js';
import type { Principal } from '../identity/index.js';
import type { Store } from '../store/db.js';
import type { Toolset, ToolsetEntry } from '../toolsets/model.js';
import { listToolsets, ToolsetStore } from '../toolsets/store.js';
import type { KindReport } from './report.js';

export interface DeclaredToolset {
  name: string;
  description?: string | null | undefined;
  tools: ToolsetEntry[];
}

export interface ToolsetDeps {
  store: Store;
  audit: AuditLog;
  events: EventHub;
}

export interface ToolsetPlan {
  create: DeclaredToolset[];
  update: DeclaredToolset[];
  unchanged: string[];
  prune: string[];
}

function same(current: Toolset, declared: DeclaredToolset): boolean {
  return (
    (current.description ?? null) === (declared.description ?? null) && isDeepStrictEqual(current.tools, declared.tools)
  );
}

export async function planToolsets(
  deps: Pick<ToolsetDeps, 'store'>,
  declared: readonly DeclaredToolset[],
  options: { prune: boolean },
): Promise<ToolsetPlan> {
  const current = new Map((await listToolsets(deps.store.db)).map((t) => [t.name, t]));
  const plan: ToolsetPlan = { create: [], update: [], unchanged: [], prune: [] };
  for (const toolset of declared) {
    const existing = current.get(toolset.name);
    if (!existing) plan.create.push(toolset);
    else if (same(existing, toolset)) plan.unchanged.push(toolset.name);
    else plan.update.push(toolset);
  }
  if (options.prune) {
    const names = new Set(declared.map((t) => t.name));
    for (const name of current.keys()) if (!names.has(name)) plan.prune.push(name);
  }
  return plan;
}

export async function applyToolsets(
  deps: ToolsetDeps,
  plan: ToolsetPlan,
  actor: Principal,
  report: KindReport,
): Promise<void> {
  const toolsets = new ToolsetStore(deps.store);
  report.unchanged.push(...plan.unchanged);
  const record = async (action: string, name: string, data: Record<string, unknown> = {}) => {
    await deps.audit.recordAdmin({ action, actor, data: { toolset: name, ...data } });
    await deps.events.publish('server.changed', { toolset: name, change: action });
  };
  for (const toolset of plan.create) {
    await toolsets.create(toolset.name, toolset, actor.id);
    await record('toolset.create', toolset.name, { tools: toolset.tools.length });
    report.created.push(toolset.name);
  }
  for (const toolset of plan.update) {
    await toolsets.replace(toolset.name, { ...toolset, description: toolset.description ?? null }, actor.id);
    await record('toolset.update', toolset.name, { tools: toolset.tools.length });
    report.updated.push(toolset.name);
  }
  for (const name of plan.prune) {
    await toolsets.delete(name);
    await record('toolset.delete', name);
    report.pruned.push(name);
  }
}
