import { describe, expect, it } from "vitest";
import { challenge } from "../src/oidc";

describe("PKCE", () => {
  it("derives the S256 challenge of RFC 7636's example verifier", async () => {
    expect(await challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")).toBe("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  });
});
