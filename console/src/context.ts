// The app's context, apart from the app: the views read it, the app provides it (no import circle).
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { ConsoleConfig, Me, ServerInfo } from "./types";

export interface Ctx {
  me: Me;
  config: ConsoleConfig;
  info: ServerInfo;
  inboxCount: number;
  refreshInbox: () => void;
}

export const AppContext = createContext<Ctx | null>(null);

export function useApp(): Ctx {
  const ctx = useContext(AppContext);
  if (!ctx) throw new Error("useApp outside the app");
  return ctx;
}
