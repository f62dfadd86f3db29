// The A2UI browser benchmark and screenshot page (bench/index.html), built apart from the app into
// bench-dist/ by `npm run bench:build`; frontend/bench_test.go serves it and drives it with chromedp.
import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig({
  base: './',
  root: 'bench',
  plugins: [svelte()],
  build: { outDir: '../bench-dist', emptyOutDir: true, sourcemap: false, reportCompressedSize: false },
});
