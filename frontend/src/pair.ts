// The phone page (/pair, issue 16): a second entry of the same UI build, served by the gateway.
// It pairs this browser as a device (lib/phone.ts) and then serves as a node and shows the chat.
import './app.css';
import { mount } from 'svelte';
import PairApp from './PairApp.svelte';
import { wsUrlFor } from './lib/settings';
import { parsePairFragment } from './lib/pairing';
import { PhoneSession, deviceDisplayName, indexedDBStore } from './lib/phone';
import { safeGet, safeSet, uuid } from './lib/util';

// Off loopback the page is HTTPS and the link must carry the certificate's fingerprint (the words to compare).
const fragment = parsePairFragment(window.location.hash, window.location.protocol === 'https:');
// The code must not stay in the address bar (history, a shared screenshot): it is read once.
if (window.location.hash) {
  try {
    window.history.replaceState(window.history.state, '', window.location.pathname + window.location.search);
  } catch {
    /* ignore */
  }
}

// One presence entry per device, across reloads: a stable id kept with the page's origin.
function deviceInstanceId(): string {
  let storage: Storage | null = null;
  try {
    storage = window.localStorage;
  } catch {
    storage = null;
  }
  const key = 'atrium.phone.instanceId';
  const id = safeGet(storage, key) || uuid();
  safeSet(storage, key, id);
  return id;
}

const session = new PhoneSession({
  wsUrl: wsUrlFor(window.location),
  store: indexedDBStore(),
  fragment,
  instanceId: deviceInstanceId(),
  displayName: deviceDisplayName(navigator.userAgent),
});

const target = document.getElementById('app');
if (!target) throw new Error('#app is missing from pair/index.html');
const app = mount(PairApp, { target, props: { session } });
session.start();

export default app;
