import { defineConfig } from 'vitest/config';
import type { Plugin } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { svelteTesting } from '@testing-library/svelte/vite';

// vite empties dist/ on every build; keep the tracked placeholder that lets
// `//go:embed all:dist` compile before the first build.
function keepGitkeep(): Plugin {
  return {
    name: 'atrium-keep-gitkeep',
    apply: 'build',
    generateBundle() {
      this.emitFile({ type: 'asset', fileName: '.gitkeep', source: '' });
    },
  };
}

export default defineConfig({
  // Relative asset URLs: the same build is served at http://127.0.0.1:18789/
  // and inside the Wails window.
  base: './',
  plugins: [svelte(), svelteTesting(), keepGitkeep()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    reportCompressedSize: false,
    // Two pages of one build: the UI (index.html) and the phone page (/pair → pair/index.html).
    rollupOptions: {
      input: { main: 'index.html', pair: 'pair/index.html' },
    },
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.ts'],
    // Generous: a loaded 2-CPU machine runs the first App test (compile included) in seconds, not 5.
    testTimeout: 30_000,
  },
});
