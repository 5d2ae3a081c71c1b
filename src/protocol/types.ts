/** The few MCP shapes the hub reads. Everything else is forwarded as opaque JSON. */
export interface Implementation {
  name: string;
  version: string;
  title?: string;
  [k: string]: unknown;
}
export type ClientCapabilities = {
  roots?: { listChanged?: boolean };
  sampling?: Record<string, unknown>;
  elicitation?: { form?: Record<string, unknown>; url?: Record<string, unknown> };
  experimental?: Record<string, unknown>;
  extensions?: Record<string, unknown>;
  [k: string]: unknown;
};
export type ServerCapabilities = {
  tools?: { listChanged?: boolean };
  prompts?: { listChanged?: boolean };
  resources?: { subscribe?: boolean; listChanged?: boolean };
  logging?: Record<string, unknown>;
  completions?: Record<string, unknown>;
  experimental?: Record<string, unknown>;
  extensions?: Record<string, unknown>;
  [k: string]: unknown;
};
export interface Tool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
  [k: string]: unknown;
}
export interface Prompt {
  name: string;
  description?: string;
  arguments?: { name: string; required?: boolean; description?: string }[];
  [k: string]: unknown;
}
export interface Resource {
  uri: string;
  name: string;
  [k: string]: unknown;
}
export interface ResourceTemplate {
  uriTemplate: string;
  name: string;
  [k: string]: unknown;
}
export type LoggingLevel = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';
export const LOG_LEVELS: readonly LoggingLevel[] = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

export interface ProgressInfo {
  progress: number;
  total?: number;
  message?: string;
  /** The notification's own `_meta` (third-party keys), passed on as it came. */
  _meta?: Record<string, unknown>;
}

/** A server-to-client request (legacy) or an input request (modern MRTR). */
export interface InputRequest {
  method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list' | string;
  params?: Record<string, unknown>;
}
