/** What an apply did, per kind: every entry of the file lands in exactly one of created, updated or unchanged. */
import type { Principal } from '../identity/index.js';

export interface KindReport {
  created: string[];
  updated: string[];
  unchanged: string[];
  pruned: string[];
  warnings: string[];
}

export interface ApplyReport {
  servers: KindReport;
  settings: KindReport;
  tokens: KindReport;
  /** Present when the file has a `toolsets:` section. */
  toolsets?: KindReport;
}

export const emptyKindReport = (): KindReport => ({
  created: [],
  updated: [],
  unchanged: [],
  pruned: [],
  warnings: [],
});

/** True when the apply wrote nothing. */
export function isNoop(report: ApplyReport): boolean {
  return Object.values(report).every((kind) => kind.created.length + kind.updated.length + kind.pruned.length === 0);
}

/** Who the audit trail says made a declarative change. */
export function configPrincipal(name: string): Principal {
  return { id: 'config', name, role: 'admin', groups: [] };
}
