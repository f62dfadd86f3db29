// Svelte 5 understands TypeScript in <script lang="ts"> natively; no preprocessing needed.
export default {};
