/// <reference types="vitest/config" />
import { defineConfig } from "vite";

// Preact through esbuild's automatic JSX runtime (tsconfig's jsxImportSource): no Babel plugin.
export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    reportCompressedSize: true,
    modulePreload: { polyfill: false }, // the polyfill is an inline script, which the CSP refuses
  },
  server: {
    // `npm run dev` against a running `skyloop dev` on :8080
    proxy: { "/v1": "http://127.0.0.1:8080", "/api": "http://127.0.0.1:8080", "/health": "http://127.0.0.1:8080" },
  },
  test: { environment: "node", include: ["tests/**/*.test.ts"] },
});
