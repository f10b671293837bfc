import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    env: { NODE_ENV: 'test' },
    // Builds the dashboard into dist/web when it is missing or older than src/web (the browser tests serve it).
    globalSetup: ['test/web/global-setup.ts'],
  },
});
