import { describe, expect, it } from "vitest";
import { parse } from "../src/router";

describe("routes", () => {
  it("maps paths to views", () => {
    expect(parse("/")).toEqual({ name: "sessions" });
    expect(parse("/inbox")).toEqual({ name: "inbox" });
    expect(parse("/sessions/abc")).toEqual({ name: "session", id: "abc" });
    expect(parse("/agents/x%20y")).toEqual({ name: "agent", id: "x y" });
    expect(parse("/schedules")).toEqual({ name: "schedules" });
    expect(parse("/schedules/x")).toEqual({ name: "not_found" });
    expect(parse("/oidc/callback")).toEqual({ name: "callback" });
    expect(parse("/sessions/a/b")).toEqual({ name: "not_found" });
  });
});
