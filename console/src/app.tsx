import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, api, getToken, setToken } from "./api";
import { AppContext, type Ctx } from "./context";
import { beginSignIn, completeSignIn } from "./oidc";
import { navigate, onLinkClick, parse, useLocation } from "./router";
import type { ConsoleConfig, Me, Page, ServerInfo, SessionRow } from "./types";
import { AgentView, AgentsView } from "./views/agents";
import { SessionView } from "./views/session";
import { SchedulesView } from "./views/schedules";
import { InboxView, SessionsView } from "./views/sessions";
import { WebhooksView } from "./views/webhooks";

const INBOX_POLL_MS = 4000;

type Phase =
  | { kind: "loading" }
  | { kind: "signin"; config: ConsoleConfig; error: string | null }
  | { kind: "ready"; me: Me; config: ConsoleConfig; info: ServerInfo }
  | { kind: "failed"; error: string };

export function App() {
  const path = useLocation();
  const route = parse(path);
  const [phase, setPhase] = useState<Phase>({ kind: "loading" });
  const [inboxCount, setInboxCount] = useState(0);

  const boot = useCallback(async (): Promise<void> => {
    let info: ServerInfo;
    try {
      info = await api<ServerInfo>("/v1/info");
    } catch (error) {
      setPhase({ kind: "failed", error: `The API did not answer: ${String(error)}` });
      return;
    }
    const config: ConsoleConfig = info.console ?? { auth_required: false, oidc: null };
    if (parse(location.pathname).name === "callback") {
      try {
        const { token, returnTo } = await completeSignIn(location.search);
        setToken(token);
        history.replaceState(null, "", returnTo);
        dispatchEvent(new PopStateEvent("popstate"));
      } catch (error) {
        history.replaceState(null, "", "/");
        setPhase({ kind: "signin", config, error: String((error as Error).message ?? error) });
        return;
      }
    }
    if (config.auth_required && !getToken()) {
      setPhase({ kind: "signin", config, error: null });
      return;
    }
    try {
      const me = await api<Me>("/v1/me");
      setPhase({ kind: "ready", me, config, info });
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        setToken(null);
        setPhase({ kind: "signin", config, error: getToken() ? null : `Signed out: ${error.message}` });
      } else setPhase({ kind: "failed", error: String(error) });
    }
  }, []);

  useEffect(() => {
    void boot();
  }, [boot]);

  const refreshInbox = useCallback((): void => {
    void api<Page<SessionRow>>("/v1/sessions?waiting=true&limit=100")
      .then((page) => setInboxCount(page.data.length))
      .catch(() => undefined);
  }, []);

  const ready = phase.kind === "ready";
  useEffect(() => {
    if (!ready) return;
    refreshInbox();
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") refreshInbox();
    }, INBOX_POLL_MS);
    return () => clearInterval(timer);
  }, [ready, refreshInbox]);

  useEffect(() => {
    const titles: Record<string, string> = {
      sessions: "Sessions",
      inbox: "Inbox",
      session: "Session",
      agents: "Agents",
      agent: "Agent",
      schedules: "Schedules",
      webhooks: "Webhooks",
    };
    document.title = `${titles[route.name] ?? "skyloop"} · skyloop console`;
  }, [route.name]);

  if (phase.kind === "loading") {
    return (
      <main id="main" class="centered">
        <p role="status">Loading…</p>
      </main>
    );
  }
  if (phase.kind === "failed") {
    return (
      <main id="main" class="centered">
        <h1>skyloop console</h1>
        <p role="alert">{phase.error}</p>
      </main>
    );
  }
  if (phase.kind === "signin") {
    return (
      <SignIn
        config={phase.config}
        error={phase.error}
        onToken={(token) => {
          setToken(token);
          setPhase({ kind: "loading" });
          void boot();
        }}
      />
    );
  }

  const ctx: Ctx = { me: phase.me, config: phase.config, info: phase.info, inboxCount, refreshInbox };
  const signOut = (): void => {
    setToken(null);
    setPhase({ kind: "signin", config: phase.config, error: null });
  };
  return (
    <AppContext.Provider value={ctx}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href="/" onClick={onLinkClick}>
          skyloop
        </a>
        <nav aria-label="Main">
          <NavLink href="/" current={route.name === "sessions" || route.name === "session"}>
            Sessions
          </NavLink>
          <NavLink href="/inbox" current={route.name === "inbox"}>
            Inbox
            {inboxCount > 0 && (
              <span class="badge attention" data-testid="inbox-badge" aria-label={`${inboxCount} need you`}>
                {inboxCount}
              </span>
            )}
          </NavLink>
          <NavLink href="/agents" current={route.name === "agents" || route.name === "agent"}>
            Agents
          </NavLink>
          <NavLink href="/schedules" current={route.name === "schedules"}>
            Schedules
          </NavLink>
          <NavLink href="/webhooks" current={route.name === "webhooks"}>
            Webhooks
          </NavLink>
        </nav>
        <div class="who">
          <span>{phase.me.principal}</span>
          {!phase.me.can_write && <span class="badge readonly">Read-only</span>}
          {phase.me.admin && <span class="badge">Admin</span>}
          {getToken() && (
            <button type="button" class="link" onClick={signOut}>
              Sign out
            </button>
          )}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {route.name === "sessions" && <SessionsView />}
        {route.name === "inbox" && <InboxView />}
        {route.name === "session" && <SessionView key={route.id} id={route.id} />}
        {route.name === "agents" && <AgentsView />}
        {route.name === "agent" && <AgentView key={route.id} id={route.id} />}
        {route.name === "schedules" && <SchedulesView />}
        {route.name === "webhooks" && <WebhooksView />}
        {(route.name === "not_found" || route.name === "callback") && (
          <section>
            <h1>Not found</h1>
            <p>
              <a href="/" onClick={onLinkClick}>
                Back to sessions
              </a>
            </p>
          </section>
        )}
      </main>
    </AppContext.Provider>
  );
}

function NavLink(props: { href: string; current: boolean; children: preact.ComponentChildren }) {
  return (
    <a href={props.href} onClick={onLinkClick} aria-current={props.current ? "page" : undefined}>
      {props.children}
    </a>
  );
}

function SignIn(props: { config: ConsoleConfig; error: string | null; onToken: (token: string) => void }) {
  const [token, setTokenText] = useState("");
  const [error, setError] = useState<string | null>(props.error);
  const oidc = props.config.oidc;
  const signInWithIssuer = async (): Promise<void> => {
    if (!oidc) return;
    try {
      location.assign(await beginSignIn(oidc.issuer, oidc.client_id, oidc.scopes, location.pathname));
    } catch (e) {
      setError(String((e as Error).message ?? e));
    }
  };
  return (
    <main id="main" class="centered signin">
      <h1>Sign in to skyloop</h1>
      {error && <p role="alert">{error}</p>}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (token.trim()) props.onToken(token.trim());
        }}
      >
        <label htmlFor="token">Bearer token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          value={token}
          onInput={(e) => setTokenText(e.currentTarget.value)}
          aria-describedby="token-help"
        />
        <p id="token-help" class="hint">
          From <code>skyloop token create</code>. Kept for this browser tab's session only.
        </p>
        <button type="submit">Sign in</button>
      </form>
      {oidc && (
        <>
          <p class="or">or</p>
          <button type="button" onClick={() => void signInWithIssuer()}>
            Sign in with {new URL(oidc.issuer).host}
          </button>
        </>
      )}
    </main>
  );
}

export { navigate };
