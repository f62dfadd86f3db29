import './app.css';
import { mount } from 'svelte';
import App from './App.svelte';
import { GatewayClient } from './lib/gateway';
import { browserSettings, instanceId } from './lib/settings';

function sessionStore(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

const settings = browserSettings();
const gw = new GatewayClient({
  url: settings.wsUrl,
  token: settings.token,
  instanceId: instanceId(sessionStore()),
});

const target = document.getElementById('app');
if (!target) throw new Error('#app is missing from index.html');
const app = mount(App, { target, props: { gw } });
gw.start();

export default app;
