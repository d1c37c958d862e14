// OIDC sign-in for a public client: authorization code with PKCE (RFC 7636), endpoints from the
// issuer's discovery document. The verifier and state live in sessionStorage for the round trip.

const FLOW_KEY = "skyloop.oidc";

export interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
  end_session_endpoint?: string;
}

interface Flow {
  verifier: string;
  state: string;
  tokenEndpoint: string;
  clientId: string;
  redirectUri: string;
  returnTo: string;
}

export function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function randomString(bytes = 32): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

export async function challenge(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

export async function discover(issuer: string): Promise<Discovery> {
  const response = await fetch(`${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`);
  if (!response.ok) throw new Error(`the issuer's discovery document answered ${response.status}`);
  return (await response.json()) as Discovery;
}

export function redirectUri(): string {
  return `${location.origin}/oidc/callback`;
}

/** Start the flow: returns the URL to send the browser to. */
export async function beginSignIn(issuer: string, clientId: string, scopes: string, returnTo: string): Promise<string> {
  const discovery = await discover(issuer);
  const verifier = randomString(48);
  const state = randomString(16);
  const flow: Flow = {
    verifier,
    state,
    tokenEndpoint: discovery.token_endpoint,
    clientId,
    redirectUri: redirectUri(),
    returnTo,
  };
  sessionStorage.setItem(FLOW_KEY, JSON.stringify(flow));
  const url = new URL(discovery.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: flow.redirectUri,
    scope: scopes,
    state,
    code_challenge: await challenge(verifier),
    code_challenge_method: "S256",
  }).toString();
  return url.toString();
}

/** Finish the flow on the callback page: the token to use, and where to go back to. */
export async function completeSignIn(search: string): Promise<{ token: string; returnTo: string }> {
  const params = new URLSearchParams(search);
  const raw = sessionStorage.getItem(FLOW_KEY);
  sessionStorage.removeItem(FLOW_KEY);
  if (!raw) throw new Error("no sign-in in progress in this tab");
  const flow = JSON.parse(raw) as Flow;
  if (params.get("error")) throw new Error(`the issuer refused: ${params.get("error_description") ?? params.get("error")}`);
  if (params.get("state") !== flow.state) throw new Error("the sign-in answer does not match this tab's request (state)");
  const code = params.get("code");
  if (!code) throw new Error("the issuer sent no code");
  const response = await fetch(flow.tokenEndpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: flow.redirectUri,
      client_id: flow.clientId,
      code_verifier: flow.verifier,
    }).toString(),
  });
  if (!response.ok) throw new Error(`the token endpoint answered ${response.status}`);
  const tokens = (await response.json()) as { access_token?: string; id_token?: string };
  // the API checks `aud` (or Cognito's client_id) against its audience: an ID token names this client
  // there, an access token may not (Keycloak's say "account"), so the ID token goes first
  const token = tokens.id_token ?? tokens.access_token;
  if (!token) throw new Error("the token endpoint returned no token");
  return { token, returnTo: flow.returnTo || "/" };
}
