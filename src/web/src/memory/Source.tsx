/** Who wrote a unit: token names by id, shown by name when known. */
import { api, type TokenView } from '../api';
import { useAsync, useSession } from '../ui';

/** Token names by id (admins may list tokens; for operators the source shows as its token id). */
export function useTokenNames(version: number): Map<string, string> {
  const { role } = useSession();
  const tokens = useAsync(
    (signal) =>
      role === 'admin'
        ? api<{ tokens: TokenView[] }>('/api/tokens', { signal }).then((t) => t.tokens)
        : Promise.resolve([]),
    [role, version],
  );
  return new Map((tokens.data ?? []).map((t) => [t.id, t.name]));
}

/** Who wrote a unit: the token's name when known, its id otherwise. */
export function Source({ id, names }: { id: string; names: Map<string, string> }) {
  const name = names.get(id);
  return name ? <span title={`token ${id}`}>{name}</span> : <span className="mono">{id}</span>;
}
