/**
 * The tools each agent called most recently (per gateway process, in memory: a convenience of search
 * mode, never a permission). Listed by name, so the list only changes when a new tool enters it.
 */
const MAX_PER_AGENT = 50;
const MAX_AGENTS = 10_000;

export class RecentTools {
  /** Per token id: exposed names, most recent first. */
  private readonly byAgent = new Map<string, string[]>();

  /** Notes a call; true when `name` was not among the agent's `window` most recent before. */
  record(agentId: string, name: string, window: number): boolean {
    const names = this.byAgent.get(agentId) ?? [];
    const at = names.indexOf(name);
    const entered = at < 0 || at >= window;
    if (at >= 0) names.splice(at, 1);
    names.unshift(name);
    if (names.length > MAX_PER_AGENT) names.length = MAX_PER_AGENT;
    // Map order is insertion order: re-inserting keeps the most active agents, the oldest go first.
    this.byAgent.delete(agentId);
    this.byAgent.set(agentId, names);
    if (this.byAgent.size > MAX_AGENTS) this.byAgent.delete(this.byAgent.keys().next().value as string);
    return entered && window > 0;
  }

  /** The agent's `count` most recent tools, in name order (the same set lists the same bytes). */
  recent(agentId: string, count: number): string[] {
    if (count <= 0) return [];
    return (this.byAgent.get(agentId) ?? []).slice(0, count).sort();
  }
}
