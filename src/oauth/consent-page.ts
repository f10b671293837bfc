/**
 * The consent screen: server-rendered HTML with no script at all and a strict CSP (only its own
 * hashed style; forms post only here and may redirect only to the client's redirect URI). It shows who
 * asks (the client's name and, for a metadata-document client, the host its document came from), where
 * the answer goes, the MCP endpoint and the groups asked for.
 */
import { createHash } from 'node:crypto';
import type { OAuthClient } from './clients.js';
import type { PendingAuthorization, Person } from './server.js';

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1f24}
h1{font-size:1.3rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}dt{color:#57606a}
dd{margin:0;word-break:break-all}code{background:#f3f4f6;padding:0 .2rem}.warn{color:#9a6700}
label{display:block;margin:1rem 0 .3rem}input[type=password]{width:100%;padding:.4rem}
.actions{display:flex;gap:1rem;margin-top:1.5rem}button{padding:.5rem 1.2rem;font-size:1rem}`;
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The page's CSP: `redirectUri` is where the form's answer redirects (form-action covers redirects). */
export function consentCsp(redirectUri: string | undefined): string {
  let target = '';
  if (redirectUri) {
    try {
      const url = new URL(redirectUri);
      target = url.protocol === 'http:' || url.protocol === 'https:' ? ` ${url.origin}` : ` ${url.protocol}`;
    } catch {
      target = '';
    }
  }
  return [
    "default-src 'none'",
    `style-src ${STYLE_HASH}`,
    `form-action 'self'${target}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export interface ConsentView {
  client: OAuthClient;
  pending: PendingAuthorization;
  sealed: string;
  /** The person already signed in (a session), if any. */
  person: Person | undefined;
  /** The groups the token would carry, when the person is known. */
  groups: readonly string[] | undefined;
  surface: string;
  error?: string;
}

export function consentPage(view: ConsentView): string {
  const { client, pending } = view;
  const host = client.documentHost
    ? `<dt>Metadata document</dt><dd><code>${escapeHtml(client.documentHost)}</code> (the client is who that host says it is)</dd>`
    : `<dt>Registered</dt><dd>${client.kind === 'static' ? 'by an administrator' : 'by the client itself (dynamic registration)'}</dd>`;
  const asked = pending.scope.filter((w) => w.startsWith('group:')).map((w) => w.slice(6));
  const groups =
    view.groups !== undefined
      ? view.groups.length > 0
        ? view.groups.map((g) => `<code>${escapeHtml(g)}</code>`).join(' ')
        : '<span class="warn">none (the client will see no server)</span>'
      : asked.length > 0
        ? `asked: ${asked.map((g) => `<code>${escapeHtml(g)}</code>`).join(' ')} (only those you belong to)`
        : 'all of yours';
  const signIn = view.person
    ? `<p>Signed in as <strong>${escapeHtml(view.person.name)}</strong>.</p>`
    : `<label for="token">Sign in with your Gatehouse token (one you own, or an admin or operator token)</label>
<input id="token" name="token" type="password" autocomplete="off" required>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Allow ${escapeHtml(client.name)}? · Gatehouse</title><style>${STYLE}</style></head><body>
<h1>Allow <strong>${escapeHtml(client.name)}</strong> to use Gatehouse as you?</h1>
${view.error ? `<p class="warn">${escapeHtml(view.error)}</p>` : ''}
<dl>
<dt>Client</dt><dd>${escapeHtml(client.name)} <code>${escapeHtml(client.clientId)}</code></dd>
${host}
<dt>Answer goes to</dt><dd><code>${escapeHtml(pending.redirectUri)}</code></dd>
<dt>MCP endpoint</dt><dd><code>${escapeHtml(pending.resource)}</code> (${escapeHtml(view.surface)})</dd>
<dt>Groups</dt><dd>${groups}</dd>
<dt>Access</dt><dd>tokens of 5 minutes, renewed until you revoke the grant</dd>
</dl>
<form method="post" action="authorize">
<input type="hidden" name="request" value="${escapeHtml(view.sealed)}">
${signIn}
<div class="actions"><button type="submit" name="decision" value="approve">Allow</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button></div>
</form></body></html>`;
}

/** Which surface a resource path is, in words. */
export function surfaceName(path: string): string {
  if (path === '/mcp') return 'the hub: every server your groups reach';
  if (path === '/mcp/admin') return 'the admin surface';
  if (path === '/mcp/memory') return 'the memory bank';
  return `the server ${path.slice('/mcp/s/'.length)} only`;
}
