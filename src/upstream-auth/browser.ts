/**
 * The browser binding of an upstream authorization (login CSRF / grant injection): a connect link is
 * Gatehouse's own page (`/oauth/connect?flow=…`), which only a browser signed in to the dashboard as the
 * person who started the flow may pass. Passing it sets a nonce cookie on `/oauth` and sends the browser
 * to the authorization server; the callback completes the flow only when that cookie comes back. A link
 * forwarded to a colleague, or an authorization URL replayed in another browser, never stores anyone's
 * upstream account as the starter's grant.
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

/** One cookie per flow (two connects under way in one browser do not overwrite each other). */
function cookieName(handle: string): string {
  return `gatehouse_oauth_${handle.slice(0, 16)}`;
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
 * Only `/oauth` (under the public URL's path) sees it; HttpOnly, Secure on https.
 */
export function setBrowserCookie(
  reply: FastifyReply,
  publicBaseUrl: string,
  handle: string,
  nonce: string,
  maxAgeS: number,
): void {
  reply.header('set-cookie', cookieLine(publicBaseUrl, cookieName(handle), nonce, maxAgeS));
}

export function clearBrowserCookie(reply: FastifyReply, publicBaseUrl: string, state: string): void {
  reply.header('set-cookie', cookieLine(publicBaseUrl, cookieName(hashState(state)), '', 0));
}

/** The nonce the callback's browser holds for the flow `state` names, if any. */
export function browserNonceOf(request: FastifyRequest, state: string): string | undefined {
  return readCookie(request, cookieName(hashState(state)));
}

function cookieLine(publicBaseUrl: string, name: string, value: string, maxAgeS: number): string {
  const base = new URL(publicBaseUrl);
  const path = `${base.pathname.replace(/\/$/, '')}/oauth`;
  const secure = base.protocol === 'https:' ? '; Secure' : '';
  return `${name}=${value}; Path=${path}; Max-Age=${Math.max(0, Math.floor(maxAgeS))}; HttpOnly; SameSite=Lax${secure}`;
}
