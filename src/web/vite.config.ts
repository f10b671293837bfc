/**
 * The dashboard's build: `src/web` → `dist/web`, served by `gatehouse serve` at `/` (src/web-serve.ts).
 * No inline scripts or styles, so the Content-Security-Policy can allow only 'self'.
 */
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export const WEB_ROOT = fileURLToPath(new URL('.', import.meta.url));
export const WEB_OUT_DIR = fileURLToPath(new URL('../../dist/web', import.meta.url));

export default defineConfig({
  root: WEB_ROOT,
  base: '/',
  plugins: [react()],
  logLevel: 'warn',
  build: {
    outDir: WEB_OUT_DIR,
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
    rolldownOptions: {
      output: {
        // React and the other libraries in a chunk of their own: cached across releases of the app's code.
        manualChunks: (id: string) => (id.includes('/node_modules/') ? 'vendor' : undefined),
      },
    },
  },
});
