/// <reference types="vitest/config" />
// One entry per server-rendered page; Django's `{% vite_entry "name" %}` reads the manifest
// (dist/.vite/manifest.json) and emits the tags, and whitenoise serves dist/ under /static/.
import { resolve } from "node:path";
import { defineConfig } from "vite";

const ENTRIES = ["app", "home", "workspace", "review", "runs", "pools", "flywheel", "fleet"] as const;

export default defineConfig({
  base: "/static/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    manifest: true,
    target: "es2022",
    rolldownOptions: {
      input: Object.fromEntries(
        ENTRIES.map((name) => [name, resolve(import.meta.dirname, `src/entries/${name}.ts`)]),
      ),
    },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "happy-dom",
  },
});
