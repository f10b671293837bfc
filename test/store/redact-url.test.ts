/**
 * A database URL in messages (the CLI's "using the store at", doctor, the serve log, connect errors) never shows a
 * password: not in the user part, and not as a query parameter, which the PostgreSQL driver reads as well.
 */
import { expect, it } from 'vitest';
import { redactUrl } from '../../src/store/db.js';

it('hides the password in the user part and in the query', () => {
  expect(redactUrl('postgres://app:Hunter2@db:5432/gh')).toBe('postgres://app:***@db:5432/gh');
  const redacted = redactUrl('postgres://app@db/gh?password=Hunter2&sslmode=require&SSLPASSWORD=Key-Pass');
  expect(redacted).not.toMatch(/Hunter2|Key-Pass/);
  expect(new URL(redacted).searchParams.get('sslmode')).toBe('require');
  expect(redactUrl('not a url')).toBe('postgres://(unparseable URL)');
});
