// Client routes on the History API; skyloop dev and CloudFront answer any extension-less path
// outside the API with index.html, so every route below can be loaded or reloaded directly.

import { useEffect, useState } from "preact/hooks";

export type Route =
  | { name: "sessions" }
  | { name: "inbox" }
  | { name: "session"; id: string }
  | { name: "agents" }
  | { name: "agent"; id: string }
  | { name: "schedules" }
  | { name: "webhooks" }
  | { name: "callback" }
  | { name: "not_found" };

export function parse(pathname: string): Route {
  const parts = pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { name: "sessions" };
  if (parts[0] === "inbox" && parts.length === 1) return { name: "inbox" };
  if (parts[0] === "sessions" && parts.length === 1) return { name: "sessions" };
  if (parts[0] === "sessions" && parts.length === 2 && parts[1]) return { name: "session", id: parts[1] };
  if (parts[0] === "agents" && parts.length === 1) return { name: "agents" };
  if (parts[0] === "agents" && parts.length === 2 && parts[1]) return { name: "agent", id: parts[1] };
  if (parts[0] === "schedules" && parts.length === 1) return { name: "schedules" };
  if (parts[0] === "webhooks" && parts.length === 1) return { name: "webhooks" };
  if (parts[0] === "oidc" && parts[1] === "callback") return { name: "callback" };
  return { name: "not_found" };
}

export function navigate(path: string): void {
  if (path === location.pathname + location.search) return;
  history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate"));
}

export function useLocation(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const onPop = (): void => setPath(location.pathname);
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);
  return path;
}

/** A link's click handler: in-app navigation unless the user asked for a new tab or window. */
export function onLinkClick(event: MouseEvent): void {
  const anchor = event.currentTarget as HTMLAnchorElement;
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(anchor.getAttribute("href") ?? "/");
}
