// Audit view helpers (SPEC §5.1; docs/PROTOCOL.md audit.tail): shapes, the call, filters, formatting.
import type { GatewayClient } from './gateway';

export interface AuditEntry {
  timestamp: string;
  operation: string;
  role: string;
  target: string;
  result: 'allowed' | 'denied' | (string & {});
  reason: string;
  session?: string;
  ip?: string;
}

export interface AuditFilter {
  role?: string;
  result?: '' | 'allowed' | 'denied';
  operation?: string;
  n?: number;
  /** Leave out routine entries (the server's audit.Routine: allowed listings, admin's own reads). */
  hideRoutine?: boolean;
}

export interface AuditPage {
  entries: AuditEntry[];
  corrupt: number;
}

/** The audit.tail params for a filter: empty fields left out, text trimmed. */
export function auditParams(f: AuditFilter): Record<string, unknown> {
  const p: Record<string, unknown> = { n: f.n ?? 200 };
  const role = f.role?.trim();
  const op = f.operation?.trim();
  if (role) p.role = role;
  if (f.result) p.result = f.result;
  if (op) p.operation = op;
  if (f.hideRoutine) p.hideRoutine = true;
  return p;
}

/** audit.tail, newest first (the server's order; sorted again in case of equal stamps across files). */
export async function tailAudit(gw: GatewayClient, f: AuditFilter): Promise<AuditPage> {
  const res = await gw.request<{ entries?: AuditEntry[]; corrupt?: number }>('audit.tail', auditParams(f));
  const entries = Array.isArray(res.entries) ? [...res.entries] : [];
  entries.sort((a, b) => Date.parse(b.timestamp) - Date.parse(a.timestamp));
  return { entries, corrupt: typeof res.corrupt === 'number' ? res.corrupt : 0 };
}

/** Operations the guard audits (for the filter's suggestions). */
export const AUDIT_OPERATIONS = ['get', 'files', 'search', 'write', 'note', 'import', 'promote', 'resolve', 'conflicts', 'audit.tail'];

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

/** Local "YYYY-MM-DD HH:MM:SS" of an RFC 3339 stamp (the stamp itself when it does not parse). */
export function formatAuditTime(ts: string): string {
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return ts;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** Local "YYYY-MM-DD HH:MM" of a Unix ms time. */
export function formatMs(ms: number): string {
  const d = new Date(ms);
  if (!Number.isFinite(ms) || Number.isNaN(d.getTime())) return '?';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
