// What every A2UI component gets beside its own Comp and Scope (see Node.svelte).
import type { Scope } from '../../lib/a2ui/resolve';
import type { Comp } from '../../lib/a2ui/model.svelte';

/** A press on a Button: the surface, the component's id (a template item's component id), the action's name and resolved context. */
export interface A2uiActionEvent {
  surfaceId: string;
  componentId: string;
  name: string;
  context: Record<string, unknown>;
  /** The surface's whole data model, only for a v0.9 surface created with sendDataModel: true. */
  dataModel?: Record<string, unknown>;
}

export interface RenderCtx {
  onaction: (e: A2uiActionEvent) => void;
  /** The ids from the root down to the parent (cycles and depth are checked against it). */
  ancestors: readonly string[];
  /** Inside a Button: Text draws as a span (phrasing content only). */
  inline?: boolean;
}

export interface CompProps {
  comp: Comp;
  scope: Scope;
  r: RenderCtx;
}
