export const UI_VERSION = '0.1.0';
export const CLIENT_ID = 'atrium-ui';
export const PROTOCOL_VERSION = 1;
