/** Small pieces the drawer's panels share: the flash type and how a masked secret is described. */
import type { ShownValue } from '../api';

export type Flash = { kind: 'ok' | 'error'; text: string } | undefined;

export function shown(value: ShownValue): string {
  return 'env' in value ? `from $${value.env}` : 'set, hidden';
}
