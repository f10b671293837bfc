/**
 * The browser binding of an upstream authorization (login CSRF / grant injection): a connect link is
 * Gatehouse's own page (`/oauth/connect?flow=…`), which only a browser signed in to the dashboard as the
 * person who started the flow may pass. Passing it sets a nonce cookie on `/oauth` and sends the browser
 * to the authorization server; the callback completes the flow only when that cookie comes back. A link
 * forwarded to a colleague, or an authorization URL replayed in another browser, never stores anyone's
 * upstream account as the starter's grant.
 *
 * The dashboard's OpenID Connect sign-in (`api/signin.ts`) binds its flow to the starting browser the
 * same way, with its own cookie under `/auth/oidc` (`OIDC_SIGN_IN_BINDING`).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Principal, readCookie } from '../identity/index.js';
import { hashState } from './grants.js';

export const CONNECT_PATH = '/oauth/connect';

/** Who may open a flow's link: the person, or — an admin or operator token nobody owns — that token. */
export type Opener = `user:${string}` | `token:${string}`;

export function openerOf(principal: Principal): Opener {
  return principal.user ? `user:${principal.user.id}` : `token:${principal.id}`;
}

/** The link's handle is the flow's state hash: it names the flow without carrying the state itself. */
export function linkHandleOf(state: string): string {
  return hashState(state);
}

/** Where a kind of flow keeps its browser cookie: the name's prefix and the path (under the public URL's). */
export interface BrowserBinding {
  prefix: string;
  path: string;
}

/** An upstream connect: the connect link sets it, the upstream callback reads it. */
export const UPSTREAM_CONNECT_BINDING: BrowserBinding = { prefix: 'gatehouse_oauth_', path: '/oauth' };
/** The dashboard's OpenID Connect sign-in: `/auth/oidc/start` sets it, `/auth/oidc/callback` reads it. */
export const OIDC_SIGN_IN_BINDING: BrowserBinding = { prefix: 'gatehouse_oidc_', path: '/auth/oidc' };

/** One cookie per flow (two flows under way in one browser do not overwrite each other). */
function cookieName(binding: BrowserBinding, handle: string): string {
  return `${binding.prefix}${handle.slice(0, 16)}`;
}

export function newBrowserNonce(): { nonce: string; hash: string } {
  const nonce = randomBytes(32).toString('base64url');
  return { nonce, hash: hashState(nonce) };
}

export function browserNonceHash(nonce: string): string {
  return hashState(nonce);
}

/**
 * Sent back on the authorization server's redirect, a cross-site top-level GET: SameSite=Lax, not Strict.
 * Only the binding's path (under the public URL's path) sees it; HttpOnly, Secure on https.
 */
export function setBrowserCookie(
  reply: FastifyReply,
  publicBaseUrl: string,
  handle: string,
  nonce: string,
  maxAgeS: number,
  binding: BrowserBinding = UPSTREAM_CONNECT_BINDING,
): void {
  reply.header('set-cookie', cookieLine(publicBaseUrl, binding, cookieName(binding, handle), nonce, maxAgeS));
}

export function clearBrowserCookie(
  reply: FastifyReply,
  publicBaseUrl: string,
  state: string,
  binding: BrowserBinding = UPSTREAM_CONNECT_BINDING,
): void {
  reply.header('set-cookie', cookieLine(publicBaseUrl, binding, cookieName(binding, hashState(state)), '', 0));
}

/** The nonce the callback's browser holds for the flow `state` names, if any. */
export function browserNonceOf(
  request: FastifyRequest,
  state: string,
  binding: BrowserBinding = UPSTREAM_CONNECT_BINDING,
): string | undefined {
  return readCookie(request, cookieName(binding, hashState(state)));
}

function cookieLine(
  publicBaseUrl: string,
  binding: BrowserBinding,
  name: string,
  value: string,
  maxAgeS: number,
): string {
  const base = new URL(publicBaseUrl);
  const path = `${base.pathname.replace(/\/$/, '')}${binding.path}`;
  const secure = base.protocol === 'https:' ? '; Secure' : '';
  return `${name}=${value}; Path=${path}; Max-Age=${Math.max(0, Math.floor(maxAgeS))}; HttpOnly; SameSite=Lax${secure}`;
}
